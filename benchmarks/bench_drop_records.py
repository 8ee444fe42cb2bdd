"""Fusion's drop records per `HybridRetriever.invoke`: deferred against eager.

Every query of SciFact's test split runs through four variants of the same hybrid
(BM25 live, the dense side's answers served from memory so no embedding runs), side
by side in one run, in an order rotated from query to query:

* deferred, direct: `invoke` as it ships, nobody reading the cut candidates'
  records (what a retriever used on its own pays);
* eager, direct: `invoke`, then every cut candidate's record read in full (its
  merged document and detail): what the budget pays, since its report names every
  drop, and what making each record at the cut would cost;
* deferred / eager, child runs: the same two with the retrievers invoked as
  LangChain child runs (each hit copied with its score) instead of handing over
  their hits directly.

At two sizes: k=10 of 100 + 100 fetched candidates (the default), and `--fetch`
per retriever (about 1,000 fused candidates at 600).

    python benchmarks/bench_drop_records.py [--limit N] [--fetch 600]
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from _common import (
    cached_store,
    console,
    parser_with_data,
    print_machine,
    rotated,
    timing,
)
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from rich.table import Table

from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.ledger._records import drops_of
from langchain_ragbudget.retrieval._dense import DenseRetriever
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._scored import ScoredRetriever

REPEATS = 3


class ServedHits(ScoredRetriever):
    """A dense side that answers from memory: hits fetched beforehand, per query."""

    answers: dict[str, list[tuple[Document, float]]]
    score_key: str = "score"

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        return self.answers[query][:k]


class ChildRuns(HybridRetriever):
    """The hybrid with its retrievers always invoked as child runs."""

    def _direct(
        self,
        run_manager: CallbackManagerForRetrieverRun
        | AsyncCallbackManagerForRetrieverRun,
    ) -> bool:
        return False


def read_all(result: list[Document]) -> None:
    """Read every record in full (document and detail), as the budget's report does."""
    for record in drops_of(result):
        _ = record.document, record.detail


def variants(hybrid: HybridRetriever) -> dict[str, Callable[[str], object]]:
    """The four ways to run one query, by label."""
    fields = {name: getattr(hybrid, name) for name in type(hybrid).model_fields}
    child = ChildRuns(**fields)
    return {
        "deferred, direct": hybrid.invoke,
        "eager, direct": lambda query: read_all(hybrid.invoke(query)),
        "deferred, child runs": child.invoke,
        "eager, child runs": lambda query: read_all(child.invoke(query)),
    }


Timings = dict[str, dict[str, list[float]]]  # variant -> wall / cpu -> ms per call


def measure(hybrid: HybridRetriever, queries: list[str]) -> tuple[Timings, float]:
    """Per variant, each call's wall and CPU ms; the mean number of fused candidates."""
    runs = variants(hybrid)
    for run in runs.values():  # warm-up
        run(queries[0])
    times: Timings = defaultdict(lambda: {"wall": [], "cpu": []})

    def record(label: str) -> Callable[[float, float], None]:
        def add(wall: float, cpu: float) -> None:
            times[label]["wall"].append(wall * 1000)
            times[label]["cpu"].append(cpu * 1000)

        return add

    turn = 0
    for _ in range(REPEATS):
        for query in queries:
            for label in rotated(list(runs), turn):
                timing(runs[label], record(label))(query)
            turn += 1
    fused = [
        len(result) + len(drops_of(result))
        for result in (hybrid.invoke(query) for query in queries)
    ]
    return times, statistics.mean(fused)


def sized(hybrid: HybridRetriever, fetch: int, queries: list[str]) -> HybridRetriever:
    """`hybrid` fetching `fetch` per retriever, its dense answers served from memory."""
    retrievers: list[Any] = list(hybrid.retrievers)
    position = next(
        i for i, r in enumerate(retrievers) if isinstance(r, DenseRetriever)
    )
    dense = retrievers[position]
    retrievers[position] = ServedHits(
        answers={q: dense.scored_hits(q, fetch) for q in queries}
    )
    return hybrid.model_copy(
        update={"retrievers": retrievers, "fetch_k": [fetch] * len(retrievers)}
    )


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=300, help="first N test queries")
    parser.add_argument("--fetch", type=int, default=600, help="the larger fetch_k")
    args = parser.parse_args()
    dataset = load_beir(args.data)
    config = load_config()
    store = cached_store(dataset, config)
    hybrid = HybridRetriever.from_config(
        config, documents=dataset.corpus, vectorstore=store
    )
    queries = list(dataset.queries.values())[: args.limit]
    out = console(110)
    table = Table(
        title=f"HybridRetriever.invoke, k={hybrid.k}: p50 ms per call over "
        f"{len(queries)} SciFact queries x {REPEATS}, rotated; CPU: the calling "
        "thread's"
    )
    for column in ("fetched", "fused", "variant", "wall", "CPU", "+ wall", "+ CPU"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for fetch in (100, args.fetch):
        times, fused = measure(sized(hybrid, fetch, queries), queries)
        base = times["deferred, direct"]
        for label, found in times.items():
            extra = [
                statistics.median(
                    v - b for v, b in zip(found[clock], base[clock], strict=True)
                )
                for clock in ("wall", "cpu")
            ]
            table.add_row(
                f"{fetch} + {fetch}",
                f"{fused:.0f}",
                label,
                f"{statistics.median(found['wall']):.3f}",
                f"{statistics.median(found['cpu']):.3f}",
                *(f"{value:+.3f}" for value in extra),
            )
    out.print(table)
    out.print(
        "+ wall, + CPU: median over calls of (variant - deferred, direct) on the "
        "same query in the same turn"
    )
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
