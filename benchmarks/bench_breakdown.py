"""Where a hybrid query's time goes, next to the stock EnsembleRetriever's.

Each part is timed by wrapping the function that does it; every query runs through
the stock ensemble and then the hybrid. Query embedding and Chroma are paid by both
systems; BM25, fusion and the rest are the hybrid's own. Run it once per query
precision:

    python benchmarks/bench_breakdown.py                 # float32 query embeddings
    python benchmarks/bench_breakdown.py --int8          # int8 query embeddings
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from chromadb.api.models.Collection import Collection
from rich.console import Console
from rich.table import Table

from langchain_ragbudget import build_embeddings, build_hybrid_retriever
from langchain_ragbudget.beir import load_beir
from langchain_ragbudget.cache import cached_vector_store
from langchain_ragbudget.config import load_config
from langchain_ragbudget.dense import DenseRetriever
from langchain_ragbudget.embeddings import FastEmbedEmbeddings
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.progress import ProgressBars
from langchain_ragbudget.sparse import BM25Retriever

FETCH = 100
times: dict[str, list[float]] = defaultdict(list)
current = ["ensemble"]  # which system the timed parts belong to


def timed(part: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            elapsed = (time.perf_counter() - start) * 1000
            times[f"{current[0]}: {part}"].append(elapsed)

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=os.environ.get("RAGBUDGET_SCIFACT_DIR", "../shared/data/scifact"),
    )
    parser.add_argument("--limit", type=int, default=150)
    parser.add_argument("--int8", action="store_true", help="int8 query embeddings")
    args = parser.parse_args()

    dataset = load_beir(args.data)
    config = load_config()
    if args.int8:
        embedding = config.embedding.model_copy(update={"query_precision": "int8"})
        config = config.model_copy(update={"embedding": embedding})
    with ProgressBars(transient=True) as progress:
        store = cached_vector_store(
            dataset.corpus,
            config.embedding,
            build_embeddings(config.embedding),
            name=dataset.name,
            progress=progress,
        )
    hybrid = build_hybrid_retriever(
        dataset.corpus, config, vectorstore=store
    ).model_copy(update={"k": FETCH})
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_classic.retrievers import EnsembleRetriever
    from langchain_community.retrievers import BM25Retriever as StockBM25

    stock_bm25 = StockBM25.from_documents(dataset.corpus, k=FETCH)
    chroma = store.as_retriever(search_kwargs={"k": FETCH})
    ensemble = EnsembleRetriever(retrievers=[stock_bm25, chroma], weights=[0.5, 0.5])

    # The parts, wrapped where they are looked up (class attributes).
    patches: list[tuple[Any, str, str]] = [
        (FastEmbedEmbeddings, "embed_query", "query embedding"),
        (Collection, "query", "Chroma query"),
        (BM25Retriever, "scored_hits", "BM25"),
        (DenseRetriever, "scored_hits", "dense stage"),
        (HybridRetriever, "_fuse_hits", "fusion, metadata merge, drop records"),
        (StockBM25, "_get_relevant_documents", "BM25"),
    ]
    for owner, attribute, part in patches:
        setattr(owner, attribute, timed(part, getattr(owner, attribute)))

    queries = list(dataset.queries.values())[: args.limit]
    for system, retriever in (("ensemble", ensemble), ("hybrid", hybrid)):
        current[0] = system
        retriever.invoke(queries[0])  # warm-up
    times.clear()
    for text in queries:
        for system, retriever in (("ensemble", ensemble), ("hybrid", hybrid)):
            current[0] = system
            timed("total", retriever.invoke)(text)

    precision = "int8" if args.int8 else "float32"
    table = Table(title=f"p50 ms over {len(queries)} queries, {precision} queries")
    table.add_column("system: part")
    table.add_column("p50 ms", justify="right")
    for key in sorted(times):
        table.add_row(key, f"{statistics.median(times[key]):.2f}")
    Console(width=100).print(table)


if __name__ == "__main__":
    main()
