"""The one learner registry: every public name has a native class, a reference twin, a native
kind the engine registers, and an entry in the conformance table."""

import importlib
import pkgutil
import re
from pathlib import Path

import numpy as np
import pytest
from learner_table import LEARNERS, learner_modules

import omtl
import omtl.learners
import omtl.reference
from omtl import _native, _registry
from omtl._native import NativeLearner


def test_both_packages_export_the_registry():
    assert omtl.learners.__all__ == omtl.reference.__all__ == _registry.EXPORTS
    for name in _registry.EXPORTS:
        native, twin = getattr(omtl.learners, name), getattr(omtl.reference, name)
        assert issubclass(twin, native), name


def test_every_native_class_builds_a_registered_kind_and_every_kind_is_used():
    kinds = {getattr(omtl.learners, name)._native_kind for name in _registry.LEARNERS}
    assert kinds == set(_native.LEARNER_KINDS)


def test_the_conformance_table_covers_every_learner():
    covered = {native.__name__ for _, native, _, _ in LEARNERS}
    assert covered == set(_registry.LEARNERS)


def table_learner_names(path: str, header: str) -> set[str]:
    """The class names (and aliases) in the first column of the learner table of ``path``."""
    text = (Path(__file__).resolve().parents[1] / path).read_text(encoding="utf-8")
    table = text[text.index(header) :].split("\n\n", 1)[0]
    rows = table.splitlines()[2:]
    return {name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])}


def test_every_kind_has_a_class_a_twin_test_settings_and_a_readme_row():
    """Adding a learner is the Rust learner, its line in learner_table! (src/learner/mod.rs), the
    Python class, its twin, its test file (with CONFORMANCE) and its rows in docs/learners.md and the README: this holds them
    together, so a learner missing any of them fails here by name."""
    classes = {name: getattr(omtl.learners, name) for name in _registry.LEARNERS}
    by_kind = {}
    for name, cls in classes.items():
        by_kind.setdefault(cls._native_kind, []).append(name)
    assert sorted(by_kind) == sorted(_native.LEARNER_KINDS), "a kind without a class, or a class of no kind"
    for name, cls in classes.items():
        assert name in omtl.reference.__all__ and issubclass(getattr(omtl.reference, name), cls), name
        assert getattr(omtl.reference, name).__module__ == f"omtl.reference.{cls.__module__.rsplit('.', 1)[1]}", name
    tested = {native.__name__ for _, native, twin, _ in LEARNERS}
    assert tested == set(classes), f"no CONFORMANCE entries in tests/test_<module>.py for {set(classes) - tested}"
    assert {cls.__module__.rsplit(".", 1)[1] for cls in classes.values()} == set(learner_modules())
    learners_page = table_learner_names("docs/learners.md", "| class | algorithm | memory | source |")
    assert learners_page == set(_registry.EXPORTS), "docs/learners.md's learner table and the registry differ"
    readme = table_learner_names("README.md", "| class | what it is | memory |")
    assert readme == set(_registry.LEARNERS), "the README's short learner table and the registry differ"


def defined_learners(package) -> dict[str, type]:
    """``{name: class}`` of the learners the public modules of ``package`` define: public classes
    that declare a native kind, and their aliases (another public name of the same class)."""
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, obj in vars(module).items():
            if not name.startswith("_") and isinstance(obj, type) and obj.__module__ == module.__name__ and getattr(obj, "_native_kind", ""):
                found[name] = obj
    return dict(sorted(found.items()))


@pytest.mark.parametrize("package", [omtl.learners, omtl.reference])
def test_the_explicit_lists_name_every_learner_a_module_defines(package):
    defined = defined_learners(package)
    assert package.__all__ == list(defined), f"{package.__name__}.__all__ and the learner classes its modules define differ"
    for name, cls in defined.items():
        assert getattr(package, name) is cls, name


def test_the_registry_holds_only_learners():
    """The registry takes the explicitly exported classes, which declare a native kind, and the
    aliases of such classes."""
    assert _registry.ALIASES == {"MTPRJ": "MTBPRJ", "MTPRJ2": "MTBPRJ2"}
    for name in _registry.EXPORTS:
        cls = getattr(omtl.learners, name)
        assert cls._native_kind in _native.LEARNER_KINDS and cls.__module__.startswith("omtl.learners."), name
    assert not {"KernelParamsMixin", "OnlineClassifier", "RoundCore", "ReferenceCore"} & set(_registry.EXPORTS)


def test_build_refuses_an_unknown_kind_and_a_missing_shape():
    with pytest.raises(ValueError, match='unknown learner kind "nope"'):
        NativeLearner.build("nope", {}, n_features=2, n_tasks=1)
    with pytest.raises(ValueError, match="n_tasks or a task_kernel"):
        NativeLearner.build("omtl", {"C": 1.0, "global_norm": "linf", "explicit": False}, n_features=2)


def test_build_checks_dimensions_and_parameters_in_one_place():
    params = {"C": 1.0, "global_norm": "linf", "explicit": False}
    with pytest.raises(ValueError, match="n_features"):
        NativeLearner.build("omtl", params, n_features=0, n_tasks=2)
    with pytest.raises(ValueError, match="`C`"):
        NativeLearner.build("omtl", {**params, "C": -1.0}, n_features=2, n_tasks=2)
    with pytest.raises(ValueError, match="global_norm|norm"):
        NativeLearner.build("omtl", {**params, "global_norm": "l7"}, n_features=2, n_tasks=2)
    graph = omtl.TaskGraph.complete(3).native()
    with pytest.raises(ValueError, match="task kernel has 3 tasks"):
        NativeLearner.build("mt_linear", {"loss": "logistic", "update": "sgd", "learning_rate": 0.5,
                                          "fit_intercept": True, "hash_bits": None, "shared_rate": 1.0},
                            n_features=2, n_tasks=2, task_kernel=graph)


def test_a_built_learner_learns_and_reports_its_kind():
    m = NativeLearner.build("passive_aggressive", {"shared": False, "C": 1.0, "variant": "pa1"}, n_features=2, n_tasks=2)
    scores = m.learn(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 1]), np.array([1.0, -1.0]))
    assert m.kind == "passive_aggressive" and scores.shape == (2,) and m.n_updates == 2


def test_a_state_that_cannot_be_restored_is_a_state_error_and_still_a_value_error():
    assert issubclass(omtl.StateError, ValueError)
    with pytest.raises(omtl.StateError, match="layout version"):
        NativeLearner.from_bytes(b"\x63\x00\x00\x00" + bytes(8))
    with pytest.raises(omtl.StateError):
        NativeLearner.from_bytes(b"\x01")
