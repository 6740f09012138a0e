"""The package's imports point down: no import cycle among omtl's modules, and no private name
(``_name``) of one module used by another (docs/DECISIONS.md, "Package structure").

The graph is read from the source (``ast``), imports inside functions included: a cycle hidden
in a function still ties two modules together. Importing ``a.b.c`` runs the package ``a.b``
first, so an import of a module also counts as an import of the packages above it (those the
importer is not itself inside). Private *modules* (``._base``) may be imported; a private *name*
defined in another module may not, whether imported (``from .x import _name``) or read from an
imported module (``x._name``): a module offers what others need under a public name.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

import omtl

PACKAGE_DIR = Path(omtl.__file__).parent
# The compiled extension and its submodule: modules without a source file here.
EXTENSION_MODULES = {"omtl._native", "omtl._native._testing"}


@dataclass
class Module:
    name: str
    path: Path | None
    is_package: bool = False
    imports: dict[str, int] = field(default_factory=dict)  # module -> first line importing it
    private_uses: list[str] = field(default_factory=list)  # "line N: from x import _y"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def source_modules() -> dict[str, Module]:
    modules = {}
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        parts = ["omtl", *path.relative_to(PACKAGE_DIR).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        modules[name] = Module(name, path, is_package)
    for name in EXTENSION_MODULES:
        modules[name] = Module(name, None)
    return modules


def import_base(module: Module, node: ast.ImportFrom) -> str | None:
    """The absolute module a ``from ... import`` reads from (None: outside omtl)."""
    if node.level == 0:
        base = node.module or ""
        return base if base == "omtl" or base.startswith("omtl.") else None
    parts = module.name.split(".")
    if not module.is_package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def read_imports(module: Module, modules: dict[str, Module]) -> None:
    tree = ast.parse(module.path.read_text(encoding="utf-8"), filename=str(module.path))
    bound: dict[str, str] = {}  # a local name -> the omtl module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = import_base(module, node)
            if base is None:
                continue
            for alias in node.names:
                target = f"{base}.{alias.name}"
                if target in modules:  # `from . import submodule`
                    module.imports.setdefault(target, node.lineno)
                    bound[alias.asname or alias.name] = target
                    continue
                module.imports.setdefault(base, node.lineno)
                if is_private(alias.name) and base != module.name:
                    module.private_uses.append(f"line {node.lineno}: from {base} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    module.imports.setdefault(alias.name, node.lineno)
                    if alias.asname:
                        bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            owner = bound[node.value.id]
            if is_private(node.attr) and f"{owner}.{node.attr}" not in modules and owner != module.name:
                module.private_uses.append(f"line {node.lineno}: {owner}.{node.attr}")


def import_graph() -> dict[str, Module]:
    modules = source_modules()
    for module in modules.values():
        if module.path is not None:
            read_imports(module, modules)
    # Importing a.b.c runs the package a.b first (unless the importer is inside it already).
    for module in modules.values():
        for target, line in list(module.imports.items()):
            parts = target.split(".")
            for i in range(1, len(parts)):
                package = ".".join(parts[:i])
                inside = module.name == package or module.name.startswith(package + ".")
                if package in modules and not inside:
                    module.imports.setdefault(package, line)
        module.imports.pop(module.name, None)
    return modules


def find_cycles(modules: dict[str, Module]) -> list[list[str]]:
    """One cycle (as a path a -> ... -> a) per strongly connected group of modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(name: str) -> None:  # Tarjan's algorithm (the graph is a few dozen modules deep at most)
        index[name] = low[name] = len(index)
        stack.append(name)
        on_stack.add(name)
        for target in modules[name].imports:
            if target not in index:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in on_stack:
                low[name] = min(low[name], index[target])
        if low[name] == index[name]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == name:
                    break
            if len(group) > 1:
                groups.append(group)

    for name in sorted(modules):
        if name not in index:
            visit(name)
    return [cycle_within(modules, set(group)) for group in groups]


def cycle_within(modules: dict[str, Module], group: set[str]) -> list[str]:
    """A path from the group's first module back to itself, through the group (breadth first)."""
    start = min(group)
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for name in frontier:
            for target in sorted(modules[name].imports):
                if target == start:
                    path = [name]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if target in group and target not in previous:
                    previous[target] = name
                    following.append(target)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def describe(modules: dict[str, Module], cycle: list[str]) -> str:
    return " -> ".join(
        f"{a} (line {modules[a].imports[b]})" for a, b in zip(cycle, cycle[1:])
    ) + f" -> {cycle[-1]}"


def test_the_graph_is_read_from_every_module():
    modules = import_graph()
    assert len([m for m in modules.values() if m.path is not None]) == len(list(PACKAGE_DIR.rglob("*.py")))
    # a function-level import counts (omtl.cli imports the experiments inside `omtl reproduce`)
    assert "omtl.experiments.table1" in modules["omtl.cli"].imports
    assert "omtl.learners" in modules["omtl.persistence"].imports
    # importing a module imports the packages above it
    assert "omtl.learners" in modules["omtl.reference.pa"].imports


def test_no_import_cycle():
    modules = import_graph()
    cycles = [describe(modules, cycle) for cycle in find_cycles(modules)]
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_no_private_name_of_another_module():
    offences = [f"{m.name}: {use}" for m in import_graph().values() for use in m.private_uses]
    assert not offences, "private names used across modules:\n" + "\n".join(offences)


def test_the_checks_find_a_cycle_and_a_private_name(tmp_path):
    # The same functions on a made-up graph: a -> b -> c -> a (the cycle named in order) and d.
    fake = {name: Module(name, None) for name in ("p.a", "p.b", "p.c", "p.d")}
    fake["p.a"].imports = {"p.b": 3}
    fake["p.b"].imports = {"p.c": 4, "p.d": 5}
    fake["p.c"].imports = {"p.a": 6}
    assert find_cycles(fake) == [["p.a", "p.b", "p.c", "p.a"]]
    assert describe(fake, ["p.a", "p.b", "p.c", "p.a"]) == "p.a (line 3) -> p.b (line 4) -> p.c (line 6) -> p.a"
    source = tmp_path / "e.py"
    source.write_text("from . import f\n\ndef g():\n    from .f import _h\n    return f._k\n")
    module = Module("omtl.e", source)
    read_imports(module, {"omtl.e": module, "omtl.f": Module("omtl.f", None)})
    assert module.imports == {"omtl.f": 1}
    assert module.private_uses == ["line 4: from omtl.f import _h", "line 5: omtl.f._k"]
