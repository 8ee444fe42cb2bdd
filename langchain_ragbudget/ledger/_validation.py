"""Checks where a query, documents or scores enter a stage.

A bad value gets an `InvalidInputError` naming the argument, not an
`AttributeError` from deep inside a library. `finite_score` keeps NaN, infinity,
booleans and non-numbers from being used as a score (a NaN top score would read
as strong evidence).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.errors import InvalidInputError


def check_query(query: Any, name: str = "query") -> str:
    """The query, if it is text a retriever can search with."""
    if not isinstance(query, str):
        raise InvalidInputError(
            f"{name} must be a string, got {type(query).__name__}: {_preview(query)}"
        )
    if not query.strip():
        raise InvalidInputError(f"{name} is empty: ask a question with some words")
    check_text(query, name)
    return query


def check_text(text: str, name: str) -> None:
    """Refuse text with a lone surrogate, which no model or file can take."""
    position = _surrogate_at(text)
    if position is not None:
        raise InvalidInputError(
            f"{name} holds a lone surrogate {text[position]!r} at position "
            f"{position}, which no model or file can take; decode the source text "
            "with errors='replace'"
        )


@lru_cache(maxsize=100_000)
def _surrogate_at(text: str) -> int | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None


def check_documents(documents: Any, name: str = "documents") -> Sequence[Document]:
    """The documents, if they are a list of LangChain Documents with valid text."""
    if isinstance(documents, str | bytes) or not isinstance(documents, Sequence):
        raise InvalidInputError(
            f"{name} must be a list of Documents, got {type(documents).__name__}"
        )
    for position, document in enumerate(documents):
        if not isinstance(document, Document):
            hint = (
                "; wrap texts as Document(page_content=...)"
                if isinstance(document, str)
                else ""
            )
            raise InvalidInputError(
                f"{name}[{position}] is a {type(document).__name__}, not a "
                f"Document{hint}"
            )
        check_text(document.page_content, f"{name}[{position}].page_content")
    return documents


def check_passages(documents: Any, name: str = "documents") -> Sequence[Document]:
    """`check_documents`, refusing empty passages too (for ingest).

    A blank passage would rank on metadata alone and could become citation [1]
    with nothing to say.
    """
    checked = check_documents(documents, name)
    for position, document in enumerate(checked):
        if not document.page_content.strip():
            raise InvalidInputError(
                f"{name}[{position}] (id {document.id!r}) has no text: empty or "
                "whitespace-only passages cannot be indexed"
            )
    return checked


def finite_score(value: Any) -> float | None:
    """`value` as a float if a finite real number (numpy too, not bool), else None."""
    if type(value) is float:  # the hot, common case first
        return value if math.isfinite(value) else None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    score = float(value)
    return score if math.isfinite(score) else None


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
