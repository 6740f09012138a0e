"""The hand-written stub python/omtl/_native.pyi against the compiled module it describes.

No type checker is needed: the stub is parsed with ``ast`` and compared with what ``omtl._native``
exposes at runtime: every name at module level (and ``__all__``) and in each class (and vice
versa), which classes are final, the kind of each class member (method, static method, property,
constructor), the type of each constant, and,
from the ``__text_signature__`` PyO3 gives every function it wraps, each parameter's name, order,
kind (positional or keyword-only) and default value. Defaults in the stub are therefore written
as literals, not ``...``. Type aliases annotated ``TypeAlias`` exist only in the stub.
"""

from __future__ import annotations

import ast
import inspect
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from omtl import _native

STUB_PATH = Path(_native.__file__).with_name("_native.pyi")

# What every class's __dict__ holds besides the items the binding defines (``__new__`` is the
# constructor and is compared separately; an exception class also has ``__weakref__``).
CLASS_BOOKKEEPING = {"__doc__", "__module__", "__new__", "__weakref__"}

# The type flag that allows subclassing (a #[pyclass] without `subclass` lacks it: @final).
Py_TPFLAGS_BASETYPE = 1 << 10

Param = tuple[str, str, "str | None"]  # (name, inspect kind name, repr of the default or None)


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


# ---- the stub side ---------------------------------------------------------------------------


@dataclass
class StubClass:
    final: bool = False
    constructor: ast.FunctionDef | None = None
    members: dict[str, tuple[str, ast.FunctionDef]] = field(default_factory=dict)  # name -> (kind, def)


@dataclass
class Stub:
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    classes: dict[str, StubClass] = field(default_factory=dict)
    constants: dict[str, ast.expr] = field(default_factory=dict)  # name -> annotation
    all: list[str] | None = None

    def names(self) -> set[str]:
        return set(self.functions) | set(self.classes) | set(self.constants)


def member_kind(fn: ast.FunctionDef) -> str:
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    if len(decorators) != len(fn.decorator_list) or len(decorators) > 1:
        raise ValueError(f"{fn.name}: unsupported decorators in the stub")
    return decorators.pop() if decorators else "method"


def is_type_alias(node: ast.AnnAssign) -> bool:
    return isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias"


def parse_stub(source: str) -> Stub:
    stub = Stub()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef):
            stub.functions[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not is_type_alias(node):
            stub.constants[node.target.id] = node.annotation
        elif isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            stub.all = ast.literal_eval(node.value)
        elif isinstance(node, ast.ClassDef):
            final = any(isinstance(d, ast.Name) and d.id == "final" for d in node.decorator_list)
            cls = stub.classes[node.name] = StubClass(final=final)
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("__new__", "__init__"):
                    if cls.constructor is not None:
                        raise ValueError(f"{node.name}: both __new__ and __init__ in the stub")
                    cls.constructor = item
                elif isinstance(item, ast.FunctionDef):
                    cls.members[item.name] = (member_kind(item), item)
    return stub


def stub_parameters(fn: ast.FunctionDef, *, bound: bool) -> list[Param]:
    a = fn.args
    positional = [(p.arg, "POSITIONAL_ONLY") for p in a.posonlyargs] + [
        (p.arg, "POSITIONAL_OR_KEYWORD") for p in a.args
    ]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    params = [(name, kind, d) for (name, kind), d in zip(positional, defaults)]
    if a.vararg:
        params.append((a.vararg.arg, "VAR_POSITIONAL", None))
    params += [(p.arg, "KEYWORD_ONLY", d) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        params.append((a.kwarg.arg, "VAR_KEYWORD", None))
    params = [(name, kind, None if d is None else repr(ast.literal_eval(d))) for name, kind, d in params]
    return params[1:] if bound else params  # drop self / cls


# ---- the runtime side ------------------------------------------------------------------------


def runtime_kind(attr) -> str:
    if isinstance(attr, staticmethod):
        return "staticmethod"
    if isinstance(attr, classmethod) or type(attr).__name__ == "classmethod_descriptor":
        return "classmethod"
    if inspect.isgetsetdescriptor(attr) or isinstance(attr, property):
        return "property"
    if inspect.ismethoddescriptor(attr):
        return "method"
    return f"unknown ({type(attr).__name__})"


def has_constructor(cls: type) -> bool:
    """Whether the binding defines a constructor (``#[new]``). Built for the stable ABI (abi3), a
    class without one still has a ``__new__`` that raises "No constructor defined", but no
    ``__text_signature__``; a ``#[new]`` always gives the class one."""
    return "__new__" in vars(cls) and getattr(cls, "__text_signature__", None) is not None


def runtime_members(cls: type) -> dict[str, str]:
    return {name: runtime_kind(attr) for name, attr in vars(cls).items() if name not in CLASS_BOOKKEEPING}


def runtime_public_names() -> set[str]:
    # Submodules (the test-only ``_testing``) are not described by the stub.
    return {name for name in dir(_native) if not is_dunder(name) and not inspect.ismodule(getattr(_native, name))}


def runtime_callables():
    """(qualified name, runtime object, bound) for every function, constructor and method."""
    for name in sorted(runtime_public_names()):
        obj = getattr(_native, name)
        if isinstance(obj, type):
            if has_constructor(obj):
                yield name, obj, False  # the class's __text_signature__ is the constructor's
            for member, kind in sorted(runtime_members(obj).items()):
                if kind in ("method", "classmethod"):
                    yield f"{name}.{member}", getattr(obj, member), kind == "method"
                elif kind == "staticmethod":
                    yield f"{name}.{member}", getattr(obj, member), False
        elif callable(obj):
            yield name, obj, False


def runtime_parameters(obj, *, bound: bool) -> list[Param]:
    params = [
        (p.name, p.kind.name, None if p.default is p.empty else repr(p.default))
        for p in inspect.signature(obj).parameters.values()
    ]
    return params[1:] if bound else params


# ---- the comparison --------------------------------------------------------------------------


def name_problems(stub: Stub) -> list[str]:
    problems = []
    runtime = runtime_public_names()
    problems += [f"{name}: in omtl._native but not in the stub" for name in sorted(runtime - stub.names())]
    problems += [f"{name}: in the stub but not in omtl._native" for name in sorted(stub.names() - runtime)]
    if sorted(stub.all or []) != sorted(_native.__all__):
        problems.append(f"__all__: {sorted(_native.__all__)} at runtime, {sorted(stub.all or [])} in the stub")
    for name in sorted(runtime & stub.names()):
        obj = getattr(_native, name)
        if isinstance(obj, type):
            if name not in stub.classes:
                problems.append(f"{name}: a class at runtime, not in the stub")
                continue
            problems += class_problems(name, obj, stub.classes[name])
        elif callable(obj):
            if name not in stub.functions:
                problems.append(f"{name}: a function at runtime, not in the stub")
        elif name not in stub.constants:
            problems.append(f"{name}: a constant at runtime, not in the stub")
        else:
            problems += constant_problems(name, obj, stub.constants[name])
    return problems


def class_problems(name: str, cls: type, stub_class: StubClass) -> list[str]:
    problems = []
    if bool(cls.__flags__ & Py_TPFLAGS_BASETYPE) == stub_class.final:
        problems.append(f"{name}: mark it @final in the stub exactly when it cannot be subclassed at runtime")
    if has_constructor(cls) != (stub_class.constructor is not None):
        has = "has" if has_constructor(cls) else "has no"
        problems.append(f"{name}: {has} constructor at runtime but the stub disagrees")
    runtime = runtime_members(cls)
    stub = {member: kind for member, (kind, _) in stub_class.members.items()}
    for member in sorted(set(runtime) | set(stub)):
        if member not in stub:
            problems.append(f"{name}.{member}: in omtl._native but not in the stub")
        elif member not in runtime:
            problems.append(f"{name}.{member}: in the stub but not in omtl._native")
        elif runtime[member] != stub[member]:
            problems.append(f"{name}.{member}: a {runtime[member]} at runtime, a {stub[member]} in the stub")
    return problems


def constant_problems(name: str, value, annotation: ast.expr) -> list[str]:
    # Final[T] or T, with T a plain type name.
    if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Name):
        if annotation.value.id == "Final":
            annotation = annotation.slice
    if not isinstance(annotation, ast.Name):
        return [f"{name}: annotate it with a plain type name (or Final[name]) so it can be checked"]
    if annotation.id != type(value).__name__:
        return [f"{name}: {type(value).__name__} at runtime, annotated {annotation.id} in the stub"]
    return []


def stub_definition(stub: Stub, qualname: str) -> ast.FunctionDef | None:
    if qualname in stub.functions:
        return stub.functions[qualname]
    if qualname in stub.classes:
        return stub.classes[qualname].constructor
    cls, _, member = qualname.partition(".")
    if cls in stub.classes and member in stub.classes[cls].members:
        return stub.classes[cls].members[member][1]
    return None


def signature_problems(stub: Stub) -> list[str]:
    problems = []
    for qualname, obj, bound in runtime_callables():
        if getattr(obj, "__text_signature__", None) is None:
            problems.append(f"{qualname}: no __text_signature__ at runtime, so its signature cannot be checked")
            continue
        definition = stub_definition(stub, qualname)
        if definition is None:
            continue  # reported by name_problems
        is_constructor = "." not in qualname and isinstance(obj, type)
        want = runtime_parameters(obj, bound=bound)
        got = stub_parameters(definition, bound=bound or is_constructor)
        if want != got:
            problems.append(f"{qualname}: runtime {want} != stub {got}")
    return problems


# ---- the tests -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stub_source() -> str:
    return STUB_PATH.read_text(encoding="utf-8")


def test_stub_declares_exactly_what_the_module_exposes(stub_source):
    assert name_problems(parse_stub(stub_source)) == []


def test_stub_signatures_match_the_text_signatures(stub_source):
    assert signature_problems(parse_stub(stub_source)) == []


def test_every_callable_is_checked():
    # The signature check covers the functions, the constructor and the methods of all classes.
    qualnames = {qualname for qualname, _, _ in runtime_callables()}
    assert {"splitmix64_permutation", "NativeKernel", "NativeKernel.matrix", "NativeLearner.build"} <= qualnames
    assert "NativeLearner" not in qualnames  # no #[new]: built by NativeLearner.build only


@pytest.mark.parametrize(
    "old, new, expected",
    [
        # a renamed keyword-only parameter
        ("n_tasks: int | None = None", "tasks: int | None = None", "NativeLearner.build: runtime"),
        # a default dropped
        ("sparse: bool = False", "sparse: bool", "NativeLearner.build: runtime"),
        # a default changed
        ("sparse: bool = False", "sparse: bool = True", "NativeLearner.build: runtime"),
        # keyword-only parameters made positional
        ("        *,\n        n_features: int,", "        n_features: int,", "NativeLearner.build: runtime"),
        # a method removed
        ("    def max_diag(self) -> float: ...\n", "", "NativeTaskKernel.max_diag: in omtl._native"),
        # a property turned into a method
        ("    @property\n    def n_active(self)", "    def n_active(self)", "NativeLearner.n_active: a property"),
        # a method that does not exist
        ("class NativeKernel:\n", "class NativeKernel:\n    def extra(self) -> None: ...\n", "NativeKernel.extra"),
        # a constructor where the binding has none
        ("class NativeLearner:\n", "class NativeLearner:\n    def __init__(self) -> None: ...\n", "NativeLearner:"),
        # a function removed
        ("def splitmix64_permutation(", "def _splitmix64_permutation(", "splitmix64_permutation: in omtl"),
        # a class no longer final
        ("@final\nclass NativeKernel:", "class NativeKernel:", "NativeKernel: mark it @final"),
        # __all__ out of date
        ('    "simd_level",\n', "", "__all__"),
        # a constant's type
        ("STATE_VERSION: Final[int]", "STATE_VERSION: Final[str]", "STATE_VERSION: int at runtime"),
    ],
)
def test_the_checks_catch_drift(stub_source, old, new, expected):
    assert stub_source.count(old) == 1, f"the stub no longer contains {old!r}: update this test"
    stub = parse_stub(stub_source.replace(old, new))
    problems = name_problems(stub) + signature_problems(stub)
    assert any(p.startswith(expected) for p in problems), problems
