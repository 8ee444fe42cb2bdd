"""`ragbudget` command line: `ragbudget demo`, with readable tables."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rich.console import Console

from langchain_ragbudget.errors import RagBudgetError


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run a command; package errors print as one clear line."""
    parser = argparse.ArgumentParser(prog="ragbudget", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the pipeline on the sample corpus")
    demo.add_argument("--config", help="a YAML file merged over the defaults")
    args = parser.parse_args(argv)
    # Tables need room: when output is not a terminal (make, CI logs), use 110.
    console = Console(width=None if sys.stdout.isatty() else 110)
    try:
        if args.command == "demo":
            from langchain_ragbudget.demo import run_demo

            run_demo(args.config, console)
    except RagBudgetError as error:
        console.print(f"[red]error:[/red] {error}")
        return 2
    return 0


def run() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":
    run()
