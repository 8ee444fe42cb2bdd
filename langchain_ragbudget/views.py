"""Terminal views of one question through the pipeline.

The evidence table (every candidate, kept or dropped with its stage and reason), the
prompt that is sent, and the answer with its warnings.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
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
from langchain_ragbudget.config import LlmSettings, RagBudgetConfig
from langchain_ragbudget.drops import Stage
from langchain_ragbudget.identity import document_key, document_source
from langchain_ragbudget.pipeline import create_budgeted_rag_chain
from langchain_ragbudget.render import one_line
from langchain_ragbudget.rerank import FlashRankRerank


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
        # Text, not str: rich would read markup ("[red]") in an id or a source.
        table.add_row(
            _fmt(meta.get("fused_rank"), 0),
            Text(one_line(f"{key} *" if key in answer_ids else key)),
            Text(one_line(document_source(document) or "-")),
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


def explain(
    console: Console,
    question: str,
    retriever: BaseRetriever,
    reranker: FlashRankRerank | None,
    config: RagBudgetConfig,
    surface: str,
    llm: BaseChatModel | None,
    answer_ids: Sequence[str] = (),
) -> BudgetedContext:
    """Print the evidence table, the prompt and the answer (or why there is none)."""
    budget = ContextBudget.from_config(surface, config)
    settings = budget.settings
    state = create_budgeted_rag_chain(
        retriever, budget=budget, reranker=reranker
    ).invoke(question)
    context: BudgetedContext = state["context"]
    report = context.report
    table, earlier = evidence_table(context, answer_ids)
    table.title = (
        f"surface '{surface}': max_docs={settings.max_docs}, "
        f"max_tokens={settings.max_tokens} ({report.encoding}), packing="
        f"{settings.packing}; used {report.tokens_used} tokens"
    )
    console.print(table)
    if earlier:
        cut = ", ".join(f"{n} {reason}" for reason, n in earlier.items())
        console.print(f"before these: {cut} (fusion, k={config.retrieval.k})")
    messages = DEFAULT_PROMPT.format_messages(**prompt_inputs(question, context))
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
        text = build_answer(question, context, llm.invoke(messages)).text()
    console.print(Panel(Text(text), title=f"answer ({surface})", expand=False))
    return context


def reranker_from(config: RagBudgetConfig) -> FlashRankRerank | None:
    """The configured rerank stage, or None when `rerank.enabled` is false."""
    if not config.rerank.enabled:
        return None
    return FlashRankRerank.from_config(config.rerank, id_key=config.retrieval.id_key)


def pipeline_line(config: RagBudgetConfig, reranker: FlashRankRerank | None) -> str:
    """One line naming the stages and whether the reranker loaded."""
    if reranker is None:
        state = "off in config"
    else:
        state = "loaded" if reranker.available else "unavailable"
    return (
        f"pipeline: BM25 + dense (k={config.retrieval.k}) -> weighted RRF -> "
        f"FlashRank {config.rerank.model} ({state}) -> budget"
    )
