"""Document identity: the one key every stage uses to dedupe and to name a drop.

Never page_content alone: two chunks of different documents may share text, and one
chunk may come back from two retrievers with different metadata.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document


def content_hash(text: str) -> str:
    """Short, stable hash of a text (sha256, 16 hex digits)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def document_key(document: Document, id_key: str | None = "chunk_id") -> str:
    """`Document.id`, else `metadata[id_key]`, else a hash of the content."""
    if document.id:
        return str(document.id)
    if id_key is not None and document.metadata.get(id_key) is not None:
        return str(document.metadata[id_key])
    return f"sha256:{content_hash(document.page_content)}"


def with_metadata(document: Document, metadata: dict[str, Any]) -> Document:
    """A copy of `document` with new metadata: stages never mutate their input.

    A shallow `model_copy`: it keeps the document's class (a subclass stays one) and
    skips validating fields that are already valid.
    """
    return document.model_copy(update={"metadata": metadata})


def with_scores(
    hits: Iterable[tuple[Document, float]], score_key: str
) -> list[Document]:
    """Copies of the hit documents, each with its score in `metadata[score_key]`."""
    return [
        with_metadata(document, {**document.metadata, score_key: float(score)})
        for document, score in hits
    ]


def document_source(document: Document) -> str | None:
    """The human-readable origin of a document, for tables and warnings."""
    for key in ("source", "doc_id", "title"):
        value = document.metadata.get(key)
        if value is not None:
            return str(value)
    return None
