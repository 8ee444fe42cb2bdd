"""Repair of a damaged index: both sides read as far as they can be, merged, rewritten.

Repair never loses data. It reads what it can of both sides, then:

- a chunk listed in a document's committed record is taken from BM25, else from the
  vector store (if that copy belongs to the same document version, `doc_hash`);
  a record whose chunks cannot all be found is kept with what was found and marked
  for re-ingest (hash unknown), so the next `ragbudget index` re-adds the document;
- a chunk that no record claims (only in the vector store, e.g. written by an ingest
  that died before its commit) is added back to BM25 under a record rebuilt from
  chunk metadata (`doc_id`, `doc_hash`, `doc_chunks`; hash unknown if incomplete);
- a vector is deleted only when the committed record of its own document supersedes
  it (same `doc_id`, chunk id not in the record, or different text under the same id,
  which is then re-embedded from the committed text);
- a side that cannot be read is rebuilt from the other (BM25 from the vector store's
  texts and metadata, vectors by re-embedding BM25's chunks); the damaged files are
  moved aside (`damaged-*`), not deleted. If neither side can be read, repair raises
  `IndexRepairError` and changes nothing.

`merge_sides` decides (and writes nothing); `HybridIndex._apply` writes its result to
both sides. `repair_directory` is `HybridIndex.repair_directory`, for an index whose
files no longer open.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget.config._settings import ConfigLike, RagBudgetConfig, as_config
from langchain_ragbudget.errors import IndexLoadError, IndexRepairError
from langchain_ragbudget.index._chroma import (
    CHROMA_DIR,
    close_store,
    dense_documents,
    open_dense,
    release_chroma,
)
from langchain_ragbudget.index._lock import WriterLock
from langchain_ragbudget.index._reports import RepairReport
from langchain_ragbudget.index._versions import (
    MANIFEST,
    SparseRead,
    holds_index,
    manifest_of,
    manifest_tolerant,
    read_sparse_tolerant,
    write_manifest,
)
from langchain_ragbudget.index._write_errors import disk_errors_named
from langchain_ragbudget.ledger._identity import content_hash
from langchain_ragbudget.retrieval._embeddings import build_embeddings

if TYPE_CHECKING:  # chromadb takes most of a second to import: only when used
    from langchain_chroma import Chroma

    from langchain_ragbudget.index._hybrid_index import HybridIndex  # types only


def repair_directory(
    cls: type[HybridIndex],
    directory: str | Path,
    config: ConfigLike = None,
    embeddings: Embeddings | None = None,
) -> tuple[HybridIndex, RepairReport]:
    """Repair the index in `directory`, however damaged; see the module docstring.

    A side that cannot be read is rebuilt from the other; damaged files are
    moved aside (`damaged-*`), never deleted.

    Args:
        cls: The index class (this is `HybridIndex.repair_directory`).
        directory: The index folder.
        config: A loaded configuration, a YAML file, or the shipped defaults if
            None.
        embeddings: The embedding model; built from `config` if None.

    Returns:
        The repaired, open index and a report of what was found and done.

    Raises:
        IndexLoadError: `directory` holds no index (nothing is created), or
            it was built with another embedding model or chunking.
        IndexRepairError: Neither side can be read, or a Chroma server's side
            cannot (nothing is changed).
        IndexLockedError: Another writer held the write lock throughout.
        IndexWriteError: The disk is full, read-only or over quota; the last
            committed version is unchanged.
    """
    config = as_config(config)
    path = Path(directory)
    if not holds_index(path):
        raise IndexLoadError(
            f"{path}: no index here ({MANIFEST} not found); nothing to repair"
        )
    lock = WriterLock(path).acquire(config.index.lock_timeout)
    try:
        with disk_errors_named(path, None):
            index, report = _repair_locked(cls, path, config, embeddings)
    except BaseException:
        lock.release()
        raise
    index._lock = lock  # held until the repaired index is closed
    return index, report


def _repair_locked(
    cls: type[HybridIndex],
    path: Path,
    config: RagBudgetConfig,
    embeddings: Embeddings | None,
) -> tuple[HybridIndex, RepairReport]:
    """`repair_directory` under the write lock."""
    report = RepairReport()
    sparse = read_sparse_tolerant(path, config)
    report.problems += sparse.notes + sparse.problems
    manifest, rewrite = manifest_tolerant(
        path, manifest_of(config), sparse.manifest_copy
    )
    if rewrite:
        report.problems.append(f"{path / MANIFEST} is missing or unreadable")
    embeddings = embeddings or build_embeddings(config)
    store, dense = _read_dense(path, config, embeddings, report)
    if dense is None and not sparse.chunks_complete:
        raise IndexRepairError(
            f"{path}: neither side of the index can be read ("
            + "; ".join(report.problems)
            + "). Nothing was changed. Restore the folder from a backup, or "
            "index the files again into a new directory."
        )
    merged = merge_sides(sparse.records, sparse.chunks, dense or {})
    report.restored_to_bm25 = merged.restored_to_bm25
    report.needs_reingest = merged.needs_reingest
    if store is None:  # the vector side is unreadable: rebuild it aside
        store = _new_dense_side(path, config, embeddings, report)
    _move_damaged_version_aside(path, sparse, report)
    if rewrite:
        write_manifest(path, manifest)
        report.manifest_rewritten = True
    index = cls(path, config, store, {}, {}, manifest)
    index.sync_check()
    written, removed = index._apply(merged, dense or {})
    report.re_embedded, report.removed_superseded = written, removed
    return index, report


def _read_dense(
    path: Path, config: RagBudgetConfig, embeddings: Embeddings, report: RepairReport
) -> tuple[Chroma | None, dict[str, Document] | None]:
    """The open vector store and every chunk it holds; (None, None) if unreadable."""
    store: Chroma | None = None
    try:
        store = open_dense(path, config, embeddings, may_create=False)
        return store, dense_documents(store)
    except IndexLoadError as exc:
        report.problems.append(str(exc))
        if store is not None:
            close_store(store)
        return None, None


def _new_dense_side(
    path: Path, config: RagBudgetConfig, embeddings: Embeddings, report: RepairReport
) -> Chroma:
    """An empty vector store, the unreadable one moved aside; a server's is refused."""
    if config.vector_store.host is not None:
        raise IndexRepairError(
            f"the vector store server cannot be read ({report.problems[-1]}); "
            "nothing was changed"
        )
    damaged = path / CHROMA_DIR
    if damaged.exists():
        release_chroma(damaged)
        aside = path / f"damaged-{CHROMA_DIR}-{time.time_ns()}"
        os.rename(damaged, aside)
        report.moved_aside.append(str(aside))
    return open_dense(path, config, embeddings, may_create=True)


def _move_damaged_version_aside(
    path: Path, sparse: SparseRead, report: RepairReport
) -> None:
    """Move a BM25 version folder with damaged files to `damaged-<name>`."""
    if sparse.problems and sparse.version is not None and sparse.version.is_dir():
        aside = path / f"damaged-{sparse.version.name}"
        os.rename(sparse.version, aside)
        report.moved_aside.append(str(aside))


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
    """Both sides' chunks and the committed records into one consistent index.

    See the module docstring for the rules; nothing here writes.
    """
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
    """A committed record with the chunks of it that can be found.

    BM25's copy first, else the vector store's if it belongs to the same document
    version; a record missing any chunk is marked for re-ingest.
    """
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

    Its hash is kept only when the chunks are one complete document version
    (one `doc_hash`, `doc_chunks` of them at positions 0..n-1); else it is
    marked for re-ingest.
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

    Every one when only the vector store holds them; else BM25's, plus the vectors
    of the one document version (`doc_hash`) that BM25's chunks agree on.
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
    """The document id a chunk id starts with (`<doc_id>::<n>`)."""
    return chunk_id.rsplit("::", 1)[0]


def _position(chunk: Document) -> int:
    position = chunk.metadata.get("position")
    return position if isinstance(position, int) else 1 << 30
