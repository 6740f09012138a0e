"""The ``omtl`` command: ``omtl demo`` runs every learner on the built-in stream; ``omtl reproduce
table1|table2|all`` runs the papers' experiments (``omtl.experiments``); the modules of
``SUBCOMMAND_MODULES`` add the others (``omtl learn``/``omtl predict``: ``omtl.cli_learn``;
``omtl serve``: ``omtl.cli_serve``)."""

from __future__ import annotations

import argparse
import importlib
import sys
from contextlib import contextmanager


def demo_learners(n_tasks: int) -> list[tuple[str, object]]:
    """The learners ``omtl demo`` runs, with the settings it runs them with."""
    import omtl

    rbf = {"kernel": "rbf"}
    return [
        ("MTLinear (logistic, normalized)", omtl.MTLinear(n_tasks=n_tasks)),
        ("KernelPerceptron (linear)", omtl.KernelPerceptron(n_tasks=n_tasks)),
        ("KernelPerceptron (rbf)", omtl.KernelPerceptron(n_tasks=n_tasks, **rbf)),
        ("MTPerceptron G=C (linear)", omtl.MTPerceptron(n_tasks=n_tasks)),
        ("MTPerceptron G=C (rbf)", omtl.MTPerceptron(n_tasks=n_tasks, **rbf)),
        ("MTRBP G=C (rbf, B=200)", omtl.MTRBP(n_tasks=n_tasks, budget=200, **rbf)),
        ("MTFORG G=C (rbf, B=200)", omtl.MTFORG(n_tasks=n_tasks, budget=200, **rbf)),
        ("MTBPRJ G=C (rbf, B=200)", omtl.MTBPRJ(n_tasks=n_tasks, budget=200, **rbf)),
        ("MTBPRJ-2 G=C (rbf, B=200)", omtl.MTBPRJ2(n_tasks=n_tasks, budget=200, **rbf)),
        ("ROMCO", omtl.ROMCO(n_tasks=n_tasks)),
        ("PA-Global (PA-I)", omtl.PAGlobal(n_tasks=n_tasks)),
        ("PA-Unique (PA-I)", omtl.PAUnique(n_tasks=n_tasks)),
        ("OMTL (linf)", omtl.OMTL(n_tasks=n_tasks)),
        ("OMTRL (batch)", omtl.OMTRL(n_tasks=n_tasks)),
        ("CW-COL", omtl.CWCOL(n_tasks=n_tasks)),
        ("MTFL (retrain/100)", omtl.MTFL(n_tasks=n_tasks)),
        ("TRML (retrain/100)", omtl.TRML(n_tasks=n_tasks)),
    ]


def format_table(rows: list[dict], columns: list[tuple[str, str, str]]) -> str:
    """A Markdown table; ``columns`` holds (key, header, format)."""
    head = "| " + " | ".join(h for _, h, _ in columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join("none" if r[k] is None else format(r[k], f) for k, _, f in columns) + " |"
            for r in rows]
    return "\n".join([head, rule, *body])


def run_demo(args) -> int:
    from tqdm.auto import tqdm

    import omtl

    stream = omtl.datasets.make_multitask_stream(n_samples=args.n_samples, sparse=args.sparse, seed=args.seed)
    kind = "sparse (text-like)" if args.sparse else "dense"
    print(
        f"omtl demo: every learner makes one online pass over a synthetic {kind} stream of "
        f"{stream.X.shape[0]:,} examples, {stream.X.shape[1]} features, {stream.n_tasks} related tasks "
        f"(seed {args.seed}), predicting each example before learning from it."
    )
    progress = show_progress(args)
    rows = []
    learners = demo_learners(stream.n_tasks)
    save_dir = None
    if args.save:
        from pathlib import Path

        save_dir = Path(args.save)
        save_dir.mkdir(parents=True, exist_ok=True)
    for label, model in tqdm(learners, desc="learners", unit="learner", disable=not progress):
        report = omtl.evaluate(model, stream, progress=progress)
        rows.append({**report.summary(), "learner": label})
        if save_dir is not None:
            omtl.save(model, save_dir / f"{model_file_name(label)}.omtl")
    columns = [
        ("learner", "learner", "s"),
        ("error_rate", "error rate", ".4f"),
        ("f1_micro", "F1 micro", ".4f"),
        ("f1_macro", "F1 macro", ".4f"),
        ("n_active", "active set", "d"),
        ("examples_per_second", "examples/s", ",.0f"),
    ]
    print(format_table(rows, columns))
    best = min(rows, key=lambda r: r["error_rate"])
    print(
        "\nerror rate: the fraction of examples predicted wrongly before their label was seen (lower is "
        "better); F1 micro/macro: over all examples / averaged over tasks (higher is better); active set: "
        "the examples a kernel or budget learner or MTFL/TRML stores (its memory; none: the learner keeps fixed-size "
        "weights and stores no example); "
        f"examples/s: throughput of the pass.\nlowest error: {best['learner']} ({best['error_rate']:.4f})."
    )
    if save_dir is not None:
        print(f"trained models written to {save_dir}/ (read one with omtl.load)")
    return 0


def model_file_name(label: str) -> str:
    """A file name from a demo label: "MTRBP G=C (rbf, B=200)" -> "MTRBP_G=C_rbf_B=200"."""
    return "_".join("".join(c if c.isalnum() or c in "=-" else " " for c in label).split())


def show_progress(args) -> bool:
    """Progress bars only on a terminal (a log file would fill with carriage returns), and never
    with ``--no-progress``."""
    return not args.no_progress and sys.stderr.isatty()


def fresh_results_dir(table: str, root="omtl-results"):
    """A new folder for a run's outputs, ``omtl-results/<table>-<UTC date and time>`` (with a
    suffix if that exists already), so a run never overwrites earlier outputs (docs/results
    among them) unless ``--out`` names a folder.

    Parameters
    ----------
    table : str
        The experiment(s): "table1", "table2", or "table1-table2".
    root : str or path-like
        The folder the run folders go in.

    Returns
    -------
    pathlib.Path
        A folder that did not exist (not yet created).
    """
    import time
    from pathlib import Path

    base = Path(root) / f"{table}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    out, n = base, 1
    while out.exists():
        n += 1
        out = base.with_name(f"{base.name}-{n}")
    return out


#: What ``omtl reproduce`` accepts: one experiment, several, or ``all`` (every one, in this order).
TABLES = ["table1", "table2"]


def chosen_tables(names: list[str]) -> list[str]:
    """The experiments named on the command line, each once, in the papers' order (``all``: every one)."""
    wanted = set(TABLES) if "all" in names else set(names)
    return [t for t in TABLES if t in wanted]


def names_per_table(option: str, names: list[str] | None, tables: list[str], known: dict[str, list[str]]):
    """Splits a ``--datasets``/``--learners`` list among several experiments: each gets the names
    it knows. A name no experiment knows, or an experiment left with none, is an error (one
    experiment alone gets the list as is, and says itself what it does not know)."""
    if names is None or len(tables) == 1:
        return dict.fromkeys(tables, names)
    unknown = [n for n in names if not any(n in known[t] for t in tables)]
    if unknown:
        raise SystemExit(f"{option}: unknown {unknown}; " + "; ".join(f"{t}: {','.join(known[t])}" for t in tables))
    split = {t: [n for n in names if n in known[t]] for t in tables}
    for t in tables:
        if not split[t]:
            raise SystemExit(f"{option} names nothing of {t} (it has {','.join(known[t])}): leave {t} out of the "
                             "command or name some")
    return split


# The extra that installs what ``omtl reproduce`` needs beyond the library (its figures' matplotlib).
PLOTS_HINT = 'omtl reproduce draws figures with matplotlib, which is not installed: pip install "omtl[plots]"'


def run_reproduce(args) -> int:
    import importlib.util
    from pathlib import Path

    # The papers' experiments are imported here only: the library, its adapters and the other
    # commands never load them or matplotlib (DECISIONS.md, "The papers' experiments stay a subpackage").
    if importlib.util.find_spec("matplotlib") is None:
        print(f"omtl: {PLOTS_HINT}", file=sys.stderr)
        return 2
    from .experiments import table1, table2
    from .experiments.together import run_experiments

    if args.jobs < 1:
        raise SystemExit("--jobs must be >= 1")
    if args.seeds is not None and args.seeds < 1:
        raise SystemExit("--seeds must be >= 1")
    tables = chosen_tables(args.tables)
    out = Path(args.out) if args.out else fresh_results_dir("-".join(tables))
    datasets = names_per_table("--datasets", args.datasets.split(",") if args.datasets else None, tables,
                               {"table1": table1.DATASET_KEYS, "table2": table2.DATASET_KEYS})
    learners = names_per_table("--learners", args.learners.split(",") if args.learners else None, tables,
                               {"table1": [a for a, _, _ in table1.ALGORITHMS],
                                "table2": [a for a, _, _, _ in table2.LEARNERS]})
    common = {"out": out, "seeds": args.seeds, "quick": args.quick, "jobs": args.jobs, "data_dir": args.data_dir,
              "progress": show_progress(args)}
    plans = {t: {**common, "datasets": datasets[t], "learners": learners[t]} for t in tables}
    if "table2" in plans:
        plans["table2"]["full_grid"] = args.full_grid
    elif args.full_grid:
        print("[table1] --full-grid has no effect on table1 (no tuning; the kernels are fixed by ALGORITHMS.md 7.4)")
    created = missing_folders(out)
    try:
        with grid_executor(args):
            results = run_experiments(plans)  # several: at once on Dask, one after the other elsewhere
    except BaseException:
        remove_if_empty(created)  # a run that failed (no data, Ctrl-C) leaves no empty results folder
        raise
    for table in tables:
        print((out / f"{table}.md").read_text())
    print(f"outputs written to {out}/")
    return 1 if any(result["settings"]["failures"] for result in results.values()) else 0


def missing_folders(path) -> list:
    """``path`` and those of its parents that do not exist yet, deepest first."""
    from pathlib import Path

    missing, p = [], Path(path).absolute()
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    return missing


def remove_if_empty(folders) -> None:
    """Removes the folders (deepest first) as long as they are empty."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # not empty (or gone): keep it and its parents
            return


@contextmanager
def grid_executor(args):
    """Where ``omtl reproduce`` runs its jobs: on the Dask cluster at ``--scheduler``, on a Dask
    LocalCluster of ``--jobs`` workers, or (``--jobs 1``, or Dask not installed) as before."""
    from .dask.cluster import distributed_available, experiment_client
    from .experiments.runner import run_on_dask

    if args.scheduler is None and (args.jobs <= 1 or not distributed_available()):
        yield  # one process, or a process pool without Dask
        return
    if args.scheduler is not None and not distributed_available():
        raise SystemExit('--scheduler needs Dask distributed: pip install "omtl[dask]"')
    with experiment_client(args.scheduler, args.jobs) as client, run_on_dask(client):
        yield


#: The modules that add commands of their own to ``omtl`` (each has ``add_commands(subparsers)``).
SUBCOMMAND_MODULES = ("omtl.cli_learn", "omtl.cli_serve")  # omtl learn, omtl predict; omtl serve


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="omtl", description="Online multitask classification under a memory budget.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run every learner on the built-in synthetic stream and print a table")
    demo.add_argument("--n-samples", type=int, default=6000)
    demo.add_argument("--sparse", action="store_true", help="use the sparse (text-like) variant of the stream")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--no-progress", action="store_true", help="no progress bars (they are shown on a terminal only)")
    demo.add_argument("--save", metavar="DIR", default=None,
                      help="write every trained model to DIR/<learner>.omtl (omtl.save; read back with omtl.load)")
    demo.set_defaults(func=run_demo)
    rep = sub.add_parser("reproduce", help="run the papers' experiments (Table 1: Cavallanti & Cesa-Bianchi; "
                         "Table 2/3: ROMCO) and write tables, CSVs, settings and figures")
    rep.add_argument("tables", nargs="+", choices=[*TABLES, "all"], metavar="TABLE",
                     help="table1, table2, or several (\"table1 table2\", or \"all\"): several write into one "
                     "folder and, on Dask (--jobs N, --scheduler), run at once sharing the cluster")
    rep.add_argument("--quick", action="store_true", help="a small fixed subsample, 2 seeds, a tiny tuning grid")
    rep.add_argument("--seeds", type=int, default=None, help="number of shuffles, seeds 0..N-1 (default 5 for table1, "
                     "10 for table2, 2 with --quick)")
    rep.add_argument("--out", default=None, help="output folder (default: a new folder omtl-results/<table>-<UTC "
                     "date-time>; an existing folder named here is overwritten)")
    rep.add_argument("--jobs", type=int, default=1, help="parallel worker processes, a Dask LocalCluster when Dask "
                     "is installed (default 1: this process)")
    rep.add_argument("--scheduler", default=None, metavar="ADDRESS", help="run the jobs on the Dask cluster at "
                     "ADDRESS (e.g. tcp://host:8786; its workers need omtl and the data); needs omtl[dask]")
    rep.add_argument("--data-dir", default=None, help="folder holding the data-set folders (default $OMTL_DATA or "
                     "../shared/data)")
    rep.add_argument("--full-grid", action="store_true", help="table2: tune ROMCO on the paper's full 11^4 grid")
    rep.add_argument("--datasets", default=None, help="comma-separated subset of the data sets (table1: "
                     "ecml2006_a,school,sentiment; table2: pu_spam,ecml2006_b,landmine,newsgroups_cs,newsgroups_rt)")
    rep.add_argument("--learners", default=None, help="comma-separated subset of the rows (table1: MTRBP,MTFORG,"
                     "MTBPRJ,MTBPRJ-2; table2: MTFL,TRML,PA-Global,PA-Unique,CW-COL,OMTL,ROMCO,OMTRL)")
    rep.add_argument("--no-progress", action="store_true", help="no progress bars")
    rep.set_defaults(func=run_reproduce)
    for module in SUBCOMMAND_MODULES:
        importlib.import_module(module).add_commands(sub)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except FileNotFoundError as exc:
        # A missing data set is a setup problem, not a bug: one line, no traceback (and the
        # CLI's words, not the Python API's data_dir=).
        from .datasets.loaders import DATA_HINT

        message = str(exc).replace(f" ({DATA_HINT})", "").replace(f"; {DATA_HINT}", "")
        print(
            f"omtl: {message}\n(point --data-dir or OMTL_DATA at the folder holding the data sets; "
            "docs/data.md lists them and where each comes from)",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(main())
