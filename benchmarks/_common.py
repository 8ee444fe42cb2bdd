"""What the benchmark scripts share: the SciFact folder, the console, the cached stores.

Each script is run on its own (`python benchmarks/bench_x.py`), so Python puts this
folder on the path and `from _common import ...` finds this module. Everything here
is set-up and summary: none of it is what a benchmark measures.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from rich.console import Console

from langchain_ragbudget import RagBudgetConfig, build_embeddings
from langchain_ragbudget.evaluation import BeirDataset, cached_vector_store
from langchain_ragbudget.progress import ProgressCallback

T = TypeVar("T")


def scifact_dir() -> str:
    """Where SciFact is: RAGBUDGET_SCIFACT_DIR, else the shared data folder."""
    return os.environ.get("RAGBUDGET_SCIFACT_DIR", "../shared/data/scifact")


def parser_with_data(doc: str | None) -> argparse.ArgumentParser:
    """A parser described by the first line of `doc` that takes `--data` (SciFact)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--data", default=scifact_dir())
    return parser


def console(width: int) -> Console:
    """The rich console the tables print to, at a fixed width."""
    return Console(width=width)


def machine() -> str:
    """The machine, its cores and the Python version, for the record."""
    return (
        f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}"
    )


def print_machine(out: Console, *, load_average: bool = False) -> None:
    """Print `machine: ...`, with the load average when asked."""
    line = f"machine: {machine()}"
    if load_average:
        line += ", load average " + ", ".join(f"{x:.1f}" for x in os.getloadavg())
    out.print(line)


def int8_queries(config: RagBudgetConfig) -> RagBudgetConfig:
    """`config` with int8 query embeddings (`embedding.query_precision: int8`)."""
    embedding = config.embedding.model_copy(update={"query_precision": "int8"})
    return config.model_copy(update={"embedding": embedding})


def cached_store(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    embeddings: Embeddings | None = None,
    progress: ProgressCallback | None = None,
) -> VectorStore:
    """The evaluation's cached Chroma of `dataset` (embedded on a first run only)."""
    return cached_vector_store(
        dataset.corpus,
        config.embedding,
        embeddings or build_embeddings(config),
        name=dataset.name,
        progress=progress,
        ef_search=config.vector_store.ef_search,
    )


def rotated(order: Sequence[T], turn: int) -> list[T]:
    """`order` started at `turn` (mod its length): each item leads as often.

    Run in this order from query to query, machine noise and warm caches hit
    every system alike.
    """
    shift = turn % len(order)
    return [*order[shift:], *order[:shift]]


def percentiles(values: list[float]) -> dict[str, float]:
    """The median and the 95th percentile (nearest rank below) of `values`."""
    ordered = sorted(values)
    return {
        "p50": statistics.median(ordered),
        "p95": ordered[int(0.95 * (len(ordered) - 1))],
    }


def timing(
    function: Callable[..., Any], record: Callable[[float, float], None]
) -> Callable[..., Any]:
    """`function`, telling `record` each call's wall and thread CPU seconds."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start, start_cpu = time.perf_counter(), time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            record(elapsed, time.thread_time() - start_cpu)

    return wrapper
