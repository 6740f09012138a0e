"""Every Python code block of the README and the user guides runs as written.

A block runs in a fresh namespace, in a fresh working folder, unless the line before it (blank
lines aside) is the marker ``<!-- continues -->``: then it runs in the namespace of the block
before it in the same file. Design records (DECISIONS, ALGORITHMS, CONTRIBUTING) and the result
pages under docs/results are not guides and are not run.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_GUIDES = {"DECISIONS.md", "ALGORITHMS.md", "CONTRIBUTING.md"}
CONTINUES = "<!-- continues -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")


def guide_files() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_GUIDES)
    return [ROOT / "README.md", *docs]


def python_blocks(path: Path) -> list[tuple[int, str, bool]]:
    """(first line number, code, continues the previous block) of every ```python block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, lang, start = match["indent"], match["lang"], i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if lang == "python":
            code = textwrap.dedent("\n".join(lines[start + 1:i]))
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            continues = before >= 0 and lines[before].strip() == CONTINUES
            blocks.append((start + 1, code, continues))
        del indent
        i += 1
    return blocks


def chains() -> list:
    """Blocks grouped into chains (a block and the blocks that continue it), one test each."""
    params = []
    for path in guide_files():
        chain: list[tuple[int, str]] = []
        for line, code, continues in python_blocks(path):
            if chain and not continues:
                params.append(pytest.param(path, chain, id=f"{path.relative_to(ROOT)}:{chain[0][0]}"))
                chain = []
            if continues and not chain:
                raise AssertionError(f"{path}:{line}: {CONTINUES} before the file's first Python block")
            chain.append((line, code))
        if chain:
            params.append(pytest.param(path, chain, id=f"{path.relative_to(ROOT)}:{chain[0][0]}"))
    return params


def test_the_guides_have_python_blocks_and_the_marker_is_honoured():
    found = {path.name: python_blocks(path) for path in guide_files()}
    assert len(found["README.md"]) >= 5
    assert any(continues for blocks in found.values() for _, _, continues in blocks)


@pytest.mark.parametrize(("path", "chain"), chains())
def test_code_block_runs(path, chain, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    text = "\n".join(code for _, code in chain)
    if "dask" in text or "distributed" in text:
        pytest.importorskip("distributed", reason="the Dask examples need the dask extra")
    if "river" in text:
        pytest.importorskip("river", reason="the River examples need River")
    if "sklearn" in text:
        pytest.importorskip("sklearn", reason="the scikit-learn examples need scikit-learn")
    monkeypatch.chdir(tmp_path)  # blocks that write files (model files, checkpoints) write here
    namespace: dict = {"__name__": "__main__"}
    try:
        for line, code in chain:
            exec(compile(code, f"{path}:{line}", "exec"), namespace)  # noqa: S102
    finally:
        try:
            import sklearn

            sklearn.set_config(enable_metadata_routing=False)
        except ImportError:
            pass
