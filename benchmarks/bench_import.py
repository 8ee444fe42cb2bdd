"""What importing the package costs: the runtime names against the langchain_core floor.

Each statement runs in a fresh interpreter, interleaved, so a busy machine slows both
sides alike; the median of each is printed, then the difference. Also times
`ragbudget --help` end to end. Targets (BENCHMARKS.md): the runtime names at most
0.5 s over `import langchain_core.runnables`; `ragbudget --help` under 1 s.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

FLOOR = "import langchain_core.runnables"
STATEMENTS = {
    "langchain_core.runnables (floor)": FLOOR,
    "import langchain_ragbudget": "import langchain_ragbudget",
    "ContextBudget, HybridRetriever, create_budgeted_rag_chain": (
        "from langchain_ragbudget import "
        "ContextBudget, HybridRetriever, create_budgeted_rag_chain"
    ),
}


def _seconds(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - start


def main() -> None:
    """Print the median time of each import and of `ragbudget --help`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args().runs
    script = str(Path(sys.executable).with_name("ragbudget"))  # this venv's
    commands = {name: [sys.executable, "-c", code] for name, code in STATEMENTS.items()}
    commands["ragbudget --help"] = [script, "--help"]
    times: dict[str, list[float]] = {name: [] for name in commands}
    for command in commands.values():  # warm the file cache once
        _seconds(command)
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(_seconds(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    floor = medians["langchain_core.runnables (floor)"]
    print(f"median of {runs} fresh interpreters each, interleaved")
    print(f"{'what':<60} {'median s':>9} {'over floor':>11}")
    for name, median in medians.items():
        over = "" if name == "ragbudget --help" else f"{median - floor:+.3f}"
        print(f"{name:<60} {median:>9.3f} {over:>11}")


if __name__ == "__main__":
    main()
