"""The documentation site: every public Python name has an entry in the API reference (docs/api/),
and every page of docs/ the site shows is in its navigation. The site itself is built by CI with
``mkdocs build --strict`` (a warning, a broken link or anchor fails)."""

from __future__ import annotations

import importlib
import inspect
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
API = ROOT / "docs" / "api"
# The public modules and their public names (``__all__`` where they have one).
PUBLIC_MODULES = ["omtl", "omtl.datasets", "omtl.kernels", "omtl.graph", "omtl.persistence", "omtl.sklearn",
                  "omtl.river", "omtl.dask", "omtl.experiments", "omtl.reference", "omtl.shared_state"]


def public_names(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [n for n, v in vars(module).items() if not n.startswith("_") and getattr(v, "__module__", None) == module_name]


def documented_objects() -> set[int]:
    """ids of the objects the API pages document: each ``::: identifier`` (a module directive
    without a ``members:`` list documents its public names, with one the names listed), and each
    ``omtl....`` name written in backticks (objects the tools cannot read, such as the twins)."""
    ids: set[int] = set()

    def resolve(path: str):
        parts = path.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
            return obj
        raise ImportError(path)

    for page in API.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, re.M):
            obj = resolve(match[1])
            ids.add(id(obj))
            if isinstance(obj, types.ModuleType):
                listed = re.findall(r"^        - (\w+)$", match[2], re.M)
                if re.search(r"^      members: false$", match[2], re.M):
                    listed = []
                elif not listed:
                    listed = public_names(match[1])
                ids.update(id(getattr(obj, name)) for name in listed)
        for name in re.findall(r"`(omtl(?:\.\w+)+)`", text):
            try:
                ids.add(id(resolve(name)))
            except (ImportError, AttributeError):
                pass
    return ids


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_has_an_api_entry(module_name):
    pytest.importorskip("distributed") if module_name == "omtl.dask" else None
    module = importlib.import_module(module_name)
    documented = documented_objects()
    missing = [name for name in public_names(module_name)
               if not isinstance(getattr(module, name), types.ModuleType) and id(getattr(module, name)) not in documented]
    assert not missing, f"{module_name}: no entry in docs/api/ for {missing}"


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    listed = set(re.findall(r":\s*([\w/.-]+\.md)\s*$", nav, re.M))
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")
             if not p.relative_to(ROOT / "docs").as_posix().startswith("results/")}
    assert pages - listed == set()
    assert listed - pages == set()


SPHINX_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj|ref):`")


def _omtl_defined(member) -> bool:
    """Whether a class member is omtl's own (not inherited from scikit-learn, River, object)."""
    target = member.fget if isinstance(member, property) else member
    return (getattr(target, "__module__", None) or "").startswith("omtl")


def test_the_rendered_docstrings_hold_no_sphinx_role():
    """The site renders docstrings as Markdown (mkdocstrings): a Sphinx role such as
    ``:class:`x``` would print literally. Every public object's docstring, its members' and its
    module's use plain ``code`` instead."""
    found = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        objects = [module] + [getattr(module, name) for name in public_names(module_name)]
        for obj in objects:
            members = [obj] + [m for _, m in inspect.getmembers(obj) if inspect.isclass(obj) and _omtl_defined(m)]
            for member in members:
                doc = member.__doc__ if isinstance(getattr(member, "__doc__", None), str) else ""
                if SPHINX_ROLE.search(doc):
                    found.append(f"{getattr(obj, '__name__', obj)}: {SPHINX_ROLE.search(doc)[0]}")
    assert not found, sorted(set(found))


def test_the_site_shows_no_private_base_and_wraps_signatures():
    """A class's "Bases:" line would name private classes (omtl._base.OnlineClassifier, mixins):
    every page documenting a class with a private base turns it off. Signatures wrap rather than
    being cut when no formatter lays them out (the site's CSS)."""
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in API.glob("*.md"):
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^::: ([\w.]+)\n((?:    .*\n)*)", text, re.M):
            obj = None
            try:
                module, _, name = match[1].rpartition(".")
                obj = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError, ValueError):
                continue
            if inspect.isclass(obj) and any(base.__module__.split(".")[-1].startswith("_") or base.__name__.startswith("_")
                                            for base in obj.__bases__ if base is not object):
                assert "show_bases: false" in match[2], f"{page.name}: {match[1]} shows its private bases"
    css = re.search(r"^extra_css:\n((?:  - .*\n)+)", config, re.M)
    assert css, "mkdocs.yml has no extra_css"
    sheets = "".join((ROOT / "docs" / line.strip()[2:]).read_text() for line in css[1].splitlines())
    assert re.search(r"\.doc-signature[^{]*\{[^}]*white-space:\s*pre-wrap", sheets)
