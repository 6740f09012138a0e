"""The ``omtl`` command: ``omtl demo`` runs every learner on the built-in stream."""

from __future__ import annotations

import argparse
import sys


def demo_learners(n_tasks: int) -> list[tuple[str, object]]:
    """The learners ``omtl demo`` runs, with the settings it runs them with."""
    import omtl

    rbf = {"kernel": "rbf"}
    return [
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
    body = ["| " + " | ".join(format(r[k], f) for k, _, f in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def run_demo(args) -> int:
    from tqdm.auto import tqdm

    import omtl

    stream = omtl.datasets.make_multitask_stream(n_samples=args.n_samples, sparse=args.sparse, seed=args.seed)
    print(f"stream: {stream}")
    rows = []
    learners = demo_learners(stream.n_tasks)
    for label, model in tqdm(learners, desc="learners", unit="learner"):
        report = omtl.evaluate(model, stream, progress=True)
        rows.append({**report.summary(), "learner": label})
    columns = [
        ("learner", "learner", "s"),
        ("error_rate", "error rate", ".4f"),
        ("f1_micro", "F1 micro", ".4f"),
        ("f1_macro", "F1 macro", ".4f"),
        ("n_active", "active set", "d"),
        ("examples_per_second", "examples/s", ",.0f"),
    ]
    print(format_table(rows, columns))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="omtl", description="Online multitask classification under a memory budget.")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run every learner on the built-in synthetic stream and print a table")
    demo.add_argument("--n-samples", type=int, default=6000)
    demo.add_argument("--sparse", action="store_true", help="use the sparse (text-like) variant of the stream")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=run_demo)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
