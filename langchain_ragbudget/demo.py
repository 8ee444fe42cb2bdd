"""The demo: the whole pipeline over the bundled sample corpus, shown as tables.

One question through two surfaces (a tight `chat` budget, a wider `search` one):
the evidence table says, for every candidate, whether it reached the prompt and, if
not, which stage dropped it and why; then the prompt that is sent, and the answer
with its warnings when a chat model is configured.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from langchain_ragbudget.budget import BudgetedContext, ContextBudget
from langchain_ragbudget.chain import (
    DEFAULT_PROMPT,
    build_answer,
    context_warnings,
    prompt_inputs,
)
from langchain_ragbudget.config import LlmSettings, RagBudgetConfig, load_config
from langchain_ragbudget.drops import Stage
from langchain_ragbudget.embedded import build_hybrid_retriever
from langchain_ragbudget.identity import document_key, document_source
from langchain_ragbudget.pipeline import create_budgeted_rag_chain
from langchain_ragbudget.rerank import FlashRankRerank
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

DEMO_QUESTION = 0  # index into sample_data/questions.json


def _fmt(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def evidence_table(
    context: BudgetedContext, answer_ids: Sequence[str] = ()
) -> tuple[Table, Counter[str]]:
    """Every candidate the budget saw, and the count of those cut earlier.

    Rows are the kept passages and the passages the rerank and budget stages
    dropped, in fused order; fusion cuts are only counted (there are many).
    """
    rows: list[tuple[Document, str, int | None]] = [
        (doc, "kept", doc.metadata.get("context_tokens")) for doc in context.documents
    ]
    earlier: Counter[str] = Counter()
    for record in context.report.drops:
        if record.stage == Stage.FUSION:
            earlier[str(record.reason)] += 1
            continue
        rows.append(
            (record.document, f"{record.reason} ({record.stage})", record.tokens)
        )
    rows.sort(key=lambda row: row[0].metadata.get("fused_rank", 0))
    table = Table(title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("passage", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column("bm25 / dense / fused / rerank", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("in the prompt?", no_wrap=True)
    for document, status, tokens in rows:
        meta = document.metadata
        key = document_key(document)
        scores = " / ".join(
            _fmt(meta.get(name), digits)
            for name, digits in (
                ("bm25_score", 2),
                ("dense_score", 2),
                ("fused_score", 3),
                ("rerank_score", 2),
            )
        )
        table.add_row(
            _fmt(meta.get("fused_rank"), 0),
            f"{key} *" if key in answer_ids else key,
            document_source(document) or "-",
            scores,
            _fmt(tokens, 0),
            status,
            style="green" if status == "kept" else "red",
        )
    return table, earlier


def chat_model(settings: LlmSettings, console: Console) -> BaseChatModel | None:
    """The configured chat model, or gpt-4o-mini when only OPENAI_API_KEY is set."""
    name = settings.model
    if name is None and os.environ.get("OPENAI_API_KEY"):
        name = "openai:gpt-4o-mini"
    if name is None:
        return None
    try:
        from langchain_classic.chat_models import init_chat_model

        model: BaseChatModel = init_chat_model(
            name,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            timeout=settings.timeout,
        )
        return model
    except ImportError as exc:
        console.print(
            f"[yellow]chat model {name!r} needs a package that is missing ({exc}); "
            "showing the prompt only[/yellow]"
        )
        return None


def run_demo(
    config_path: str | Path | None = None, console: Console | None = None
) -> None:
    """Run the sample question through the `chat` and `search` surfaces."""
    console = console or Console()
    config: RagBudgetConfig = load_config(config_path)
    corpus = load_sample_corpus()
    item = load_sample_questions()[DEMO_QUESTION]
    with console.status(f"indexing {len(corpus)} sample passages (BM25 + Chroma)"):
        retriever = build_hybrid_retriever(corpus, config)
        reranker = (
            FlashRankRerank.from_config(config.rerank, id_key=config.retrieval.id_key)
            if config.rerank.enabled
            else None
        )
    llm = chat_model(config.llm, console)
    if reranker is None:
        rerank_state = "off in config"
    else:
        rerank_state = "loaded" if reranker.available else "unavailable"
    console.print(
        f"[bold]{item['question']}[/bold]  (answer passage marked *: "
        f"{', '.join(item['answer_ids'])})\n"
        f"pipeline: BM25 + dense (k={config.retrieval.k}) -> weighted RRF -> "
        f"FlashRank {config.rerank.model} ({rerank_state}) -> budget\n"
    )
    for surface in ("chat", "search"):
        budget = ContextBudget.from_config(surface, config)
        settings = budget.settings
        state = create_budgeted_rag_chain(
            retriever, budget=budget, reranker=reranker
        ).invoke(item["question"])
        context: BudgetedContext = state["context"]
        report = context.report
        table, earlier = evidence_table(context, item["answer_ids"])
        table.title = (
            f"surface '{surface}': max_docs={settings.max_docs}, "
            f"max_tokens={settings.max_tokens} ({report.encoding}), packing="
            f"{settings.packing}; used {report.tokens_used} tokens"
        )
        console.print(table)
        if earlier:
            cut = ", ".join(f"{n} {reason}" for reason, n in earlier.items())
            console.print(f"before these: {cut} (fusion, k={config.retrieval.k})")
        messages = DEFAULT_PROMPT.format_messages(
            **prompt_inputs(item["question"], context)
        )
        prompt_text = "\n\n".join(f"[{m.type}]\n{m.text}" for m in messages)
        console.print(
            Panel(Text(prompt_text), title=f"prompt sent ({surface})", expand=False)
        )
        if llm is None:
            lines = [
                "(no chat model configured: set OPENAI_API_KEY or llm.model "
                "to see the answer)",
                *context_warnings(context),
            ]
            text = "\n".join(lines)
        else:
            text = build_answer(item["question"], context, llm.invoke(messages)).text()
        console.print(Panel(Text(text), title=f"answer ({surface})", expand=False))
        console.print()
