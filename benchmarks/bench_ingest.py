"""Ingest benchmark: SciFact into a fresh HybridIndex, then the same again unchanged.

Prints documents and chunks per second and where the time goes (chunking, embedding,
Chroma writes, BM25 build and atomic save), measured by timing wrappers around the
real parts in this one run.

    python benchmarks/bench_ingest.py [--limit N]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from langchain_ragbudget.config import load_config
from langchain_ragbudget.evaluation._beir import load_corpus
from langchain_ragbudget.factory import build_embeddings
from langchain_ragbudget.index import _chunking as chunking
from langchain_ragbudget.index import _hybrid_index as index_module
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.progress import ProgressBars

console = Console(width=120)
spent: dict[str, float] = {"chunking": 0.0, "embedding": 0.0, "bm25 build + save": 0.0}


class TimedEmbeddings:
    """The configured embedder, timed."""

    def __init__(self) -> None:
        self.inner = build_embeddings(load_config().embedding)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            spent["embedding"] += time.perf_counter() - start

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def timed(name: str, function: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - start

    return wrapper


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        default=os.environ.get("RAGBUDGET_SCIFACT_DIR", "../shared/data/scifact"),
    )
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    corpus = load_corpus(Path(args.data))[: args.limit]
    chunking.Chunker.split_counted = timed("chunking", chunking.Chunker.split_counted)  # type: ignore[method-assign]
    index_module.build_sparse_retriever = timed(
        "bm25 build + save", index_module.build_sparse_retriever
    )
    index_module._save_sparse = timed("bm25 build + save", index_module._save_sparse)
    with tempfile.TemporaryDirectory() as tmp:
        index = HybridIndex.open(Path(tmp) / "scifact", embeddings=TimedEmbeddings())  # type: ignore[arg-type]
        with ProgressBars(console, transient=True) as progress:
            start = time.perf_counter()
            summary = index.upsert(corpus, progress=progress)
            total = time.perf_counter() - start
        start = time.perf_counter()
        again = index.upsert(corpus)
        rerun = time.perf_counter() - start
        chunks = index.chunk_count
    table = Table(
        title=f"ingest {len(corpus)} SciFact abstracts (chunk_size 256, overlap 32)"
    )
    for column in ("measure", "value"):
        table.add_column(column, justify="right" if column == "value" else "left")
    table.add_row("documents / chunks", f"{len(summary.added)} / {chunks}")
    table.add_row("total", f"{total:.1f} s")
    table.add_row("documents per second", f"{len(corpus) / total:.1f}")
    table.add_row("chunks per second", f"{chunks / total:.1f}")
    for name in ("embedding", "chunking", "bm25 build + save"):
        table.add_row(f"  {name}", f"{spent[name]:.1f} s ({spent[name] / total:.0%})")
    rest = total - sum(spent.values())
    table.add_row(
        "  Chroma writes and bookkeeping", f"{rest:.1f} s ({rest / total:.0%})"
    )
    table.add_row(
        "re-ingest, all unchanged", f"{rerun:.1f} s ({len(again.unchanged)} skipped)"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    table.add_row("peak memory (RSS)", f"{peak:.0f} MiB")
    console.print(table)
    console.print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


if __name__ == "__main__":
    main()
