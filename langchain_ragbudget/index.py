"""One index, two sides: BM25 and the vector store, kept in sync by source document.

`HybridIndex` owns both. Add, upsert and delete work by source document id: a changed
document replaces all of its chunks on both sides, a deleted one leaves both, and
unchanged content (same hash) is skipped. It is an equivalent of LangChain's indexing
API (`index()` with a record manager), extended to the BM25 side, which that API
cannot reach.

On disk (`directory/`): `manifest.json` (embedding model, chunking settings),
`chroma/`, and the sparse side in a version folder `sparse-*` named by `CURRENT`.
A save writes a new version folder, then switches `CURRENT` with an atomic rename,
so a process killed mid-save leaves the previous version loadable; every file and
folder is flushed to disk (fsync) before the rename that publishes it, so a power cut
cannot publish a version whose files are still in the page cache. The vector side is
written first; after a crash between the two, `sync_check` finds the chunks that
differ and `repair` brings the vector side back to the committed sparse side.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_chroma import Chroma
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget.chunking import Chunker
from langchain_ragbudget.config import RagBudgetConfig, VectorStoreSettings, load_config
from langchain_ragbudget.dense import (
    DenseRetriever,
    add_documents,
    build_embeddings,
    build_vector_store,
)
from langchain_ragbudget.embedded import build_sparse_retriever
from langchain_ragbudget.errors import IndexLoadError
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.identity import content_hash
from langchain_ragbudget.loaders import FileError, check_content
from langchain_ragbudget.sparse import BM25Retriever

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
RECORDS = "records.json"
COLLECTION = "ragbudget-index"
FLUSH_CHUNKS = 1024  # pending chunks written (length-sorted) to the vector side at once


@dataclass(frozen=True)
class SyncReport:
    """Chunks present on one side only, or with different text on the two sides."""

    only_dense: list[str] = field(default_factory=list)
    only_sparse: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)

    @property
    def in_sync(self) -> bool:
        """True when both sides hold the same chunks with the same text."""
        return not (self.only_dense or self.only_sparse or self.differing)

    def summary(self) -> str:
        """One line for logs and the CLI."""
        if self.in_sync:
            return "sparse and dense sides are in sync"
        return (
            f"out of sync: {len(self.only_dense)} chunk(s) only in the vector store, "
            f"{len(self.only_sparse)} only in BM25, {len(self.differing)} with "
            "different text; run `ragbudget repair`"
        )


@dataclass
class IngestSummary:
    """What one ingest did, document by document."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    chunks_added: int = 0
    chunks_deleted: int = 0


class HybridIndex:
    """BM25 and a vector store over the same chunks, updated by source document."""

    def __init__(
        self,
        directory: Path,
        config: RagBudgetConfig,
        vectorstore: Chroma,
        records: dict[str, dict[str, Any]],
        chunks: dict[str, Document],
    ) -> None:
        self.directory = directory
        self.config = config
        self.vectorstore = vectorstore
        self._records = records
        self._chunks = chunks
        self._sparse: BM25Retriever | None = None
        self._chunker = Chunker(config.index)
        self._pending_adds: dict[str, Document] = {}
        self._pending_deletes: list[str] = []
        self.sync_report = SyncReport()

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: RagBudgetConfig | None = None,
        embeddings: Embeddings | None = None,
    ) -> HybridIndex:
        """Open the index in `directory`, creating it if absent.

        Refuses an index built with another embedding model or other chunking
        settings, and checks that both sides hold the same chunks.
        """
        config = config or load_config()
        path = Path(directory)
        manifest = _manifest(config)
        manifest_file = path / MANIFEST
        if manifest_file.is_file():
            _check_manifest(manifest_file, manifest)
        else:
            path.mkdir(parents=True, exist_ok=True)
            _atomic_write(manifest_file, json.dumps(manifest, indent=2))
        records, sparse = _load_sparse(path, config.retrieval.sparse.fetch_k)
        chunks = {str(c.id): c for c in sparse.documents} if sparse else {}
        vectorstore = build_vector_store(
            _vector_settings(config, path),
            embeddings or build_embeddings(config.embedding),
        )
        if not isinstance(vectorstore, Chroma):  # build_vector_store makes Chroma
            raise TypeError(f"expected a Chroma store, got {type(vectorstore)}")
        index = cls(path, config, vectorstore, records, chunks)
        index._sparse = sparse
        index.sync_report = index.sync_check()
        if not index.sync_report.in_sync:
            logger.warning("index %s: %s", path, index.sync_report.summary())
        return index

    @property
    def document_ids(self) -> list[str]:
        """Ids of the source documents in the index."""
        return sorted(self._records)

    @property
    def chunk_count(self) -> int:
        """Number of chunks (the same on both sides when in sync)."""
        return len(self._chunks)

    def upsert(
        self,
        documents: Iterable[Document],
        *,
        on_document: Callable[[str], None] | None = None,
    ) -> IngestSummary:
        """Add new documents, replace changed ones, skip unchanged ones; then save.

        A document needs an id (`Document.id` or `metadata["doc_id"]`). Empty or
        placeholder text is an error for that document; if it was indexed before it
        is removed, so a blanked document stops answering.
        """
        summary = IngestSummary()
        for document in documents:
            doc_id = _doc_id(document)
            self._upsert_one(doc_id, document, summary)
            if len(self._pending_adds) >= FLUSH_CHUNKS:
                self._flush()
            if on_document is not None:
                on_document(doc_id)
        self.commit()
        return summary

    def _upsert_one(
        self, doc_id: str, document: Document, summary: IngestSummary
    ) -> None:
        problem = check_content(document.page_content, self.config.index.placeholders)
        if problem is not None:
            if doc_id in self._records:
                summary.chunks_deleted += self._remove(doc_id)
                summary.deleted.append(doc_id)
                problem += "; it was indexed before and has been removed"
            summary.errors.append(FileError(doc_id, problem))
            return
        digest = _document_hash(document)
        record = self._records.get(doc_id)
        if record is not None and record["hash"] == digest:
            summary.unchanged.append(doc_id)
            return
        chunks = self._chunker.split(document, doc_id)
        for chunk in chunks:
            chunk.metadata["content_hash"] = content_hash(chunk.page_content)
        if record is not None:
            summary.chunks_deleted += self._remove(doc_id)
            summary.updated.append(doc_id)
        else:
            summary.added.append(doc_id)
        self._pending_adds.update({str(chunk.id): chunk for chunk in chunks})
        self._records[doc_id] = {
            "hash": digest,
            "chunks": [chunk.id for chunk in chunks],
            "source": document.metadata.get("source", doc_id),
        }
        self._chunks.update({str(chunk.id): chunk for chunk in chunks})
        summary.chunks_added += len(chunks)

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Remove documents (all their chunks, both sides); returns those removed."""
        removed = [doc_id for doc_id in doc_ids if doc_id in self._records]
        for doc_id in removed:
            self._remove(doc_id)
        self.commit()
        return removed

    def _remove(self, doc_id: str) -> int:
        chunk_ids = self._records.pop(doc_id)["chunks"]
        for chunk_id in chunk_ids:
            self._chunks.pop(chunk_id, None)
            if self._pending_adds.pop(chunk_id, None) is None:
                self._pending_deletes.append(chunk_id)
        return len(chunk_ids)

    def _flush(self) -> None:
        """Write pending vector-side changes: deletes first, then adds in batches.

        Batching matters: one Chroma write per document cost a quarter of ingest.
        """
        if self._pending_deletes:
            self.vectorstore.delete(ids=self._pending_deletes)
            self._pending_deletes = []
        if self._pending_adds:
            add_documents(self.vectorstore, list(self._pending_adds.values()))
            self._pending_adds = {}

    def commit(self) -> None:
        """Write the vector side, then rebuild BM25 and save it atomically."""
        self._flush()
        chunks = list(self._chunks.values())
        self._sparse = build_sparse_retriever(chunks, self.config) if chunks else None
        _save_sparse(self.directory, self._records, self._sparse)

    def sync_check(self) -> SyncReport:
        """Compare the chunk ids and text hashes of the two sides."""
        found = self.vectorstore.get(include=["metadatas"])
        dense = {
            chunk_id: (meta or {}).get("content_hash")
            for chunk_id, meta in zip(found["ids"], found["metadatas"], strict=True)
        }
        sparse = {
            chunk_id: chunk.metadata.get("content_hash")
            for chunk_id, chunk in self._chunks.items()
        }
        return SyncReport(
            only_dense=sorted(set(dense) - set(sparse)),
            only_sparse=sorted(set(sparse) - set(dense)),
            differing=sorted(
                key for key in set(dense) & set(sparse) if dense[key] != sparse[key]
            ),
        )

    def repair(self) -> SyncReport:
        """Make the vector side match the committed sparse side; returns what it fixed.

        The sparse side is the reference: it is saved atomically with the document
        records, while vector writes land first and may be left half-done.
        """
        report = self.sync_check()
        stale = report.only_dense + report.differing
        if stale:
            self.vectorstore.delete(ids=stale)
        missing = [self._chunks[key] for key in report.only_sparse + report.differing]
        add_documents(self.vectorstore, missing)
        self.sync_report = self.sync_check()
        return report

    def as_retriever(self, **overrides: Any) -> HybridRetriever:
        """A HybridRetriever over this index, as configured (`overrides` e.g. k)."""
        if self._sparse is None:
            raise IndexLoadError(
                f"index {self.directory} is empty: ingest documents first"
            )
        retrieval = self.config.retrieval
        settings: dict[str, Any] = {
            "retrievers": [
                self._sparse,
                DenseRetriever(
                    vectorstore=self.vectorstore,
                    k=retrieval.dense.fetch_k,
                    docstore=self._chunks,
                ),
            ],
            "names": ["bm25", "dense"],
            "weights": [retrieval.sparse.weight, retrieval.dense.weight],
            "k": retrieval.k,
            "c": retrieval.rrf_c,
            "id_key": "chunk_id",
        }
        return HybridRetriever(**{**settings, **overrides})


def _doc_id(document: Document) -> str:
    doc_id = document.id or document.metadata.get("doc_id")
    if not doc_id:
        raise ValueError(
            "a document to index needs an id (Document.id or metadata['doc_id']); "
            f"got one starting {document.page_content[:40]!r}"
        )
    return str(doc_id)


def _document_hash(document: Document) -> str:
    metadata = json.dumps(document.metadata, sort_keys=True, default=str)
    return content_hash(f"{metadata}\x00{document.page_content}")


def _manifest(config: RagBudgetConfig) -> dict[str, Any]:
    chunking = config.index.model_dump(
        include={"chunk_size", "chunk_overlap", "encoding"}
    )
    return {
        "format": FORMAT_VERSION,
        "embedding_model": config.embedding.model,
        "chunking": chunking,
    }


def _check_manifest(path: Path, expected: dict[str, Any]) -> None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise IndexLoadError(f"{path}: unreadable manifest ({exc})") from exc
    if found.get("embedding_model") != expected["embedding_model"]:
        raise IndexLoadError(
            f"{path.parent} was built with embedding model "
            f"{found.get('embedding_model')!r}, but the configuration uses "
            f"{expected['embedding_model']!r}: vectors from two models cannot be "
            "compared. Use the same model, or index into a new directory."
        )
    if found.get("chunking") != expected["chunking"]:
        raise IndexLoadError(
            f"{path.parent} was built with chunking {found.get('chunking')}, but the "
            f"configuration says {expected['chunking']}: re-index into a new directory "
            "or restore the settings."
        )


def _vector_settings(config: RagBudgetConfig, directory: Path) -> VectorStoreSettings:
    if config.vector_store.host is not None:
        return config.vector_store
    return VectorStoreSettings(
        collection=COLLECTION, persist_directory=str(directory / "chroma")
    )


def _current_version(directory: Path) -> Path:
    return directory / (directory / CURRENT).read_text(encoding="utf-8").strip()


def _load_sparse(
    directory: Path, fetch_k: int
) -> tuple[dict[str, dict[str, Any]], BM25Retriever | None]:
    """Records and BM25 index of the committed version; stray folders are removed."""
    current = None
    if (directory / CURRENT).is_file():
        current = _current_version(directory)
        if not (current / RECORDS).is_file():
            raise IndexLoadError(
                f"{directory}: {CURRENT} names {current.name}, which is incomplete"
            )
    for stray in directory.glob("*sparse-*"):
        if stray != current and stray.is_dir():
            shutil.rmtree(stray)  # an interrupted or superseded save
    if current is None:
        return {}, None
    records = json.loads((current / RECORDS).read_text(encoding="utf-8"))["documents"]
    if not (current / "bm25").is_dir():
        return records, None
    return records, BM25Retriever.load(current / "bm25", k=fetch_k)


def _save_sparse(
    directory: Path, records: dict[str, dict[str, Any]], sparse: BM25Retriever | None
) -> None:
    """Write a new version folder, then point CURRENT at it (atomic rename)."""
    version = f"sparse-{time.time_ns()}-{os.getpid()}"
    staging = directory / f".{version}.tmp"
    staging.mkdir(parents=True)
    if sparse is not None:
        sparse.save(staging / "bm25")
    (staging / RECORDS).write_text(
        json.dumps({"format": FORMAT_VERSION, "documents": records}), encoding="utf-8"
    )
    _fsync_tree(staging)
    os.rename(staging, directory / version)
    _fsync(directory)
    previous = (
        (directory / CURRENT).read_text().strip()
        if (directory / CURRENT).is_file()
        else None
    )
    _atomic_write(directory / CURRENT, version)
    if previous and (directory / previous).is_dir():
        shutil.rmtree(directory / previous)


def _atomic_write(path: Path, text: str) -> None:
    staging = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    staging.write_text(text, encoding="utf-8")
    _fsync(staging)
    os.replace(staging, path)
    _fsync(path.parent)


def _fsync_tree(root: Path) -> None:
    """Flush every file under `root`, then the folders, deepest first."""
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    for item in root.rglob("*"):
        if item.is_file():
            _fsync(item)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        _fsync(folder)


def _fsync(path: Path) -> None:
    """Flush a file, or a folder (its entries) where the platform allows it."""
    if path.is_dir() and os.name != "posix":
        return  # Windows cannot open a folder to flush it
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
