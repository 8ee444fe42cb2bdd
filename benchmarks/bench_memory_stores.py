"""Agent memory on SQLite and on PostgreSQL: write and recall latency, side by side.

Per store and size (1,000 / 10,000 / 100,000 memories), in one run: synthetic
384-dimensional memories (all-MiniLM-L6-v2's size) put in one by one through
`MemoryStore.remember`, as an agent does; then

- remember p50: one `remember` of a new statement (the last 200 of the fill), on
  each store's usual durability: SQLite's WAL with `synchronous = NORMAL` and
  PostgreSQL with `synchronous_commit = off` (both never corrupt, both may lose
  the last commits to a power cut, neither to a crashed process);
- durable: 50 more with every commit flushed to disk (SQLite `synchronous =
  FULL`, PostgreSQL `synchronous_commit = on`, the server's default);
- first recall: the first after the fill, which reads every vector into the cache;
- recall p50: `MemoryRetriever.recall(vector=...)`, k = 8, with the vectors cached
  (the change counter read, every memory scored, the top k's rows read, their
  `last_recalled_at` written);
- one pass p50: the cosines alone, the one matrix-vector product recall makes
  (`cosines`, as recall calls it); the ratio is recall over it;
- recall after a write p50: another process's `remember`, then a recall, which
  reads only the rows that changed.

PostgreSQL is a throwaway cluster from the Debian binaries (tests/postgres_cluster.py,
fsync on), on a unix socket; or `--postgres URL` for a server of your own
(memories go into a new schema).

    python benchmarks/bench_memory_stores.py [--sizes 1000 10000 100000] [--queries 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from _common import console, print_machine
from bench_memory import DIMENSION, Clock, fill, recall_against_matvec
from rich.table import Table

from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import postgres_cluster

ASYNC_COMMIT = "%20-csynchronous_commit%3Doff"  # in the URL's options
out = console(150)


def p50_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


# Per store: (flush every commit, back to its usual durability).
DURABLE = {
    "SQLite": ("PRAGMA synchronous = FULL", "PRAGMA synchronous = NORMAL"),
    "PostgreSQL": ("SET synchronous_commit = on", "SET synchronous_commit = off"),
}


def durable_remember(
    store: MemoryStore, name: str, rng: np.random.Generator
) -> list[float]:
    """50 `remember`s with every commit flushed to disk (seconds)."""
    flush, usual = DURABLE[name]
    store._connection.execute(flush)
    times = []
    for i in range(50):
        vector = rng.normal(size=DIMENSION)
        start = time.perf_counter()
        store.remember(f"a durable memory {i}", embedding=vector)
        times.append(time.perf_counter() - start)
    store._connection.execute(usual)
    return times


def measure(
    name: str, location: str | Path, size: int, queries: int
) -> dict[str, float]:
    rng = np.random.default_rng(size)
    clock = Clock()
    store, other = MemoryStore(location, clock=clock), MemoryStore(location)
    remember = fill(store, clock, size, rng)
    durable = durable_remember(store, name, rng)
    query_vectors = rng.normal(size=(queries, DIMENSION))
    start = time.perf_counter()
    MemoryRetriever(store=store, k=8).recall(vector=query_vectors[0].tolist())
    first = time.perf_counter() - start
    recall, one_pass = recall_against_matvec(store, query_vectors)
    retriever = MemoryRetriever(store=store, k=8)
    after_write = []
    for i, vector in enumerate(query_vectors[:20]):
        other.remember(f"a new memory {i}", embedding=rng.normal(size=DIMENSION))
        start = time.perf_counter()
        retriever.recall(vector=vector.tolist())
        after_write.append(time.perf_counter() - start)
    store.close()
    other.close()
    return {
        "remember": p50_ms(remember),
        "durable": p50_ms(durable),
        "first": first * 1000,
        "recall": recall,
        "pass": one_pass,
        "after_write": p50_ms(after_write),
    }


@contextmanager
def postgres(url: str | None) -> Iterator[Callable[[], str]]:
    """A factory of new, empty schemas: on `url`, or on a throwaway cluster."""
    if url is not None:
        yield lambda: _schema_on(url)
        return
    if reason := postgres_cluster.why_not():
        raise SystemExit(f"no PostgreSQL to measure: {reason}; or give --postgres")
    with postgres_cluster.cluster(durable=True) as host:
        yield lambda: postgres_cluster.new_schema(host) + ASYNC_COMMIT


def _schema_on(url: str) -> str:
    import psycopg
    from psycopg import sql

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    joiner = "&" if "?" in url else "?"
    return f"{url}{joiner}options=-csearch_path%3D{schema}{ASYNC_COMMIT}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000]
    )
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--postgres", help="a server of your own (postgresql:// URL)")
    args = parser.parse_args()
    print_machine(out, load_average=True)
    table = Table(title="agent memory on two stores: 384-d memories, k = 8, p50")
    for column in (
        "store",
        "memories",
        "remember ms",
        "durable ms",
        "first recall ms",
        "recall ms",
        "one pass ms",
        "recall / one pass",
        "recall after a write ms",
    ):
        table.add_column(column, justify="right")
    with tempfile.TemporaryDirectory() as folder, postgres(args.postgres) as schema:
        stores: dict[str, Callable[[int], str | Path]] = {
            "SQLite": lambda size: Path(folder) / f"memory-{size}.sqlite",
            "PostgreSQL": lambda size: schema(),
        }
        for size in args.sizes:
            for name, location in stores.items():
                row = measure(name, location(size), size, args.queries)
                table.add_row(
                    name,
                    f"{size:,}",
                    f"{row['remember']:.2f}",
                    f"{row['durable']:.2f}",
                    f"{row['first']:.0f}",
                    f"{row['recall']:.2f}",
                    f"{row['pass']:.2f}",
                    f"{row['recall'] / row['pass']:.2f}x",
                    f"{row['after_write']:.1f}",
                )
    out.print(table)
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
