"""The demo: the embedded default over the bundled sample corpus, shown as tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from langchain_core.documents import Document
from rich.console import Console
from rich.table import Table

from langchain_ragbudget.config import load_config
from langchain_ragbudget.drops import drops_of
from langchain_ragbudget.embedded import build_hybrid_retriever
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions


def _number(metadata: dict[str, object], key: str, digits: int) -> str:
    value = metadata.get(key)
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def fusion_table(
    question: str, documents: Sequence[Document], answer_ids: Sequence[str] = ()
) -> Table:
    """The fused ranking with each retriever's rank and score; answers in green."""
    table = Table(title=question, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("passage", no_wrap=True)
    for column in ("bm25 #", "bm25", "dense #", "dense", "fused"):
        table.add_column(column, justify="right")
    for document in documents:
        meta = document.metadata
        table.add_row(
            _number(meta, "fused_rank", 0),
            str(document.id),
            _number(meta, "bm25_rank", 0),
            _number(meta, "bm25_score", 2),
            _number(meta, "dense_rank", 0),
            _number(meta, "dense_score", 3),
            _number(meta, "fused_score", 4),
            style="bold green" if document.id in answer_ids else None,
        )
    return table


def run_demo(
    config_path: str | Path | None = None, console: Console | None = None
) -> None:
    """Index the sample corpus and print the fused ranking for its questions."""
    console = console or Console()
    config = load_config(config_path)
    corpus = load_sample_corpus()
    with console.status(f"indexing {len(corpus)} sample passages (BM25 + Chroma)"):
        retriever = build_hybrid_retriever(corpus, config)
    console.print(
        "[bold]HybridRetriever[/bold]: BM25 (bm25s) + Chroma "
        f"({config.embedding.model}), "
        f"weighted RRF c={config.retrieval.rrf_c:g}, k={config.retrieval.k}"
    )
    for item in load_sample_questions()[:3]:
        results = retriever.invoke(item["question"])
        console.print(fusion_table(item["question"], results, item["answer_ids"]))
        cut = drops_of(results)
        if cut:
            names = ", ".join(record.key for record in cut[:6])
            more = f" and {len(cut) - 6} more" if len(cut) > 6 else ""
            console.print(
                f"[yellow]{len(cut)} candidate(s) fused below k={config.retrieval.k}: "
                f"{names}{more}[/yellow]"
            )
        console.print(f"answer passage(s): {', '.join(item['answer_ids']) or 'none'}\n")
