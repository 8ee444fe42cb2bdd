"""The demo: the whole pipeline over the bundled sample corpus, shown as tables.

One question through a tight `chat` budget and a wider `search` one: every
candidate kept or dropped (which stage, why), the prompt, and the answer with its
warnings when a chat model is configured.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.language_models import BaseChatModel
from rich.console import Console

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.chain._pipeline import build_chat_model, explain
from langchain_ragbudget.cli._views import pipeline_line, show_explained
from langchain_ragbudget.config._settings import RagBudgetConfig, load_config
from langchain_ragbudget.errors import MissingExtraError
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._rerank import FlashRankRerank
from langchain_ragbudget.sample import (
    demo_config_path,
    load_sample_corpus,
    load_sample_questions,
)

DEMO_QUESTION = 0  # index into sample_data/questions.json


def run_demo(
    config_path: str | Path | None = None, console: Console | None = None
) -> None:
    """Run the sample question through the `chat` and `search` surfaces."""
    console = console or Console()
    config = load_config(config_path or demo_config_path())
    corpus = load_sample_corpus()
    item = load_sample_questions()[DEMO_QUESTION]
    with console.status(f"indexing {len(corpus)} sample passages (BM25 + Chroma)"):
        retriever = HybridRetriever.from_config(config, documents=corpus)
        reranker = FlashRankRerank.from_config(config)
    llm = chat_model(config, console)
    console.print(
        f"[bold]{item['question']}[/bold]  (answer passage marked *: "
        f"{', '.join(item['answer_ids'])})\n{pipeline_line(config, reranker)}\n"
    )
    for surface in ("chat", "search"):
        explained = explain(
            item["question"],
            retriever,
            ContextBudget.from_config(config, surface=surface),
            reranker=reranker,
            llm=llm,
            tracing=config.tracing,
        )
        show_explained(
            console,
            explained,
            surface,
            fusion_k=config.retrieval.k,
            answer_ids=item["answer_ids"],
        )
        console.print()


def chat_model(config: RagBudgetConfig, console: Console) -> BaseChatModel | None:
    """The configured chat model; a missing provider package is said, not fatal."""
    try:
        return build_chat_model(config)
    except MissingExtraError as error:
        console.print(f"{error}; showing the prompt only", style="yellow", markup=False)
        return None
