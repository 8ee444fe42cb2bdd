"""What OpenTelemetry tracing costs a query: the chain with tracing off and on.

The chain is `create_budgeted_rag_chain` over SciFact (BM25 + Chroma from the cache,
default config: fetch 100 + 100, k=10, the `chat` budget), without rerank (FlashRank's
weights cannot be had here) and without a model. Three ways of running it alternate
query by query: tracing off; a callback handler that does nothing (the price of
having any callbacks: the hybrid then runs each retriever and the fusion as child
runs); and tracing on, with spans going to an SDK TracerProvider through a
SimpleSpanProcessor into an in-memory exporter (span building, not network export).

    python benchmarks/bench_tracing.py
"""

from __future__ import annotations

import statistics
import time
from collections import defaultdict
from typing import Any

from _common import cached_store, console, parser_with_data
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from rich.table import Table

from langchain_ragbudget import (
    ContextBudget,
    HybridRetriever,
    create_budgeted_rag_chain,
)
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import cached_sparse_retriever, load_beir


class NothingHandler(BaseCallbackHandler):
    """Listens to every run and does nothing."""


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=150)
    args = parser.parse_args()

    dataset = load_beir(args.data)
    config = load_config()
    store = cached_store(dataset, config)
    sparse = cached_sparse_retriever(dataset.corpus, config, name=dataset.name)
    docstore = {doc.id: doc for doc in dataset.corpus if doc.id is not None}
    retriever = HybridRetriever.from_config(
        config, sparse=sparse, vectorstore=store, chunk_store=docstore
    )
    budget = ContextBudget.from_config(config)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    chains: dict[str, Runnable[str, Any]] = {
        "tracing off": create_budgeted_rag_chain(retriever, budget=budget),
        "a do-nothing callback": create_budgeted_rag_chain(
            retriever, budget=budget
        ).with_config(callbacks=[NothingHandler()]),
        "tracing on": create_budgeted_rag_chain(
            retriever, budget=budget, tracing=True, tracer_provider=provider
        ),
    }
    queries = list(dataset.queries.values())[: args.limit]
    for chain in chains.values():
        chain.invoke(queries[0])  # warm-up
    times: dict[str, list[float]] = defaultdict(list)
    spans: list[int] = []
    for text in queries:
        for name, chain in chains.items():
            exporter.clear()
            start = time.perf_counter()
            chain.invoke(text)
            times[name].append(time.perf_counter() - start)
        spans.append(len(exporter.get_finished_spans()))

    base = statistics.median(times["tracing off"])
    table = Table(
        title=f"create_budgeted_rag_chain on SciFact, p50 over {len(queries)} queries"
    )
    table.add_column("run")
    table.add_column("p50 ms", justify="right")
    table.add_column("vs off", justify="right")
    for name, samples in times.items():
        p50 = statistics.median(samples)
        table.add_row(name, f"{p50 * 1000:.2f}", f"{p50 / base:.2f}x")
    out = console(100)
    out.print(table)
    out.print(f"spans per traced query: {min(spans)} to {max(spans)}")


if __name__ == "__main__":
    main()
