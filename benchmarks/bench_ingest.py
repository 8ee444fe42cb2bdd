"""Ingest benchmark: SciFact into a fresh HybridIndex, then the same again unchanged.

Prints documents and chunks per second and where the time goes (chunking, embedding,
Chroma writes, BM25 build and save), measured by timing wrappers around the real
parts in this one run. The BM25 part is `BM25Retriever.from_documents` and
`BM25Retriever.save`; the index's version bookkeeping around the save (its record
file, the atomic rename) counts with the Chroma writes.

    python benchmarks/bench_ingest.py [--limit N]
"""

from __future__ import annotations

import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import console, parser_with_data, print_machine, timing
from rich.table import Table

from langchain_ragbudget import build_embeddings
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import load_corpus
from langchain_ragbudget.index import Chunker, HybridIndex
from langchain_ragbudget.progress import ProgressBars
from langchain_ragbudget.retrieval._sparse import BM25Retriever

out = console(120)
spent: dict[str, float] = {"chunking": 0.0, "embedding": 0.0, "bm25 build + save": 0.0}


class TimedEmbeddings:
    """The configured embedder, timed."""

    def __init__(self) -> None:
        self.inner = build_embeddings(load_config())

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self.inner.embed_documents(texts)
        finally:
            spent["embedding"] += time.perf_counter() - start

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """`function`, its wall time added to `spent[name]`."""

    def record(wall: float, cpu: float) -> None:
        spent[name] += wall

    return timing(function, record)


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    corpus = load_corpus(Path(args.data))[: args.limit]
    Chunker.split_counted = timed("chunking", Chunker.split_counted)  # type: ignore[method-assign]
    bm25 = "bm25 build + save"
    BM25Retriever.from_documents = timed(bm25, BM25Retriever.from_documents)  # type: ignore[method-assign]
    BM25Retriever.save = timed(bm25, BM25Retriever.save)  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        index = HybridIndex.open(Path(tmp) / "scifact", embeddings=TimedEmbeddings())  # type: ignore[arg-type]
        with ProgressBars(out, transient=True) as progress:
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
    out.print(table)
    print_machine(out)


if __name__ == "__main__":
    main()
