"""The demo: the whole pipeline over the bundled sample corpus, shown as tables.

One question through two surfaces (a tight `chat` budget, a wider `search` one):
the evidence table says, for every candidate, whether it reached the prompt and, if
not, which stage dropped it and why; then the prompt that is sent, and the answer
with its warnings when a chat model is configured.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from langchain_ragbudget.config import load_config
from langchain_ragbudget.embedded import build_hybrid_retriever
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions
from langchain_ragbudget.views import chat_model, explain, pipeline_line, reranker_from

DEMO_QUESTION = 0  # index into sample_data/questions.json


def run_demo(
    config_path: str | Path | None = None, console: Console | None = None
) -> None:
    """Run the sample question through the `chat` and `search` surfaces."""
    console = console or Console()
    config = load_config(config_path)
    corpus = load_sample_corpus()
    item = load_sample_questions()[DEMO_QUESTION]
    with console.status(f"indexing {len(corpus)} sample passages (BM25 + Chroma)"):
        retriever = build_hybrid_retriever(corpus, config)
        reranker = reranker_from(config)
    llm = chat_model(config.llm, console)
    console.print(
        f"[bold]{item['question']}[/bold]  (answer passage marked *: "
        f"{', '.join(item['answer_ids'])})\n{pipeline_line(config, reranker)}\n"
    )
    for surface in ("chat", "search"):
        explain(
            console,
            item["question"],
            retriever,
            reranker,
            config,
            surface,
            llm,
            item["answer_ids"],
        )
        console.print()
