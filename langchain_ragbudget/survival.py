"""Did the gold passage survive assembly into the prompt? Packing policies compared.

Pure functions over one ranked candidate list: naive slicing of the joined context
(seed 000's "before"), stop at the first overflow (seed 002), and skip (ours), each
at a token budget. A passage survives only if its whole text is in the context.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document

from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.config import SurfaceSettings
from langchain_ragbudget.identity import document_key
from langchain_ragbudget.render import ContextFormat, group_citations
from langchain_ragbudget.tokens import get_encoding

POLICIES = ("naive slice", "stop", "skip")


def naive_slice_survivors(
    documents: Sequence[Document],
    budgets: Sequence[int],
    encoding: str,
    fmt: ContextFormat | None = None,
) -> list[list[int]]:
    """Per budget, the indices whose text survives slicing the joined context there.

    The slice is taken in tokens of the rendered context (the token equivalent of
    seed 000's `context[:MAX_CONTEXT_CHARS]`); a passage cut mid-text is lost. The
    context is rendered and encoded once for all budgets.
    """
    fmt = fmt or ContextFormat()
    text = fmt.render(group_citations(documents, fmt))
    tokenizer = get_encoding(encoding)
    tokens = tokenizer.encode(text, disallowed_special=())
    passages = [fmt.render_passage(document) for document in documents]
    survivors = []
    for budget in budgets:
        sliced = tokenizer.decode(tokens[:budget])
        survivors.append([i for i, block in enumerate(passages) if block in sliced])
    return survivors


def policy_survivors(
    documents: Sequence[Document],
    policy: str,
    budgets: Sequence[int],
    encoding: str,
    id_key: str | None = "chunk_id",
) -> list[list[int]]:
    """Per token budget, the indices of `documents` that reach the context.

    No `max_docs` limit and `min_docs=0`, so only the token budget decides.
    """
    if policy == "naive slice":
        return naive_slice_survivors(documents, budgets, encoding)
    if policy not in ("skip", "stop"):
        raise ValueError(f"unknown policy {policy!r}; use one of {POLICIES}")
    survivors = []
    for budget in budgets:
        settings = SurfaceSettings(
            max_docs=max(len(documents), 1),
            max_tokens=budget,
            encoding=encoding,
            min_docs=0,
            packing=policy,
        )
        kept = set(
            ContextBudget(settings=settings, id_key=id_key)
            .fit(documents)
            .report.kept_ids
        )
        survivors.append(
            [i for i, doc in enumerate(documents) if document_key(doc, id_key) in kept]
        )
    return survivors
