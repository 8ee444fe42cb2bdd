"""What importing the package costs: the runtime names against the langchain_core floor.

Each statement runs in a fresh interpreter, interleaved, so a busy machine slows every
row alike; the median of each is printed with its difference from the floor. Two
floors: `import langchain_core.runnables` (the issue's) and the langchain_core classes
the runtime's objects subclass (Runnable, BaseRetriever, BaseDocumentCompressor, the
chat prompt), which any LangChain component pays for. Also `ragbudget --help`.
`--compare PYTHON` runs the package rows again with another interpreter (e.g. a venv of
an older checkout), side by side in the same run.
Targets (BENCHMARKS.md): the runtime names at most 0.5 s over the floor; `ragbudget
--help` under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLOORS = {
    "floor: import langchain_core.runnables": "import langchain_core.runnables",
    "floor: the langchain_core classes subclassed": (
        "from langchain_core.runnables import Runnable\n"
        "from langchain_core.retrievers import BaseRetriever\n"
        "from langchain_core.documents import BaseDocumentCompressor\n"
        "from langchain_core.prompts import ChatPromptTemplate"
    ),
}
PACKAGE = {
    "import langchain_ragbudget": "import langchain_ragbudget",
    "ContextBudget, HybridRetriever, create_budgeted_rag_chain": (
        "from langchain_ragbudget import "
        "ContextBudget, HybridRetriever, create_budgeted_rag_chain"
    ),
}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    # from the root folder, so that each interpreter imports its own installed
    # package, not a checkout in the working directory
    subprocess.run(command, check=True, capture_output=True, timeout=120, cwd="/")
    return time.perf_counter() - start


def _commands(compare: str | None) -> dict[str, list[str]]:
    """Every row's command line, this interpreter's and `compare`'s."""
    python = sys.executable
    commands = {
        name: [python, "-c", code] for name, code in {**FLOORS, **PACKAGE}.items()
    }
    commands["ragbudget --help"] = [str(Path(python).with_name("ragbudget")), "--help"]
    if compare:
        for name, code in PACKAGE.items():
            commands[f"{name} [compare]"] = [compare, "-c", code]
        commands["ragbudget --help [compare]"] = [
            str(Path(compare).with_name("ragbudget")),
            "--help",
        ]
    return commands


def main() -> None:
    """Print the median time of each row and its difference from each floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--compare", metavar="PYTHON", help="another interpreter")
    args = parser.parse_args()
    commands = _commands(args.compare)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm the file cache once
        _seconds(command)
    for _ in range(args.runs):
        for name, command in commands.items():
            times[name].append(_seconds(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    runnables, classes = (medians[name] for name in FLOORS)
    print(f"median of {args.runs} fresh interpreters each, interleaved")
    print(f"{'what':<62} {'median s':>9} {'- floor 1':>10} {'- floor 2':>10}")
    for name, median in medians.items():
        print(
            f"{name:<62} {median:>9.3f} "
            f"{median - runnables:>+10.3f} {median - classes:>+10.3f}"
        )


if __name__ == "__main__":
    main()
