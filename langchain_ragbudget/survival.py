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
    max_tokens: int,
    encoding: str,
    fmt: ContextFormat | None = None,
) -> list[int]:
    """Indices whose text survives slicing the joined context at `max_tokens`.

    The slice is taken in tokens of the rendered context (the token equivalent of
    seed 000's `context[:MAX_CONTEXT_CHARS]`); a passage cut mid-text is lost.
    """
    fmt = fmt or ContextFormat()
    text = fmt.render(group_citations(documents, fmt))
    tokens = get_encoding(encoding).encode(text, disallowed_special=())
    sliced = get_encoding(encoding).decode(tokens[:max_tokens])
    return [
        index
        for index, document in enumerate(documents)
        if fmt.render_passage(document) in sliced
    ]


def policy_survivors(
    documents: Sequence[Document],
    policy: str,
    max_tokens: int,
    encoding: str,
    id_key: str | None = "chunk_id",
) -> list[int]:
    """Indices of `documents` that reach the context under `policy` at `max_tokens`.

    No `max_docs` limit and `min_docs=0`, so only the token budget decides.
    """
    if policy == "naive slice":
        return naive_slice_survivors(documents, max_tokens, encoding)
    if policy not in ("skip", "stop"):
        raise ValueError(f"unknown policy {policy!r}; use one of {POLICIES}")
    settings = SurfaceSettings(
        max_docs=max(len(documents), 1),
        max_tokens=max_tokens,
        encoding=encoding,
        min_docs=0,
        packing=policy,
    )
    context = ContextBudget(settings=settings, id_key=id_key).fit(documents)
    kept = set(context.report.kept_ids)
    return [i for i, doc in enumerate(documents) if document_key(doc, id_key) in kept]
