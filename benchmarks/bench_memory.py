"""Agent memory: recall p50 at 1,000 / 10,000 / 100,000 memories, bytes per memory.

Synthetic memories: 384-dimensional random unit vectors (all-MiniLM-L6-v2's size;
the timing depends on the size, not on what the vectors mean), importance uniform
in 0..1, said over the past year, one short text each. Every memory goes in
through `MemoryStore.remember` (one transaction each, the same path as an agent),
so the file is what an agent's store would be. Per size, in one run:

- remember p50: one `remember` (a new memory: the restatement check, the insert);
- first recall: the first after the writes, which reads the ranking arrays;
- recall p50: `MemoryRetriever.recall(vector=...)` with the arrays cached, k=8
  (scoring every memory, the top k, their rows, `last_recalled_at` written);
- of which scoring p50: the brute-force cosine x importance x recency and top k;
- `@` and einsum p50: the cosines alone both ways (recall uses `@` from
  `BLAS_FROM` memories, einsum below: BLAS's threads cost ~10 ms a call when the
  cores are busy);
- recall after a write p50: one `remember`, then a recall (which reads the new
  memory's vector and the ranking columns again, not every vector);
- bytes per memory: the SQLite file (WAL checkpointed) over the memories.

    python benchmarks/bench_memory.py [--sizes 1000 10000 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from _common import console, print_machine
from rich.table import Table

from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore
from langchain_ragbudget.memory._score import best, score_all

DIMENSION = 384
NOW = datetime(2026, 12, 1, tzinfo=UTC)
out = console(150)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime:
        return self.now


def fill(
    store: MemoryStore, clock: Clock, count: int, rng: np.random.Generator
) -> list[float]:
    """`count` memories through `remember`; the last 200 timed (seconds)."""
    vectors = rng.normal(size=(count, DIMENSION)).astype(np.float32)
    ages = rng.uniform(0, 365, size=count)
    importance = rng.uniform(0, 1, size=count)
    times = []
    for i in range(count):
        clock.now = NOW - timedelta(days=float(ages[i]))
        start = time.perf_counter()
        store.remember(
            f"synthetic memory number {i}: the user said something worth keeping",
            importance=float(importance[i]),
            embedding=vectors[i],
        )
        if i >= count - 200:
            times.append(time.perf_counter() - start)
    clock.now = NOW
    return times


def measure(size: int, queries: int, folder: Path) -> dict[str, float]:
    rng = np.random.default_rng(size)
    clock = Clock()
    path = folder / f"memory-{size}.sqlite"
    store = MemoryStore(path, clock=clock)
    remember = fill(store, clock, size, rng)
    retriever = MemoryRetriever(store=store, k=8)
    query_vectors = rng.normal(size=(queries, DIMENSION))
    start = time.perf_counter()
    retriever.recall(vector=query_vectors[0].tolist())
    first = time.perf_counter() - start
    recall, scoring, blas, einsum = [], [], [], []
    ranking = store.ranking()
    for vector in query_vectors:
        start = time.perf_counter()
        kept = retriever.recall(vector=vector.tolist()).kept
        recall.append(time.perf_counter() - start)
        assert len(kept) == 8
        start = time.perf_counter()
        _, _, _, scores = score_all(ranking, vector, NOW.timestamp(), 30.0)
        best(scores, 8)
        scoring.append(time.perf_counter() - start)
    for vector in query_vectors:  # apart: BLAS's idle threads slow what follows
        unit = (vector / np.linalg.norm(vector)).astype(np.float32)
        start = time.perf_counter()
        np.einsum("ij,j->i", ranking.vectors, unit)
        einsum.append(time.perf_counter() - start)
    for vector in query_vectors:
        unit = (vector / np.linalg.norm(vector)).astype(np.float32)
        start = time.perf_counter()
        ranking.vectors @ unit
        blas.append(time.perf_counter() - start)
    after_write = []
    for i, vector in enumerate(query_vectors[:20]):
        store.remember(f"a new memory {i}", embedding=rng.normal(size=DIMENSION))
        start = time.perf_counter()
        retriever.recall(vector=vector.tolist())
        after_write.append(time.perf_counter() - start)
    store._connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    size_bytes = sum(
        p.stat().st_size for p in folder.glob(f"memory-{size}.sqlite*") if p.is_file()
    )
    return {
        "remember_ms": statistics.median(remember) * 1000,
        "first_ms": first * 1000,
        "recall_ms": statistics.median(recall) * 1000,
        "scoring_ms": statistics.median(scoring) * 1000,
        "after_write_ms": statistics.median(after_write) * 1000,
        "blas_ms": statistics.median(blas) * 1000,
        "einsum_ms": statistics.median(einsum) * 1000,
        "bytes": size_bytes / (size + len(after_write)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000]
    )
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    print_machine(out, load_average=True)
    table = Table(title="agent memory: recall over synthetic 384-d memories (k=8)")
    for column in (
        "memories",
        "remember p50 ms",
        "first recall ms",
        "recall p50 ms",
        "of which scoring p50 ms",
        "@ p50 ms",
        "einsum p50 ms",
        "recall after a write p50 ms",
        "bytes / memory",
    ):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as folder:
        for size in args.sizes:
            row = measure(size, args.queries, Path(folder))
            table.add_row(
                f"{size:,}",
                f"{row['remember_ms']:.2f}",
                f"{row['first_ms']:.1f}",
                f"{row['recall_ms']:.2f}",
                f"{row['scoring_ms']:.2f}",
                f"{row['blas_ms']:.2f}",
                f"{row['einsum_ms']:.2f}",
                f"{row['after_write_ms']:.1f}",
                f"{row['bytes']:,.0f}",
            )
    out.print(table)
    out.print(
        f"embedding alone: {DIMENSION} x 4 = {DIMENSION * 4:,} bytes; "
        "target: recall p50 under 20 ms at 100,000 memories"
    )


if __name__ == "__main__":
    main()
