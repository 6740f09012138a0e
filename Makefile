# One entry point for developers and CI (.ci/run calls `make test`).
PYTHON ?= python3
SO_SUFFIX := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")

.PHONY: dev test test-rust test-python lint fmt bench

# Build the extension in release mode into python/omtl (for PYTHONPATH=python runs).
dev:
	cargo build --release --features python,pyo3/extension-module
	cp target/release/libomtl.so python/omtl/_native$(SO_SUFFIX)

test-rust:
	cargo test --quiet

test-python:
	$(PYTHON) -m pytest -q

test: test-rust test-python

lint:
	cargo fmt --check
	cargo clippy --all-targets --features python -- -D warnings
	ruff check python tests benches

fmt:
	cargo fmt
	ruff check --fix python tests benches
