"""Progress step: embedding SciFact abstracts into Chroma in writes of 256 vs 32.

`dense.add_documents` reports progress every `embeddings.EMBEDDED_STEP` vectors
and writes 256 documents at a time. This measures what writes of 32 would cost
(total time) against writes of 256, and the longest gap between two progress
reports, side by side in one run, alternating, each in a fresh in-memory collection.

    python benchmarks/bench_progress_step.py [--limit N] [--rounds R]
"""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

from _common import console, parser_with_data, print_machine
from langchain_core.documents import Document
from rich.table import Table

from langchain_ragbudget import build_embeddings, build_vector_store
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_corpus
from langchain_ragbudget.retrieval import _dense as dense
from langchain_ragbudget.retrieval._embeddings import EMBEDDED_STEP

STEPS = (256, EMBEDDED_STEP)


def one_run(documents: list[Document], step: int) -> tuple[float, float]:
    """Seconds to add every document in writes of `step`; longest report gap."""
    config = load_config()  # in memory: each call gets a collection of its own
    store = build_vector_store(config, build_embeddings(config))
    reports = [time.perf_counter()]
    dense.add_documents(
        store,
        documents,
        batch_size=step,
        on_batch=lambda size: reports.append(time.perf_counter()),
    )
    gaps = [b - a for a, b in itertools.pairwise(reports)]
    return reports[-1] - reports[0], max(gaps)


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    out = console(100)
    documents = load_corpus(Path(args.data))[: args.limit]
    one_run(documents[:8], STEPS[0])  # load the model before anything is timed
    totals: dict[int, list[float]] = {step: [] for step in STEPS}
    gaps: dict[int, list[float]] = {step: [] for step in STEPS}
    for turn in range(args.rounds):
        for step in STEPS if turn % 2 == 0 else STEPS[::-1]:
            total, gap = one_run(documents, step)
            totals[step].append(total)
            gaps[step].append(gap)
    print_machine(out, load_average=True)
    table = Table(title=f"{len(documents)} SciFact abstracts, {args.rounds} rounds")
    for column in ("write step", "total s (median)", "docs/s", "longest gap s"):
        table.add_column(column, justify="right")
    for step in STEPS:
        total = statistics.median(totals[step])
        table.add_row(
            str(step),
            f"{total:.1f}",
            f"{len(documents) / total:.1f}",
            f"{max(gaps[step]):.1f}",
        )
    out.print(table)


if __name__ == "__main__":
    main()
