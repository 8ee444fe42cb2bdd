"""`ragbudget` command line: `demo` and `eval`, with progress bars and tables."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID

from langchain_ragbudget.errors import RagBudgetError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragbudget", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the pipeline on the sample corpus")
    demo.add_argument("--config", help="a YAML file merged over the defaults")
    evaluate = commands.add_parser(
        "eval", help="measure every stage on a BEIR-format dataset"
    )
    evaluate.add_argument(
        "data", type=Path, help="BEIR folder: corpus, queries, qrels/"
    )
    evaluate.add_argument("--config", help="a YAML file merged over the defaults")
    evaluate.add_argument("--split", default="test", help="qrels/<split>.tsv (test)")
    evaluate.add_argument(
        "--surface", action="append", help="surface(s) to budget for (all by default)"
    )
    evaluate.add_argument("--limit", type=int, help="evaluate the first N queries")
    evaluate.add_argument("--k", type=int, default=10, help="k of hit@k and recall@k")
    evaluate.add_argument("--json", type=Path, help="write the full results here")
    evaluate.add_argument("--plot", type=Path, help="write the survival plot (PNG)")
    evaluate.add_argument(
        "--update",
        type=Path,
        help="replace the eval section of this Markdown file (e.g. BENCHMARKS.md)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run a command; package errors print as one clear line."""
    args = _parser().parse_args(argv)
    # Tables need room: when output is not a terminal (make, CI logs), use 110.
    console = Console(width=None if sys.stdout.isatty() else 110)
    try:
        if args.command == "demo":
            from langchain_ragbudget.demo import run_demo

            run_demo(args.config, console)
        else:
            run_eval(args, console, argv)
    except RagBudgetError as error:
        console.print(f"[red]error:[/red] {error}", markup=True, highlight=False)
        return 2
    return 0


def run_eval(
    args: argparse.Namespace, console: Console, argv: Sequence[str] | None
) -> None:
    """`ragbudget eval`: run, print the tables, write JSON / plot / Markdown."""
    from langchain_ragbudget.beir import load_beir
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.evaluation import evaluate
    from langchain_ragbudget.report import (
        plot_survival,
        rich_tables,
        to_markdown,
        update_section,
    )

    config = load_config(args.config)
    for surface in args.surface or []:
        config.surface(surface)  # an unknown surface fails before any work
    dataset = load_beir(args.data, args.split)
    with Progress(console=console, transient=True) as progress:
        tasks: dict[str, TaskID] = {}

        def report(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = progress.add_task(stage, total=total)
            progress.update(tasks[stage], completed=done)

        result = evaluate(
            dataset,
            config,
            surfaces=args.surface,
            k=args.k,
            limit=args.limit,
            progress=report,
        )
    for table in rich_tables(result):
        console.print(table)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
        console.print(f"results: {args.json}")
    plot = plot_survival(result, args.plot) if args.plot else None
    if plot:
        console.print(f"plot: {plot}")
    if args.update:
        shown = "ragbudget " + " ".join(argv if argv is not None else sys.argv[1:])
        relative = (
            str(plot.relative_to(args.update.parent)) if plot is not None else None
        )
        update_section(args.update, to_markdown(result, shown, relative))
        console.print(f"updated: {args.update}")


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
