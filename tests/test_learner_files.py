"""Where a learner's name is written: the code files that name a learner class (or an alias)
are those docs/CONTRIBUTING.md lists ("Where a learner's name is written"), read from the
document itself so that the two cannot drift.

A code file is a tracked ``.py``, ``.pyi`` or ``.rs`` file outside ``tests/``, ``docs/``,
``benches/``, ``examples/`` and ``fuzz/``, and not a Rust test module (``tests.rs``,
``*_tests.rs``, an inline ``#[cfg(test)] mod``). A name counts where code holds it: in Python an
identifier or a string that is not a docstring, in Rust a string literal (the engine's own type
names, such as ``MTLinear``, are Rust's, not the Python class's); comments and docstrings aside.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

import omtl.learners

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = ROOT / "docs" / "CONTRIBUTING.md"
SECTION = "### Where a learner's name is written"
EXCLUDED = ("tests/", "docs/", "benches/", "examples/", "fuzz/")


def tracked_code_files() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "*.py", "*.pyi", "*.rs"], cwd=ROOT, capture_output=True,
                                text=True, timeout=60, check=True).stdout.split()
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    return [f for f in listed if not f.startswith(EXCLUDED) and not is_rust_test(f)]


def is_rust_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.endswith(".rs") and (name == "tests.rs" or name.endswith("_tests.rs"))


def python_words(source: str) -> set[str]:
    tree = ast.parse(source)
    # A string standing alone as a statement is prose: a docstring, or an attribute's below it.
    docstrings = {id(node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    words = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            words.add(node.id)
        elif isinstance(node, ast.Attribute):
            words.add(node.attr)
        elif isinstance(node, ast.alias):
            words.update([node.name.rsplit(".", 1)[-1], node.asname or ""])
        elif isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            words.add(node.name)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.update(re.findall(r"\w+", node.value))
    return words


def rust_words(source: str) -> set[str]:
    inline_tests = re.search(r"#\[cfg\(test\)\]\s*mod \w+\s*\{", source)
    if inline_tests:
        source = source[: inline_tests.start()]
    words = set()
    for line in source.splitlines():
        if line.lstrip().startswith("//"):
            continue
        for literal in re.findall(r'"((?:[^"\\]|\\.)*)"', line):
            words.update(re.findall(r"\w+", literal))
    return words


def named_learners() -> dict[str, set[str]]:
    """code file -> the learner names (classes and aliases) its code holds."""
    names = set(omtl.learners.__all__)
    found = {}
    for path in tracked_code_files():
        source = (ROOT / path).read_text(encoding="utf-8")
        words = rust_words(source) if path.endswith(".rs") else python_words(source)
        if words & names:
            found[path] = words & names
    return found


def contributing_lists() -> tuple[list[str], dict[str, set[str]]]:
    """The section's two lists: the paths every learner touches (``<module>``: its module's
    name; a path ending in ``/``: a folder) and {path: the learners it names by choice}."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    assert SECTION in text, f"docs/CONTRIBUTING.md has no section {SECTION!r}"
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    every, by_choice = section.split("\n#### ", 2)[1:3]
    touched = re.findall(r"^- `([^`]+)`", every, re.M)
    chosen = {path: set(re.findall(r"`(\w+)`", names))
              for path, names in re.findall(r"^- `([^`]+)` \(([^)]*)\)", by_choice, re.M)}
    return touched, chosen


def allowed(path: str, learner: str, touched: list[str], chosen: dict[str, set[str]]) -> bool:
    module = getattr(omtl.learners, learner).__module__.rsplit(".", 1)[1]
    for entry in touched:
        entry = entry.replace("<module>", module)
        if path == entry or (entry.endswith("/") and path.startswith(entry)):
            return True
    return learner in chosen.get(path, ())


def test_every_code_file_naming_a_learner_is_on_the_list():
    touched, chosen = contributing_lists()
    unlisted = sorted(f"{path}: {learner}" for path, learners in named_learners().items()
                      for learner in learners if not allowed(path, learner, touched, chosen))
    assert not unlisted, ("code files naming a learner that docs/CONTRIBUTING.md does not list "
                          "(derive the name from the class table, or list the file):\n" + "\n".join(unlisted))


def test_the_list_holds_no_stale_entry():
    touched, chosen = contributing_lists()
    found = named_learners()
    stale = sorted(f"{path}: {sorted(names - found.get(path, set()))}" for path, names in chosen.items()
                   if names - found.get(path, set()))
    assert not stale, "docs/CONTRIBUTING.md lists learners these files no longer name:\n" + "\n".join(stale)
    assert all((ROOT / entry.split("<module>")[0]).exists() for entry in touched)


def test_the_names_are_found_in_code_and_not_in_prose():
    words = python_words('"""PAGlobal in a docstring."""\n# MTLinear in a comment\nx = ["ROMCO"]\ny = omtl.CWCOL\n')
    assert {"ROMCO", "CWCOL"} <= words and not {"PAGlobal", "MTLinear"} & words
    rust = rust_words('/// "MTLinear" in a doc comment\nlet c = find("PAGlobal");\n#[cfg(test)]\nmod tests {\n"ROMCO"\n}\n')
    assert "PAGlobal" in rust and not {"MTLinear", "ROMCO"} & rust
