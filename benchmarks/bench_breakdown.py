"""The hybrid against its floor: what it costs beyond embedding and the vector query.

Both the hybrid and the stock EnsembleRetriever pay for the query embedding and the
vector query; that pair, run on its own, is the floor no hybrid can go below. Three
systems run every query, side by side in one run, in an order rotated from query to
query (so machine noise and warm caches hit all of them alike):

* floor: `embed_query` and Chroma's query for 100 ids and distances, nothing else;
* the HybridRetriever (default config: BM25 and dense, 100 candidates each, k=10);
* the stock EnsembleRetriever (rank_bm25 + Chroma retriever), for reference.

The hybrid's own work is, per query, its total minus the embedding and Chroma time
measured inside that same call (each part is timed by wrapping the function that does
it), so it holds BM25, fusion, merged metadata, drop records and the LangChain run.
It is also given in CPU time of the calling thread (`time.thread_time`), which a busy
machine inflates much less than wall time; the target is judged on wall time. A last
line measures the same own work alone: the dense side's answers served from memory,
so no embedding runs just before it and leaves the caches cold.

    python benchmarks/bench_breakdown.py                 # float32 query embeddings
    python benchmarks/bench_breakdown.py --int8          # int8 query embeddings
    python benchmarks/bench_breakdown.py --k 100         # return 100 (recall@100)
"""

from __future__ import annotations

import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any, cast

from _common import (
    cached_store,
    console,
    int8_queries,
    parser_with_data,
    percentiles,
    print_machine,
    rotated,
    timing,
)
from chromadb.api.models.Collection import Collection
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from rich.table import Table

from langchain_ragbudget import build_embeddings
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.progress import ProgressBars
from langchain_ragbudget.retrieval._dense import DenseRetriever
from langchain_ragbudget.retrieval._embeddings import FastEmbedEmbeddings
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._sparse import BM25Retriever

FETCH = 100
FLOOR_TARGET = 1.25
OWN_WORK_TARGET_MS = 1.0
times: dict[str, list[float]] = defaultdict(list)
cpu_times: dict[str, list[float]] = defaultdict(list)  # this thread's CPU time
current = ["ensemble"]  # which system the timed parts belong to


def timed(part: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, its wall and CPU ms recorded under the current system's `part`."""

    def record(wall: float, cpu: float) -> None:
        times[f"{current[0]}: {part}"].append(wall * 1000)
        cpu_times[f"{current[0]}: {part}"].append(cpu * 1000)

    return timing(function, record)


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=300, help="first N test queries")
    parser.add_argument("--k", type=int, default=None, help="hybrid k (config: 10)")
    parser.add_argument("--int8", action="store_true", help="int8 query embeddings")
    args = parser.parse_args()

    dataset = load_beir(args.data)
    config = load_config()
    if args.int8:
        config = int8_queries(config)
    embeddings = build_embeddings(config)
    with ProgressBars(transient=True) as progress:
        store = cached_store(dataset, config, embeddings, progress)
    hybrid = HybridRetriever.from_config(
        config, documents=dataset.corpus, vectorstore=store
    )
    if args.k is not None:
        hybrid = hybrid.model_copy(update={"k": args.k})
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever as StockBM25

    stock_bm25 = StockBM25.from_documents(dataset.corpus, k=FETCH)
    chroma = store.as_retriever(search_kwargs={"k": FETCH})
    ensemble = EnsembleRetriever(retrievers=[stock_bm25, chroma], weights=[0.5, 0.5])
    # langchain-chroma's own collection: the floor is Chroma's query and nothing else.
    collection: Any = store._collection  # type: ignore[attr-defined]

    def floor(text: str) -> object:
        vector = embeddings.embed_query(text)
        return collection.query(
            query_embeddings=[vector], n_results=FETCH, include=["distances"]
        )

    # The parts, wrapped where they are looked up (class attributes). `_fuse_hits` is
    # the hybrid's own step after its retrievers answer; no public method holds
    # exactly that work, so the private one is wrapped (for timing only).
    patches: list[tuple[Any, str, str]] = [
        (FastEmbedEmbeddings, "embed_query", "query embedding"),
        (Collection, "query", "Chroma query"),
        (BM25Retriever, "scored_hits", "BM25"),
        (HybridRetriever, "_fuse_hits", "fusion, metadata merge, drop records"),
        (StockBM25, "_get_relevant_documents", "BM25"),
    ]
    for owner, attribute, part in patches:
        setattr(owner, attribute, timed(part, getattr(owner, attribute)))

    systems: dict[str, Callable[[str], object]] = {
        "floor": floor,
        "hybrid": hybrid.invoke,
        "ensemble": ensemble.invoke,
    }
    order = list(systems)
    queries = list(dataset.queries.values())[: args.limit]
    for name in order:  # warm-up: load models, fill caches
        current[0] = name
        systems[name](queries[0])
    times.clear()
    cpu_times.clear()
    own: list[float] = []
    own_cpu: list[float] = []
    for turn, text in enumerate(queries):
        for name in rotated(order, turn):
            current[0] = name
            timed("total", systems[name])(text)
        shared = (
            times["hybrid: query embedding"][-1] + times["hybrid: Chroma query"][-1]
        )
        own.append(times["hybrid: total"][-1] - shared)
        own_cpu.append(
            cpu_times["hybrid: total"][-1]
            - cpu_times["hybrid: query embedding"][-1]
            - cpu_times["hybrid: Chroma query"][-1]
        )

    precision = "int8" if args.int8 else "float32"
    out = console(100)
    table = Table(
        title=f"p50 ms over {len(queries)} queries, {precision} queries, "
        f"hybrid k={hybrid.k}, {FETCH} candidates per retriever"
    )
    table.add_column("system: part")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    for key in sorted(times):
        table.add_row(key, *_p50_p95(times[key]))
    table.add_row("hybrid: own work (total - embedding - Chroma)", *_p50_p95(own))
    table.add_row(
        "hybrid: own work, CPU time of the calling thread", *_p50_p95(own_cpu)
    )
    out.print(table)
    hybrid_p50 = statistics.median(times["hybrid: total"])
    floor_p50 = statistics.median(times["floor: total"])
    own_p50 = statistics.median(own)
    ratio = hybrid_p50 / floor_p50
    ensemble_ratio = statistics.median(times["ensemble: total"]) / hybrid_p50
    out.print(
        f"hybrid p50 {hybrid_p50:.2f} ms / floor p50 {floor_p50:.2f} ms = "
        f"{ratio:.2f}x (target <= {FLOOR_TARGET}: "
        f"{'met' if ratio <= FLOOR_TARGET else 'NOT met'})"
    )
    out.print(
        f"hybrid's own work p50 {own_p50:.2f} ms wall, "
        f"{statistics.median(own_cpu):.2f} ms CPU (target < {OWN_WORK_TARGET_MS} ms: "
        f"{'met' if own_p50 < OWN_WORK_TARGET_MS else 'NOT met'}); stock "
        f"EnsembleRetriever p50 is {ensemble_ratio:.1f}x the hybrid's"
    )
    out.print(
        f"hybrid's own work measured alone (the dense side's answers served from "
        f"memory, so no embedding runs before it): p50 "
        f"{own_work_alone(hybrid, queries):.2f} ms"
    )
    print_machine(out, load_average=True)


class ServedHits(BaseRetriever):
    """A dense side that answers from memory: hits fetched beforehand, per query."""

    answers: dict[str, list[tuple[Document, float]]]

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        return self.answers[query]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        raise NotImplementedError("only the direct path is measured")


def own_work_alone(hybrid: HybridRetriever, queries: list[str]) -> float:
    """p50 ms of `hybrid.invoke` with the dense hits served from memory.

    The same call as in the table, BM25 included, minus the embedding and Chroma:
    what the hybrid's own work costs when no model ran just before it (the ONNX
    embedding leaves the caches cold for whatever runs next).
    """
    position = next(
        i for i, r in enumerate(hybrid.retrievers) if isinstance(r, DenseRetriever)
    )
    dense = cast(DenseRetriever, hybrid.retrievers[position])
    fetch = hybrid.fetch_k[position] if hybrid.fetch_k else None
    served = ServedHits(answers={q: dense.scored_hits(q, fetch) for q in queries})
    retrievers = list(hybrid.retrievers)
    retrievers[position] = served
    alone = hybrid.model_copy(update={"retrievers": retrievers})
    elapsed = []
    for _ in range(3):
        for text in queries:
            start = time.perf_counter()
            alone.invoke(text)
            elapsed.append((time.perf_counter() - start) * 1000)
    return statistics.median(elapsed)


def _p50_p95(values: list[float]) -> tuple[str, str]:
    found = percentiles(values)
    return f"{found['p50']:.2f}", f"{found['p95']:.2f}"


if __name__ == "__main__":
    main()
