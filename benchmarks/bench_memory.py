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
- one pass p50: the cosines alone as recall computes them (`cosines`, einsum),
  timed between the recalls, and recall / one pass, their ratio;
- `@` p50: the same product by BLAS (`@`), timed apart, for comparison;
- recall after a write p50: one `remember`, then a recall (which reads the new
  memory's vector and the ranking columns again, not every vector);
- bytes per memory: the SQLite file (WAL checkpointed) over the memories.

Recall against one pass over the vectors (`recall_against_matvec`, any
`MemoryStore`): recall p50 over the p50 of the matrix-vector product alone
(`cosines`, as recall computes it), the two interleaved query by query so a noisy
machine slows both alike.

`--stream`: the seeded stream of `_memory_stream.py` (a few hundred subjects
stated, restated, recalled, changed, contradicted over 26 weeks, all-MiniLM-L6-v2
embeddings) through the package and the anchors' clocks: the share of questions
whose memory section holds the subject's current statement, and the share whose
section holds a statement that is no longer current.

    python benchmarks/bench_memory.py [--sizes 1000 10000 100000] [--queries 50]
    python benchmarks/bench_memory.py --stream [--subjects 300] [--half-lives 30 365]
        [--every-weeks 2]
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
from langchain_ragbudget.memory._score import best, cosines, score_all

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
    recall_ms, matvec_ms = recall_against_matvec(store, query_vectors)
    scoring, blas = [], []
    ranking = store.ranking()
    for vector in query_vectors:
        start = time.perf_counter()
        _, _, _, scores = score_all(ranking, vector, NOW.timestamp(), 30.0)
        best(scores, 8)
        scoring.append(time.perf_counter() - start)
    for vector in query_vectors:  # apart: BLAS's idle threads slow what follows
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
        "recall_ms": recall_ms,
        "matvec_ms": matvec_ms,
        "scoring_ms": statistics.median(scoring) * 1000,
        "after_write_ms": statistics.median(after_write) * 1000,
        "blas_ms": statistics.median(blas) * 1000,
        "bytes": size_bytes / (size + len(after_write)),
    }


def recall_against_matvec(
    store: MemoryStore, queries: np.ndarray, k: int = 8
) -> tuple[float, float]:
    """Recall p50 and one matrix-vector product's p50 (ms) over `store`.

    Any `MemoryStore` (SQLite or a server store): recall is the retriever's whole
    `recall(vector=...)` (score every memory, the top k, their rows, the
    supersession check, `last_recalled_at` written); the product is `cosines`
    over the same ranking arrays, as recall computes it. The two alternate query
    by query.
    """
    retriever = MemoryRetriever(store=store, k=k)
    retriever.recall(vector=queries[0].tolist())  # the arrays read once
    vectors = store.ranking().vectors
    recall, matvec = [], []
    for vector in queries:
        start = time.perf_counter()
        retriever.recall(vector=vector.tolist())
        recall.append(time.perf_counter() - start)
        unit = (vector / np.linalg.norm(vector)).astype(np.float32)
        start = time.perf_counter()
        cosines(vectors, unit)
        matvec.append(time.perf_counter() - start)
    return statistics.median(recall) * 1000, statistics.median(matvec) * 1000


def scale_table(sizes: list[int], queries: int) -> Table:
    table = Table(title="agent memory: recall over synthetic 384-d memories (k=8)")
    for column in (
        "memories",
        "remember p50 ms",
        "first recall ms",
        "recall p50 ms",
        "of which scoring p50 ms",
        "one pass p50 ms",
        "recall / one pass",
        "@ p50 ms",
        "recall after a write p50 ms",
        "bytes / memory",
    ):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as folder:
        for size in sizes:
            row = measure(size, queries, Path(folder))
            table.add_row(
                f"{size:,}",
                f"{row['remember_ms']:.2f}",
                f"{row['first_ms']:.1f}",
                f"{row['recall_ms']:.2f}",
                f"{row['scoring_ms']:.2f}",
                f"{row['matvec_ms']:.2f}",
                f"{row['recall_ms'] / row['matvec_ms']:.2f}x",
                f"{row['blas_ms']:.2f}",
                f"{row['after_write_ms']:.1f}",
                f"{row['bytes']:,.0f}",
            )
    return table


def stream_table(
    subjects: int, seed: int, half_lives: list[float], every: int
) -> Table:
    from _memory_stream import run, stream, texts_to_embed

    from langchain_ragbudget import build_embeddings, load_config

    people, events = stream(subjects, seed)
    texts = texts_to_embed(people, events)
    start = time.perf_counter()
    embedded = build_embeddings(load_config()).embed_documents(texts)
    vectors = dict(zip(texts, np.asarray(embedded), strict=True))
    out.print(
        f"stream: {len(people)} subjects, {len(events)} events over 26 weeks, "
        f"seed {seed}; {len(texts)} texts embedded with all-MiniLM-L6-v2 in "
        f"{time.perf_counter() - start:.1f} s"
    )
    table = Table(
        title=f"the current fact against stale ones, asked every {every} weeks"
    )
    for column in (
        "half-life",
        "memory",
        "questions",
        "current served",
        "stale served",
        "subject served",
        "current, of subject served",
    ):
        table.add_column(column, justify="left" if column == "memory" else "right")
    with tempfile.TemporaryDirectory() as folder:
        for half_life in half_lives:
            tallies = run(people, events, vectors, half_life, Path(folder), every)
            for name, tally in tallies.items():
                table.add_row(
                    f"{half_life:g} days",
                    name,
                    f"{tally.asked:,}",
                    f"{tally.current / tally.asked:.1%}",
                    f"{tally.stale / tally.asked:.1%}",
                    f"{tally.subject / tally.asked:.1%}",
                    f"{tally.current / max(tally.subject, 1):.1%}",
                )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000]
    )
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--stream", action="store_true", help="the fact stream only")
    parser.add_argument("--subjects", type=int, default=300)
    parser.add_argument("--seed", type=int, default=35)
    parser.add_argument("--half-lives", type=float, nargs="+", default=[30.0, 365.0])
    parser.add_argument("--every-weeks", type=int, default=2, help="ask how often")
    args = parser.parse_args()
    print_machine(out, load_average=True)
    if args.stream:
        out.print(
            stream_table(args.subjects, args.seed, args.half_lives, args.every_weeks)
        )
        return
    out.print(scale_table(args.sizes, args.queries))
    out.print(
        f"embedding alone: {DIMENSION} x 4 = {DIMENSION * 4:,} bytes; "
        "target: recall p50 at most 1.5x one `@` at 100,000 memories"
    )


if __name__ == "__main__":
    main()
