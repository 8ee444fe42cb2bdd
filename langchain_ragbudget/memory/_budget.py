"""Recalled memories into a surface's share of the prompt, on the record.

Memories render in their own section: no citation number (a memory is not a
source), text quoted as passages are, a header the package writes. In the chain
the section's text travels in the state before the budget, so a whole-prompt
budget counts it as sent; after the budget (`attach`) the memories and their
records join the `BudgetedContext`, so the answer's `dropped` and warning count
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda

from langchain_ragbudget.budget._prompt import MEMORY_STATE, MEMORY_TEXT
from langchain_ragbudget.budget._render import quote
from langchain_ragbudget.budget._report import BudgetedContext, MemoryContext, StaleFlag
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._html import Markup, table
from langchain_ragbudget.ledger._metadata_keys import (
    MEMORY_AGE_DAYS,
    MEMORY_ID,
    MEMORY_IMPORTANCE,
    MEMORY_RECENCY,
    MEMORY_SAID_AT,
    MEMORY_SCORE,
    MEMORY_SIMILARITY,
    MEMORY_SOURCE_ID,
    MEMORY_STALE,
    MEMORY_SUBJECT,
    MEMORY_TIMES_SAID,
)
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage

if TYPE_CHECKING:
    from langchain_core.retrievers import BaseRetriever

    from langchain_ragbudget.budget._context_budget import ContextBudget


def memories_table(entries: Sequence[dict[str, Any]]) -> Markup:

    def number(value: Any) -> str:
        return "" if value is None else f"{value:.3f}"

    return table(
        [
            "id",
            "memory",
            "subject",
            "similarity",
            "importance",
            "age (days)",
            "recency",
            "score",
            "last said",
            "stale",
        ],
        [
            [
                display_name(str(e["id"])),
                str(e["text"]),
                display_name(str(e.get(MEMORY_SUBJECT) or "")),
                number(e.get(MEMORY_SIMILARITY)),
                number(e.get(MEMORY_IMPORTANCE)),
                number(e.get(MEMORY_AGE_DAYS)),
                number(e.get(MEMORY_RECENCY)),
                number(e.get(MEMORY_SCORE)),
                str(e.get(MEMORY_SAID_AT) or "")[:16],
                str(e.get("stale") or ""),
            ]
            for e in entries
        ],
        caption="memories in the prompt (not cited)",
    )


def render_memory(document: Document) -> str:
    """The package's header line, then the text quoted.

    The subject comes last, in double quotes with JSON's escapes (its value shown
    through `display_name`), so no subject can end the quote and pose as one of
    the header's own fields ("last said", "STALE"). Like a passage block it starts
    with a non-space character and ends with a newline, so the section's tokens
    are the sum of its blocks'.
    """
    metadata = document.metadata
    parts = []
    said = str(metadata.get(MEMORY_SAID_AT) or "")[:10]
    if said:
        times = metadata.get(MEMORY_TIMES_SAID) or 1
        parts.append(
            f"last said {display_name(said)}"
            + (f", {times} times" if times > 1 else "")
        )
    if metadata.get(MEMORY_STALE):
        parts.append(f"STALE: {display_name(str(metadata[MEMORY_STALE]))}")
    if metadata.get(MEMORY_SUBJECT) is not None:
        shown = display_name(str(metadata[MEMORY_SUBJECT]))
        parts.append(f"subject {json.dumps(shown, ensure_ascii=False)}")
    header = f"Memory ({'; '.join(parts)}):" if parts else "Memory:"
    return f"{header}\n{quote(document.page_content)}\n"


def fit_memories(
    documents: Sequence[Document],
    max_memories: int,
    memory_tokens: int,
    encoding: str,
) -> MemoryContext:
    """The best memories that fit the share, in order; a record for each other.

    One that does not fit is passed over and smaller ones tried (like `packing:
    skip`). The recall's own records come first, and its count of memories
    ranked below `k` is carried over.
    """
    recalled: list[DropRecord] = list(getattr(documents, "drops", []))
    kept: list[Document] = []
    blocks: list[str] = []
    dropped: list[DropRecord] = []
    used = 0
    for rank, document in enumerate(documents, start=1):
        block = render_memory(document)
        tokens = count_tokens(block, encoding)
        if len(kept) >= max_memories:
            reason = DropReason.MAX_MEMORIES
            detail = f"max_memories={max_memories} memories were already kept"
        elif used + tokens > memory_tokens:
            reason = DropReason.MAX_TOKENS
            detail = (
                f"needs {tokens} tokens; {memory_tokens - used} left of "
                f"memory_tokens={memory_tokens}"
            )
        else:
            kept.append(document)
            blocks.append(block)
            used += tokens
            continue
        dropped.append(
            DropRecord(
                key=str(document.id or document.metadata.get(MEMORY_ID)),
                stage=Stage.MEMORY,
                reason=reason,
                rank=rank,
                document=document,
                tokens=tokens,
                detail=detail,
            )
        )
    stale = [
        StaleFlag(
            str(d.id), d.metadata.get(MEMORY_SOURCE_ID), str(d.metadata[MEMORY_STALE])
        )
        for d in kept
        if d.metadata.get(MEMORY_STALE)
    ]
    return MemoryContext(
        documents=kept,
        text="".join(blocks),
        drops=[*recalled, *dropped],
        stale=stale,
        tokens_used=used,
        max_memories=max_memories,
        memory_tokens=memory_tokens,
        below_k=getattr(documents, "below_k", 0),
    )


def memory_step(
    retriever: BaseRetriever, budget: ContextBudget
) -> Runnable[dict[str, Any], dict[str, Any]]:
    """Recall memories for the state's question and fit them to the call's surface.

    Adds the section's text (for a whole-prompt budget to count) and the
    `MemoryContext` to the state.
    """

    def recall(state: dict[str, Any], config: RunnableConfig) -> dict[str, Any]:
        taken = sorted({MEMORY_TEXT, MEMORY_STATE} & set(state))
        if taken:
            raise InvalidInputError(
                f"the chain's input may not hold the key(s) {taken}: the memory "
                "step writes them"
            )
        question = state.get("question")
        if not isinstance(question, str):
            raise InvalidInputError("the memory step needs the question as a string")
        documents = retriever.invoke(question, config)
        settings = budget.for_call(config).settings
        memories = fit_memories(
            documents,
            settings.max_memories,
            settings.memory_tokens,
            settings.encoding_name,
        )
        return {**state, MEMORY_TEXT: memories.text, MEMORY_STATE: memories}

    return RunnableLambda(recall, name=MEMORY_RUN)


MEMORY_RUN = "ragbudget_memory"  # the memory step's run name, for tracers


def with_memory(context: BudgetedContext, memory: MemoryContext) -> BudgetedContext:
    report = replace(context.report, drops=[*context.report.drops, *memory.drops])
    return replace(context, memory=memory, report=report)


def attach(state: Mapping[str, Any]) -> Any:
    if not isinstance(state, Mapping) or MEMORY_STATE not in state:
        return state
    memory = state[MEMORY_STATE]
    rest = {k: v for k, v in state.items() if k not in (MEMORY_TEXT, MEMORY_STATE)}
    if isinstance(rest.get("context"), BudgetedContext):
        rest["context"] = with_memory(rest["context"], memory)
    return rest


ATTACH = RunnableLambda(attach, name="ragbudget_memory_attach")
