# Shortcuts for developers. CI (.ci/run) runs the README's test command and `make test-simd-levels`.
PYTHON ?= python3

.PHONY: docs dev test test-rust test-python test-simd-levels check-inlining lint fmt bench

# Build the extension in release mode into python/omtl (for PYTHONPATH=python runs).
dev:
	cargo build --release --features python,pyo3/extension-module,pyo3/abi3-py39
	rm -f python/omtl/_native*.so  # an older build's file would shadow this one
	cp target/release/libomtl.so python/omtl/_native.abi3.so

test-rust:
	cargo test --quiet

test-python:
	$(PYTHON) -m pytest -q

test: test-rust test-python

# The Rust unit tests and the native/reference parity and invariant tests again under every SIMD build this CPU runs
# (OMTL_SIMD; the fused builds change last bits, so a CPU-dependent failure shows on any machine).
PARITY_TESTS := tests/test_parity.py tests/test_romco.py tests/test_budget.py tests/test_projectron.py \
	tests/test_omtl_rounds.py tests/test_perceptron_invariants.py tests/test_baselines.py tests/test_pa.py tests/test_open_tasks.py
test-simd-levels:
	@for level in $$($(PYTHON) -c "import omtl._simd as s; print(*s.supported_simd_levels())"); do \
		echo "== OMTL_SIMD=$$level"; \
		OMTL_SIMD=$$level cargo test --quiet --lib || exit 1; \
		OMTL_SIMD=$$level $(PYTHON) -m pytest -q -p no:cacheprovider $(PARITY_TESTS) || exit 1; \
	done

# No SIMD intrinsic or array closure left out of line in the built extension (after `make dev`).
check-inlining:
	bash benches/check_inlining.sh

lint:
	cargo fmt --check
	cargo clippy --all-targets --features python,bench -- -D warnings
	ruff check python tests benches

fmt:
	cargo fmt
	ruff check --fix python tests benches

# The documentation site (strict: a warning fails) with the Rust API beside it in site/rust/.
# Needs the docs extra: pip install -e ".[docs]".
docs:
	NO_MKDOCS_2_WARNING=1 mkdocs build --strict
	cargo doc --no-deps --quiet --features serve
	rm -rf site/rust && cp -r target/doc site/rust
