"""`ragbudget ask`: one question through an index, a surface and the chat model."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from langchain_ragbudget.cli._index_commands import command_config, open_index
from langchain_ragbudget.cli._output import print_json
from langchain_ragbudget.errors import InvalidInputError

if TYPE_CHECKING:
    from rich.console import Console


def run_ask(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget ask QUESTION`: evidence, prompt and answer (or one JSON object).

    What can be refused without the index is checked before it is opened and
    the pipeline imported (seconds each).
    """
    config = command_config(args)
    config.surface(args.surface)
    check_question(args.question)

    from langchain_ragbudget.budget._context_budget import ContextBudget
    from langchain_ragbudget.chain._pipeline import explain
    from langchain_ragbudget.cli._demo import chat_model
    from langchain_ragbudget.cli._views import (
        explained_to_dict,
        pipeline_line,
        show_explained,
    )
    from langchain_ragbudget.retrieval._rerank import FlashRankRerank

    budget = ContextBudget.from_config(config, surface=args.surface)
    index = open_index(args, console, create=False, config=config)
    config = index.config
    reranker = FlashRankRerank.from_config(config)
    console.print(pipeline_line(config, reranker))
    llm = chat_model(config, console)
    memory = None
    if args.memory is not None:
        from langchain_ragbudget.cli._memory_commands import memory_for_ask

        memory = memory_for_ask(args.memory, config, index)
    explained = explain(
        args.question,
        index.as_retriever(),
        budget,
        reranker=reranker,
        llm=llm,
        tracing=config.tracing,
        memory=memory,
    )
    if args.json:
        print_json(
            explained_to_dict(
                explained, args.surface, config, prompt=not args.no_prompt
            )
        )
        return
    show_explained(
        console,
        explained,
        args.surface,
        fusion_k=config.retrieval.k,
        show_prompt=not args.no_prompt,
    )


def check_question(question: str) -> None:
    """Refuse a question that asks nothing: empty, blanks or invisible characters."""
    if not any(char.isprintable() and not char.isspace() for char in question):
        raise InvalidInputError(
            f"the question is empty ({question!r}); ask it in words, e.g. "
            'ragbudget ask "How do I rotate the logs?"'
        )
