"""The library's import path holds no experiment code and no plotting: ``import omtl``, the
learners, the scikit-learn and River adapters and the CLI's learn/predict/demo never load
``omtl.experiments`` or matplotlib, which only ``omtl reproduce`` needs (the ``plots`` extra)."""

import subprocess
import sys
import textwrap

import pytest

from omtl.cli import PLOTS_HINT, main

# Run in a fresh interpreter: this test process may have imported either already.
_PROBE = textwrap.dedent(
    """
    import sys, tempfile, pathlib
    import numpy as np
    import omtl, omtl.learners, omtl.reference, omtl.river
    from omtl.cli import main
    X = np.random.default_rng(0).normal(size=(40, 3)); y = np.sign(X[:, 0]) + (X[:, 0] == 0)
    omtl.MTLinear(n_tasks=2).fit(X, y, tasks=np.arange(40) % 2).predict(X, tasks=0)
    with tempfile.TemporaryDirectory() as d:
        csv = pathlib.Path(d, "s.csv")
        csv.write_text("task,label,a,b\\n" + "".join(f"{i % 2},{1 if i % 3 else -1},{i},{-i}\\n" for i in range(30)))
        assert main(["learn", "--learner", "MTPerceptron", "--quiet", "--save", str(pathlib.Path(d, "m.omtl")), str(csv)]) == 0
        assert main(["predict", "--quiet", "--model", str(pathlib.Path(d, "m.omtl")), "-p", str(pathlib.Path(d, "p.txt")), str(csv)]) == 0
        assert main(["demo", "--n-samples", "300", "--no-progress"]) == 0
    loaded = sorted(m for m in sys.modules if m == "matplotlib" or m.startswith(("matplotlib.", "omtl.experiments")))
    print("LOADED", loaded)
    """
)


def test_the_library_and_the_cli_do_not_import_the_experiments_or_matplotlib():
    pytest.importorskip("sklearn")
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout
    assert "LOADED []" in out, out[-2000:]


def test_reproduce_without_matplotlib_names_the_extra(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what an environment without it gives
    assert main(["reproduce", "table1", "--quick", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"omtl: {PLOTS_HINT}" and "omtl[plots]" in err
    assert not (tmp_path / "o").exists()
