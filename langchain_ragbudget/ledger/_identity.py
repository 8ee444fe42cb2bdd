"""Document identity: the one key every stage uses to dedupe and to name a drop.

Never page_content alone: two chunks of different documents may share text. Keys
are strings (`Document(id=1)` and `Document(id="1")` are one key, as LangChain
stores ids as text). A key never swallows a document: one key with two different
texts or sources becomes `key#2`, `key#3`...

Every stage that can be a chain's first names its candidates this way at entry
(`unique_documents`) and writes the key into the copy's `Document.id`, so every
later stage, record and citation uses the same name.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from langchain_core.documents import Document

COLLISION_MARK = "#"


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def document_key(document: Document, id_key: str | None = "chunk_id") -> str:
    """`Document.id`, else `metadata[id_key]`, else a hash of source and content.

    The source is hashed too, so equal text from two sources stays two candidates
    (the budget keeps one and records the other as a duplicate).
    """
    if document.id:
        return str(document.id)
    if id_key is not None and document.metadata.get(id_key) is not None:
        return str(document.metadata[id_key])
    source = document_source(document)
    text = document.page_content
    hashed = text if source is None else source + "\x00" + text
    return f"sha256:{content_hash(hashed)}"


_Hit = tuple[str, Document]  # a candidate's key, and the document it names


def identity_of(document: Document) -> tuple[str, str | None]:
    """Text and source: two passages under one key are one candidate if both agree."""
    return document.page_content, document_source(document)


def distinct_keys(lists: Sequence[Sequence[_Hit]]) -> list[list[str]]:
    """Keys, per retriever's `(key, document)` hits, that never name two candidates.

    A key seen again with another `identity_of` becomes `key#2` (then `#3`...),
    skipping any name already in use.
    """
    if _no_collision(lists):
        return [[key for key, _ in pairs] for pairs in lists]
    taken = {key for pairs in lists for key, _ in pairs}
    variants_of: dict[str, dict[Hashable, str]] = {}
    out: list[list[str]] = []
    for pairs in lists:
        keys = []
        for key, document in pairs:
            variants = variants_of.setdefault(key, {})
            identity = identity_of(document)
            assigned = variants.get(identity)
            if assigned is None:
                assigned = key if not variants else _fresh(key, taken)
                variants[identity] = assigned
            keys.append(assigned)
        out.append(keys)
    return out


def _no_collision(lists: Sequence[Sequence[_Hit]]) -> bool:
    """Whether no key carries two identities: the common case, checked cheaply."""
    first: dict[str, Document] = {}
    for pairs in lists:
        for key, document in pairs:
            seen = first.setdefault(key, document)
            if seen is not document and (
                seen.page_content != document.page_content
                or document_source(seen) != document_source(document)
            ):
                return False
    return True


def _fresh(key: str, taken: set[str]) -> str:
    n = 2
    while f"{key}{COLLISION_MARK}{n}" in taken:
        n += 1
    name = f"{key}{COLLISION_MARK}{n}"
    taken.add(name)
    return name


def entry_keys(
    documents: Sequence[Document],
    id_key: str | None,
    reserved: Iterable[str] = (),
) -> list[str]:
    """One distinct key per position of one list: a repeated key becomes `key#2`...

    Within one list every position is its own candidate, even the same passage
    repeated. A `reserved` key (one an earlier stage recorded dropping) is renamed
    too, so no key is both kept and dropped.
    """
    keys = [document_key(document, id_key) for document in documents]
    seen = set(reserved)
    if len(set(keys)) == len(keys) and seen.isdisjoint(keys):
        return keys
    taken = seen | set(keys)
    out = []
    for key in keys:
        if key in seen:
            key = _fresh(key, taken)
        seen.add(key)
        out.append(key)
    return out


def unique_documents(
    documents: Sequence[Document],
    id_key: str | None,
    reserved: Iterable[str] = (),
) -> Sequence[Document]:
    """`documents` with each one's `entry_keys` key as its `Document.id`.

    Returns `documents` itself when every id already is its key; otherwise a
    plain list with copies where needed, so the caller reads earlier records
    from its input.
    """
    keys = entry_keys(documents, id_key, reserved)
    if all(doc.id == key for doc, key in zip(documents, keys, strict=True)):
        return documents
    return [
        doc if doc.id == key else doc.model_copy(update={"id": key})
        for doc, key in zip(documents, keys, strict=True)
    ]


def with_metadata(document: Document, metadata: dict[str, Any]) -> Document:
    """A copy with new metadata: stages never mutate their input.

    `model_copy` keeps the document's class and skips re-validating its fields.
    """
    return document.model_copy(update={"metadata": metadata})


def with_scores(
    hits: Iterable[tuple[Document, float]], score_key: str
) -> list[Document]:
    return [
        with_metadata(document, {**document.metadata, score_key: float(score)})
        for document, score in hits
    ]


def document_source(document: Document) -> str | None:
    for key in ("source", "doc_id", "title"):
        value = document.metadata.get(key)
        if value is not None:
            return str(value)
    return None
