"""How long `ragbudget ask` takes to refuse what it can check without the index.

An unknown surface, an empty question and a bad configuration key, each run as a
fresh `ragbudget` process `--runs` times (median wall time), against `--index`
(give a large index to see that its size does not matter; the default does not
exist, which `ask` would report only after these checks). The last row is the
`ragbudget --help` floor: the interpreter and the parser.

    python benchmarks/bench_cli_refusals.py [--runs N] [--index DIR] [--compare DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import console, print_machine
from rich.table import Table

RAGBUDGET = str(Path(sys.executable).with_name("ragbudget"))


def timed(argv: list[str], runs: int, code: str | None) -> tuple[float, str]:
    """Median seconds of `ragbudget argv`, and the last line it printed.

    `code`: a folder holding another `langchain_ragbudget` to run instead.
    """
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = code
    seconds, last = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            [RAGBUDGET, *argv], capture_output=True, text=True, check=False, env=env
        )
        seconds.append(time.perf_counter() - start)
        last = (done.stderr or done.stdout).strip().splitlines()[-1]
    return statistics.median(seconds), last


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--index", default="no-such-index-folder")
    parser.add_argument(
        "--compare",
        metavar="DIR",
        help="a folder holding an older langchain_ragbudget (git archive of a "
        "commit): its rows are run too, interleaved",
    )
    args = parser.parse_args()
    bad = Path(tempfile.mkdtemp()) / "bad.yml"
    bad.write_text("surfaces:\n  chat:\n    max_token: 900\n", encoding="utf-8")
    index = ["--index", args.index]
    cases = {
        "unknown surface": ["ask", "q?", "--surface", "serach", *index],
        "empty question": ["ask", "  ", *index],
        "unknown config key": ["ask", "q?", "--config", str(bad), *index],
        "ragbudget --help (floor)": ["--help"],
    }
    out = console(140)
    table = Table(title=f"ragbudget ask refusals, median of {args.runs}")
    for column in ("case", "median s", "what it said"):
        table.add_column(column)
    for name, argv in cases.items():
        for label, code in [("", None), ("before: ", args.compare)]:
            if label and code is None:
                continue
            seconds, said = timed(argv, args.runs, code)
            table.add_row(label + name, f"{seconds:.2f}", said[:90])
    print_machine(out, load_average=True)
    out.print(f"index: {args.index} (exists: {os.path.isdir(args.index)})")
    out.print(table)


if __name__ == "__main__":
    main()
