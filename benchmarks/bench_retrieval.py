"""Retrieval benchmark on BEIR SciFact: quality and latency, side by side in one run.

Systems: stock langchain_community BM25Retriever (rank_bm25), our BM25 (bm25s),
dense (Chroma + all-MiniLM-L6-v2 ONNX), stock EnsembleRetriever(BM25Retriever, Chroma)
with equal weights, and our HybridRetriever, untraced and with a callback handler
attached (which makes it run its retrievers as child runs). Then dense, the stock
ensemble and the hybrid again with int8 query embeddings (`query_precision: int8`;
both systems share the embedder and the float32 corpus). Every query runs through
every system in turn, in an order rotated from query to query, so machine noise and
cache state hit all of them alike; ratios are the result to trust.

    make bench            # or: python benchmarks/bench_retrieval.py --limit 50
"""

from __future__ import annotations

import json
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from _common import (
    cached_store,
    console,
    int8_queries,
    parser_with_data,
    print_machine,
    rotated,
)
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore
from rich.table import Table

from langchain_ragbudget import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_beir, ndcg_at_k, recall_at_k
from langchain_ragbudget.progress import ProgressBars, StageProgress

FETCH = 100
out = console(120)


def stock_ensemble(stock_bm25: BaseRetriever, store: VectorStore) -> BaseRetriever:
    from langchain_classic.retrievers import EnsembleRetriever

    chroma = store.as_retriever(search_kwargs={"k": FETCH})
    return EnsembleRetriever(retrievers=[stock_bm25, chroma], weights=[0.5, 0.5])


class Traced(BaseCallbackHandler):
    """A handler that does nothing: its presence is what a tracer costs at least."""


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=None, help="first N test queries")
    parser.add_argument("--json", type=Path, default=None, help="write results here")
    args = parser.parse_args()

    dataset = load_beir(args.data)
    queries = list(dataset.queries.items())[: args.limit]
    config = load_config()
    int8 = int8_queries(config)
    with ProgressBars(out, transient=True) as progress:
        store, store_int8 = (
            cached_store(dataset, settings, progress=progress)
            for settings in (config, int8)
        )
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_community.retrievers import BM25Retriever as StockBM25

    stock_bm25 = StockBM25.from_documents(dataset.corpus, k=FETCH)
    ours = BM25Retriever.from_config(config, documents=dataset.corpus)
    hybrid, hybrid_int8 = (
        HybridRetriever.from_config(
            settings, documents=dataset.corpus, vectorstore=vectors, sparse=ours
        ).model_copy(update={"k": FETCH})
        for settings, vectors in ((config, store), (int8, store_int8))
    )
    traced = RunnableConfig(callbacks=[Traced()])
    systems: dict[str, Callable[[str], list[Document]]] = {
        "stock BM25Retriever": stock_bm25.invoke,
        "our BM25 (bm25s)": ours.invoke,
        "dense (Chroma, MiniLM ONNX)": DenseRetriever(
            vectorstore=store, k=FETCH
        ).invoke,
        "stock EnsembleRetriever": stock_ensemble(stock_bm25, store).invoke,
        "HybridRetriever": hybrid.invoke,
        "HybridRetriever, traced": lambda text: hybrid.invoke(text, traced),
        "dense, int8 query": DenseRetriever(vectorstore=store_int8, k=FETCH).invoke,
        "stock EnsembleRetriever, int8 query": stock_ensemble(
            stock_bm25, store_int8
        ).invoke,
        "HybridRetriever, int8 query": hybrid_int8.invoke,
    }
    order = list(systems)
    doc_id: Callable[[Document], str] = lambda d: str(d.metadata["doc_id"])  # noqa: E731
    for name in order:  # warm-up: load models, fill caches
        systems[name](queries[0][1])
    latencies: dict[str, list[float]] = {name: [] for name in order}
    ndcg: dict[str, list[float]] = {name: [] for name in order}
    recall: dict[str, list[float]] = {name: [] for name in order}
    with ProgressBars(out, transient=True) as progress:
        answered = StageProgress(progress, "queries", len(queries)).start()
        for turn, (query_id, text) in enumerate(queries):
            relevant = dataset.qrels[query_id]
            # Rotate the order per query, so every system follows every other as
            # often: a system run right after one that used the same model or
            # index finds warm caches (the hybrid after the ensemble: about 1 ms).
            for name in rotated(order, turn):
                start = time.perf_counter()
                results = systems[name](text)
                latencies[name].append((time.perf_counter() - start) * 1000)
                ranked = [doc_id(d) for d in results]
                ndcg[name].append(ndcg_at_k(ranked, relevant, 10))
                recall[name].append(recall_at_k(ranked, relevant, 100))
            answered.advance()

    rows = {
        name: {
            "ndcg@10": statistics.fmean(ndcg[name]),
            "recall@100": statistics.fmean(recall[name]),
            "p50_ms": statistics.median(latencies[name]),
        }
        for name in order
    }
    table = Table(
        title=f"{dataset.name}: {len(queries)} test queries, "
        f"{len(dataset.corpus)} documents"
    )
    for column in ("system", "nDCG@10", "recall@100", "p50 ms / query"):
        table.add_column(column, justify="left" if column == "system" else "right")
    for name, row in rows.items():
        table.add_row(
            name,
            f"{row['ndcg@10']:.4f}",
            f"{row['recall@100']:.4f}",
            f"{row['p50_ms']:.2f}",
        )
    out.print(table)
    speedups = {
        precision: rows[f"stock EnsembleRetriever{suffix}"]["p50_ms"]
        / rows[f"HybridRetriever{suffix}"]["p50_ms"]
        for precision, suffix in (("float32", ""), ("int8", ", int8 query"))
    }
    for precision, speedup in speedups.items():
        out.print(
            f"{precision} query embeddings: HybridRetriever p50 is {speedup:.1f}x "
            "lower than stock EnsembleRetriever"
        )
    print_machine(out)
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "speedups": speedups}, indent=2))


if __name__ == "__main__":
    main()
