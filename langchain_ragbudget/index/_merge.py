"""Merging the two sides of a damaged index: the rules of repair, deciding only.

Repair never loses data:

- a chunk in a document's committed record comes from BM25, else from the vector
  store if it is of the same document version (`doc_hash`); a record missing
  chunks keeps what was found and is marked for re-ingest (hash unknown);
- a chunk no record claims (e.g. written by an ingest that died before its
  commit) goes back to BM25 under a record rebuilt from its metadata;
- a vector is deleted only when the committed record of its own document
  supersedes it (chunk id not in the record, or other text under the same id,
  then re-embedded from the committed text).

`merge_sides` writes nothing; `HybridIndex` writes its result to both sides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.ledger._identity import content_hash


@dataclass
class Merged:
    """Records and chunks both sides will hold, and what was restored or lost."""

    records: dict[str, dict[str, Any]] = field(default_factory=dict)
    chunks: dict[str, Document] = field(default_factory=dict)
    restored_to_bm25: list[str] = field(default_factory=list)
    needs_reingest: list[str] = field(default_factory=list)


# Unclaimed chunks: document id -> chunk id -> (chunk, whether BM25 held it).
_Orphans = dict[str, dict[str, tuple[Document, bool]]]


def merge_sides(
    records: dict[str, dict[str, Any]] | None,
    sparse: dict[str, Document],
    dense: dict[str, Document],
) -> Merged:
    """Both sides' chunks and the committed records into one consistent index."""
    merged = Merged()
    for doc_id, record in (records or {}).items():
        _keep_committed(merged, doc_id, record, sparse, dense)
    for doc_id, found in sorted(_orphans(merged, sparse, dense).items()):
        _adopt_orphans(merged, doc_id, found, sparse)
    _stamp_identity(merged.chunks)
    merged.restored_to_bm25.sort()
    merged.needs_reingest.sort()
    return merged


def _keep_committed(
    merged: Merged,
    doc_id: str,
    record: dict[str, Any],
    sparse: dict[str, Document],
    dense: dict[str, Document],
) -> None:
    """A committed record with the chunks of it that can be found."""
    kept = []
    for chunk_id in record.get("chunks", []):
        chunk = sparse.get(chunk_id)
        if chunk is None:
            candidate = dense.get(chunk_id)
            if candidate is not None and candidate.metadata.get(
                "doc_hash", record.get("hash")
            ) == record.get("hash"):
                chunk = candidate
                merged.restored_to_bm25.append(chunk_id)
        if chunk is not None:
            merged.chunks[chunk_id] = chunk
            kept.append(chunk_id)
    entry = {**record, "chunks": kept}
    if len(kept) < len(record.get("chunks", [])) or not kept:
        entry["hash"] = None  # the next ingest re-adds it
        merged.needs_reingest.append(doc_id)
    merged.records[doc_id] = entry


def _orphans(
    merged: Merged, sparse: dict[str, Document], dense: dict[str, Document]
) -> _Orphans:
    """Chunks no committed record claims, by the document their metadata names."""
    orphans: _Orphans = {}
    for from_sparse, side in ((False, dense), (True, sparse)):  # BM25 wins on an id
        for chunk_id, chunk in side.items():
            if chunk_id in merged.chunks:
                continue
            doc_id = str(chunk.metadata.get("doc_id") or _document_of(chunk_id))
            if doc_id in merged.records:
                continue  # superseded by the committed record of its document
            orphans.setdefault(doc_id, {})[chunk_id] = (chunk, from_sparse)
    return orphans


def _adopt_orphans(
    merged: Merged,
    doc_id: str,
    found: dict[str, tuple[Document, bool]],
    sparse: dict[str, Document],
) -> None:
    """A record rebuilt from one document's unclaimed chunks, in chunk order.

    Its hash is kept only when the chunks are one complete document version;
    else it is marked for re-ingest.
    """
    picked = _orphans_kept(found)
    ordered = sorted(picked, key=lambda key: (_position(picked[key]), key))
    hashes = {picked[key].metadata.get("doc_hash") for key in ordered}
    totals = {picked[key].metadata.get("doc_chunks") for key in ordered}
    complete = (
        len(hashes) == 1
        and None not in hashes
        and totals == {len(ordered)}
        and [_position(picked[key]) for key in ordered] == list(range(len(ordered)))
    )
    first = picked[ordered[0]]
    merged.records[doc_id] = {
        "hash": next(iter(hashes)) if complete else None,
        "chunks": ordered,
        "source": first.metadata.get("source", doc_id),
    }
    if not complete:
        merged.needs_reingest.append(doc_id)
    merged.restored_to_bm25 += [key for key in ordered if key not in sparse]
    merged.chunks.update(picked)


def _orphans_kept(found: dict[str, tuple[Document, bool]]) -> dict[str, Document]:
    """Which of one document's unclaimed chunks to keep.

    All when only the vector store holds them; else BM25's, plus the vectors of
    the one document version BM25's chunks agree on.
    """
    committed = {key: chunk for key, (chunk, sp) in found.items() if sp}
    if not committed:
        return {key: chunk for key, (chunk, _) in found.items()}
    hashes = {chunk.metadata.get("doc_hash") for chunk in committed.values()}
    version = hashes.pop() if len(hashes) == 1 else None
    picked = dict(committed)
    for key, (chunk, _) in found.items():
        if version is not None and chunk.metadata.get("doc_hash") == version:
            picked.setdefault(key, chunk)
    return picked


def _stamp_identity(chunks: dict[str, Document]) -> None:
    """Give each chunk its `doc_id`, `chunk_id` and current `content_hash`, in place."""
    for chunk_id, chunk in list(chunks.items()):
        digest = content_hash(chunk.page_content)
        metadata = {**chunk.metadata, "doc_id": chunk.metadata.get("doc_id")}
        if metadata["doc_id"] is None:
            metadata["doc_id"] = _document_of(chunk_id)
        metadata.setdefault("chunk_id", chunk_id)
        metadata["content_hash"] = digest
        chunks[chunk_id] = Document(
            id=chunk_id, page_content=chunk.page_content, metadata=metadata
        )


def _document_of(chunk_id: str) -> str:
    """The document id of a chunk id `<doc_id>::<n>`."""
    return chunk_id.rsplit("::", 1)[0]


def _position(chunk: Document) -> int:
    position = chunk.metadata.get("position")
    return position if isinstance(position, int) else 1 << 30
