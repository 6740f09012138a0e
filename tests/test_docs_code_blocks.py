"""Every Python code block of the README and the user guides runs as written, on its own.

Each block is saved as a script and run as ``python block.py`` in a fresh working folder, as a
reader who pastes it into a file would run it: a block may not lean on an earlier block (a page
shows no hidden marker), and a block that starts Dask workers must guard its work with
``if __name__ == "__main__":`` (Dask starts worker processes that import the script). The
scripts run a few at a time, all at the start of the first test that needs them. Design records
(DECISIONS, ALGORITHMS, CONTRIBUTING) and the result pages under docs/results are not guides
and are not run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_GUIDES = {"DECISIONS.md", "ALGORITHMS.md", "CONTRIBUTING.md"}
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
# What the blocks import that an install may lack (the extras): such blocks are skipped without it.
EXTRAS = {"distributed": "dask", "river": "river", "sklearn": "sklearn", "matplotlib": "plots"}
# Seconds a block may take (a Dask block starts a cluster; the machine may be shared).
TIMEOUT = 300


def guide_files() -> list[Path]:
    docs = sorted(p for p in (ROOT / "docs").glob("*.md") if p.name not in NOT_GUIDES)
    return [ROOT / "README.md", *docs]


def python_blocks(path: Path) -> list[tuple[int, str, str]]:
    """(first line number, code, the nearest non-blank line before the fence) of every ```python block."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        lang, start = match["lang"], i
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            i += 1
        if lang == "python":
            before = start - 1
            while before >= 0 and not lines[before].strip():
                before -= 1
            blocks.append((start + 1, textwrap.dedent("\n".join(lines[start + 1:i])), lines[before].strip() if before >= 0 else ""))
        i += 1
    return blocks


def block_params() -> list:
    return [pytest.param(path, line, code, id=f"{path.relative_to(ROOT)}:{line}")
            for path in guide_files() for line, code, _ in python_blocks(path)]


def missing_extra(code: str) -> str | None:
    for module, extra in EXTRAS.items():
        if re.search(rf"^\s*(from|import)\s+{module}\b", code, re.M) and importlib.util.find_spec(module) is None:
            return f"the block needs {module} (pip install \"omtl[{extra}]\")"
    return None


def run_script(code: str, folder: Path) -> subprocess.CompletedProcess:
    folder.mkdir(parents=True)
    (folder / "block.py").write_text(code + "\n", encoding="utf-8")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run([sys.executable, "block.py"], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT)


@pytest.fixture(scope="module")
def script_runs(request, tmp_path_factory) -> dict:
    """{(path, line): finished process} for every block the session runs, run a few at a time."""
    wanted = [item.callspec.params for item in request.session.items
              if getattr(item, "originalname", None) == "test_code_block_runs"]
    todo = {(p["path"], p["line"]): p["code"] for p in wanted if missing_extra(p["code"]) is None}
    root = tmp_path_factory.mktemp("blocks")
    with ThreadPoolExecutor(max_workers=max(2, min(4, os.cpu_count() or 2))) as pool:
        futures = {key: pool.submit(run_script, code, root / f"{key[0].stem}-{key[1]}") for key, code in todo.items()}
        return {key: future.result() for key, future in futures.items()}


def test_the_guides_have_python_blocks_and_none_leans_on_another():
    found = {path: python_blocks(path) for path in guide_files()}
    assert len(found[ROOT / "README.md"]) >= 5
    for path, blocks in found.items():
        for line, _, before in blocks:
            assert not (before.startswith("<!--") and "contin" in before), (
                f"{path.name}:{line}: a block that continues an earlier one behind an HTML comment (invisible where "
                "the page is rendered): make it run on its own")


@pytest.mark.parametrize(("path", "line", "code"), block_params())
def test_code_block_runs(path, line, code, script_runs):
    skip = missing_extra(code)
    if skip:
        pytest.skip(skip)
    out = script_runs[(path, line)]
    assert out.returncode == 0, f"{path.name}:{line} failed as a script:\n{out.stderr[-3000:]}"


def _fake_wheel(folder: Path, version: str, tag: str) -> Path:
    """A minimal installable wheel of a project named omtl (metadata only)."""
    import zipfile

    path = folder / f"omtl-{version}-{tag}.whl"
    info = f"omtl-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: omtl\nVersion: {version}\n",
             f"{info}/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n"}
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", "".join(f"{name},,\n" for name in files) + f"{info}/RECORD,,\n")
    return path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the wheel's platform tag is Linux's here")
def test_the_readme_wheel_line_installs_from_a_folder_of_two_wheels(tmp_path):
    """The README's wheel install line picks one wheel when the folder holds several (an older
    build, or the wheel `pip install .` left): pip refuses two wheels of one project."""
    import sysconfig
    import time

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    build = next(line for line in text.splitlines() if "maturin build" in line)
    install = text.splitlines()[text.splitlines().index(build) + 1]
    assert install.startswith("pip install ")
    folder = re.search(r"--out (\S+)", build)
    folder = tmp_path / (folder.group(1) if folder else "target/wheels")
    folder.mkdir(parents=True)
    tag = f"cp39-abi3-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"
    old = _fake_wheel(folder, "0.0.9", tag)
    os.utime(old, (time.time() - 60, time.time() - 60))
    new = _fake_wheel(folder, "0.1.0", tag)
    command = install.split("#", 1)[0].replace("pip install ", f"{sys.executable} -m pip install --dry-run --no-index --no-deps --quiet --report - ", 1)
    out = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert [item["metadata"]["version"] for item in json.loads(out.stdout)["install"]] == ["0.1.0"], new


def test_the_readme_is_a_front_door():
    """The README stays short (details live in docs/) and each section that needs an optional
    dependency names its extra."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    sections = {m[1]: m[2] for m in re.finditer(r"^## (.+)\n((?:(?!^## ).*\n)*)", text, re.M)}
    for title, extra in (("scikit-learn", "omtl[sklearn]"), ("River", "omtl[river]"), ("Dask", "omtl[dask]")):
        assert extra in sections[title], f"the README's {title} section does not name {extra}"
