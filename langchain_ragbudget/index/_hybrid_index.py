"""One index, two sides: BM25 and the vector store, kept in sync by source document.

`HybridIndex` owns both. Add, upsert and delete work by source document id: a changed
document replaces all of its chunks on both sides, a deleted one leaves both, and
unchanged content (same hash, and both sides really hold its chunks) is skipped. It
is an equivalent of LangChain's indexing API (`index()` with a record manager),
extended to the BM25 side, which that API cannot reach.

On disk (`directory/`): `manifest.json` (embedding model, chunking settings, the root
folder document ids are relative to), `chroma/`, and the sparse side in a version
folder `sparse-<ns>-<pid>` named by `CURRENT`, holding `records.json` (documents,
a copy of the manifest, the size of every file of the version) and `bm25/`.
A save writes a new version folder, then switches `CURRENT` with an atomic rename,
so a process killed mid-save leaves the previous version loadable; every file and
folder is flushed to disk (fsync) before the rename that publishes it, so a power cut
cannot publish a version whose files are still in the page cache. The vector side is
written first; after a crash between the two, `sync_check` finds the chunks that
differ and `repair` brings the two sides together.

Opening never deletes a committed version. Only folders provably superseded (older
than the committed version) are removed; a newer, uncommitted one is left alone
until the next save. A missing or damaged `CURRENT` is recovered from the newest
complete version folder that is not older than the one it named; a missing or
damaged manifest from the copy in `records.json`. Any other missing or damaged file
(records, a BM25 file, the Chroma database or its HNSW segment files) makes `open`
raise `IndexLoadError` naming the file and `ragbudget repair`.

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
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import struct
import tempfile
import time
from collections.abc import Iterable, Sized
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget._disk import atomic_write_text, publish_folder
from langchain_ragbudget._html import display, key_values, table
from langchain_ragbudget._identity import content_hash
from langchain_ragbudget.config import RagBudgetConfig, VectorStoreSettings, load_config
from langchain_ragbudget.dense import add_documents, connect_chroma_server
from langchain_ragbudget.errors import (
    IndexLoadError,
    IndexRepairError,
    InvalidInputError,
)
from langchain_ragbudget.factory import (
    build_embeddings,
    build_sparse_retriever,
    build_vector_store,
    hybrid_retriever,
)
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.index._chunking import Chunker
from langchain_ragbudget.index._loaders import FileError, check_content
from langchain_ragbudget.progress import ProgressCallback, StageProgress
from langchain_ragbudget.sparse import BM25Retriever

if TYPE_CHECKING:  # chromadb takes most of a second to import: only when used
    from langchain_chroma import Chroma

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
RECORDS = "records.json"
BM25_DIR = "bm25"
BM25_DOCUMENTS = "documents.jsonl"
CHROMA_DIR = "chroma"
CHROMA_DB = "chroma.sqlite3"
COLLECTION = "ragbudget-index"
CHUNKING = "chunking documents"  # progress stages of `upsert`
EMBEDDING = "embedding chunks"
_VERSION = re.compile(r"^\.?sparse-(\d+)-(\d+)(\.tmp)?$")
_HNSW_FILES = ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin")
_HNSW_HEADER_SIZE = 100  # chromadb's hnswlib: int32 version, then the index header


@dataclass(frozen=True)
class SyncReport:
    """Chunks present on one side only, or with different text on the two sides.

    Attributes:
        only_dense: Chunk ids only the vector store holds.
        only_sparse: Chunk ids only BM25 holds.
        differing: Chunk ids both sides hold with different text hashes.
    """

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
class RepairReport:
    """What `repair` found and did; nothing it removed was the only copy.

    Attributes:
        problems: The damage found, one line each.
        re_embedded: Chunk ids written to the vector store.
        restored_to_bm25: Chunk ids only the vector store held, added back to BM25.
        removed_superseded: Vector ids removed because the committed record of
            their own document supersedes them.
        needs_reingest: Document ids that could not be fully restored; the next
            `ragbudget index` re-adds them.
        moved_aside: Paths the damaged files were moved to (`damaged-*`).
        manifest_rewritten: Whether `manifest.json` was rewritten.
    """

    problems: list[str] = field(default_factory=list)
    re_embedded: list[str] = field(default_factory=list)
    restored_to_bm25: list[str] = field(default_factory=list)
    removed_superseded: list[str] = field(default_factory=list)
    needs_reingest: list[str] = field(default_factory=list)
    moved_aside: list[str] = field(default_factory=list)
    manifest_rewritten: bool = False

    def lines(self) -> list[str]:
        """Readable lines for the CLI, one per kind of action."""
        out = [f"found: {problem}" for problem in self.problems]
        out.append(
            f"re-embedded {len(self.re_embedded)} chunk(s) into the vector store; "
            f"added {len(self.restored_to_bm25)} chunk(s) only the vector store held "
            f"back to BM25; removed {len(self.removed_superseded)} vector(s) "
            "superseded by a committed record"
        )
        if self.needs_reingest:
            out.append(
                f"{len(self.needs_reingest)} document(s) could not be fully restored "
                f"and will be re-added by the next `ragbudget index`: "
                + ", ".join(self.needs_reingest[:10])
                + (" ..." if len(self.needs_reingest) > 10 else "")
            )
        for path in self.moved_aside:
            out.append(f"kept the damaged files at {path} (delete when satisfied)")
        if self.manifest_rewritten:
            out.append(f"rewrote {MANIFEST}")
        return out


@dataclass
class IngestSummary:
    """What one ingest did, document by document.

    Attributes:
        added: Ids of documents new to the index.
        updated: Ids of documents whose content changed (all chunks replaced).
        unchanged: Ids of documents skipped as unchanged.
        restored: Ids of unchanged documents whose chunks were missing from a
            side, re-added.
        deleted: Ids of documents removed (e.g. blanked since the last ingest).
        errors: Documents refused, each with the reason.
        notes: Documents indexed with a remark (e.g. blank pieces left out).
        chunks_added: Chunks written.
        chunks_deleted: Chunks removed.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)  # unchanged, but chunks missing
    deleted: list[str] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    notes: list[FileError] = field(default_factory=list)
    chunks_added: int = 0
    chunks_deleted: int = 0


@dataclass
class IndexInspection:
    """What an index folder holds, read without changing it (`HybridIndex.inspect`).

    Attributes:
        directory: The index folder.
        documents: Source documents in the committed records (None: unreadable).
        bm25_chunks: Chunks on the BM25 side (None: unreadable).
        vector_chunks: Chunks in the vector store (None: unreadable).
        manifest: The manifest (or, if it is damaged, its copy in the committed
            records): format, embedding model, chunking, root folder.
        committed_version: The BM25 version folder `CURRENT` names (or the one
            `open` would recover), None when nothing is committed.
        other_versions: Other version folders (an unfinished or superseded save).
        moved_aside: `damaged-*` entries a repair left for the user to delete.
        sync: How the two sides compare; None when a side cannot be read.
        sizes: Bytes on disk per top-level entry of the folder.
        problems: Damage and mismatches found, each naming its file and what to do.
    """

    directory: Path
    documents: int | None = None
    bm25_chunks: int | None = None
    vector_chunks: int | None = None
    manifest: dict[str, Any] = field(default_factory=dict)
    committed_version: str | None = None
    other_versions: list[str] = field(default_factory=list)
    moved_aside: list[str] = field(default_factory=list)
    sync: SyncReport | None = None
    sizes: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        """True when nothing is damaged and both sides hold the same chunks."""
        return not self.problems and self.sync is not None and self.sync.in_sync

    @property
    def size_bytes(self) -> int:
        """Bytes on disk of the whole folder."""
        return sum(self.sizes.values())

    @property
    def saved_at(self) -> str | None:
        """When the committed version was saved (UTC, ISO 8601), from its name."""
        key = _version_key(self.committed_version or "")
        if key is None:
            return None
        return datetime.fromtimestamp(key[0] / 1e9, UTC).isoformat(timespec="seconds")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view, for `ragbudget inspect --json`."""
        sync = self.sync
        return {
            "directory": str(self.directory),
            "healthy": self.healthy,
            "documents": self.documents,
            "chunks": {"bm25": self.bm25_chunks, "vector_store": self.vector_chunks},
            "embedding_model": self.manifest.get("embedding_model"),
            "chunking": self.manifest.get("chunking"),
            "root": self.manifest.get("root"),
            "versions": {
                "manifest_format": self.manifest.get("format"),
                "committed_bm25_version": self.committed_version,
                "saved_at": self.saved_at,
                "other_bm25_versions": self.other_versions,
            },
            "sync": None
            if sync is None
            else {
                "in_sync": sync.in_sync,
                "only_in_vector_store": sync.only_dense,
                "only_in_bm25": sync.only_sparse,
                "different_text": sync.differing,
            },
            "size_bytes": {"total": self.size_bytes, **self.sizes},
            "moved_aside": self.moved_aside,
            "problems": self.problems,
        }

    def __repr__(self) -> str:
        state = "healthy" if self.healthy else f"{len(self.problems)} problem(s)"
        return (
            f"IndexInspection({str(self.directory)!r}, {self.documents} documents, "
            f"{self.bm25_chunks} chunks, {state})"
        )

    def _repr_html_(self) -> str:
        """The inspection in a notebook: summary, sync, problems, sizes."""
        sync = self.sync
        pairs: list[tuple[str, object]] = [
            ("folder", self.directory),
            ("healthy", "yes" if self.healthy else "no"),
            ("documents", _shown(self.documents)),
            ("chunks (BM25 / vector store)", _shown_pair(self)),
            ("embedding model", _shown(self.manifest.get("embedding_model"))),
            ("chunking", _shown(self.manifest.get("chunking"))),
            ("committed BM25 version", _shown(self.committed_version)),
            ("saved at", _shown(self.saved_at)),
            ("sync", "unreadable" if sync is None else sync.summary()),
            ("size on disk", f"{self.size_bytes:,} bytes"),
        ]
        parts: list[object] = [key_values(pairs, "index")]
        if sync is not None and not sync.in_sync:
            rows = [
                *(["only in the vector store", key] for key in sync.only_dense),
                *(["only in BM25", key] for key in sync.only_sparse),
                *(["different text", key] for key in sync.differing),
            ]
            parts.append(table(["where", "chunk id"], rows, caption="out of sync"))
        if self.problems:
            parts.append(
                table(["problem"], [[p] for p in self.problems], caption="problems")
            )
        sizes = [[name, f"{size:,}"] for name, size in sorted(self.sizes.items())]
        parts.append(table(["entry", "bytes"], sizes, caption="sizes", numeric=[1]))
        return display("IndexInspection", parts)


def _shown(value: object) -> object:
    return "-" if value is None else value


def _shown_pair(inspection: IndexInspection) -> str:
    return f"{_shown(inspection.bm25_chunks)} / {_shown(inspection.vector_chunks)}"


class HybridIndex:
    """BM25 and a vector store over the same chunks, updated by source document.

    Open one with `HybridIndex.open` (or repair one with `repair_directory`);
    the constructor is for those two. Every change (`upsert`, `delete`) ends in a
    `commit`: vectors first, then a new BM25 version published atomically, so a
    crash leaves the previous version loadable and `repair` can reconcile the two.
    Use it as a context manager, or call `close`, to release the embedded Chroma.

    Attributes:
        directory: The index folder.
        config: The configuration it was opened with.
        vectorstore: The Chroma store of the dense side.
        sync_report: How the two sides compared at the last open, commit or check.

    Example:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_ragbudget import load_config
            from langchain_ragbudget.index._hybrid_index import HybridIndex

            with HybridIndex.open("my-index", load_config()) as index:
                note = "Regular exercise lowers blood pressure in most adults."
                summary = index.upsert([Document(id="notes/a.md", page_content=note)])
                print(summary.added, summary.errors, index.sync_report.summary())
                docs = index.as_retriever(k=5).invoke("what lowers blood pressure?")
    """

    def __init__(
        self,
        directory: Path,
        config: RagBudgetConfig,
        vectorstore: Chroma,
        records: dict[str, dict[str, Any]],
        chunks: dict[str, Document],
        manifest: dict[str, Any] | None = None,
    ) -> None:
        self.directory = directory
        self.config = config
        self.vectorstore = vectorstore
        self._records = records
        self._chunks = chunks
        self._manifest = manifest if manifest is not None else _manifest(config)
        self._sparse: BM25Retriever | None = None
        self._chunker = Chunker(config.index)
        self._pending_adds: dict[str, Document] = {}
        self._pending_deletes: list[str] = []
        self._dense_hashes: dict[str, str | None] = {}
        self.sync_report = SyncReport()

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: RagBudgetConfig | None = None,
        embeddings: Embeddings | None = None,
        *,
        create: bool = True,
    ) -> HybridIndex:
        """Open the index in `directory`; create it if absent and `create` is true.

        Refuses an index built with another embedding model or other chunking
        settings, and checks that both sides hold the same chunks. A missing or
        damaged file raises `IndexLoadError` naming it (see the module docstring
        for what is recovered instead). With `create=False` a folder holding no
        index raises `IndexLoadError` and nothing is written. Sides out of sync
        are logged as a warning and shown in `sync_report`, not refused.

        Args:
            directory: The index folder.
            config: The configuration; the shipped defaults if None.
            embeddings: The embedding model; built from `config` if None.
            create: Whether a folder holding no index may become a new one.

        Returns:
            The open index.

        Raises:
            IndexLoadError: No index here and `create` is false; a file, not a
                folder; another embedding model or chunking; a missing, truncated
                or unreadable file; or a vector side without its BM25 side.
        """
        config = config or load_config()
        path = Path(directory)
        expected = _manifest(config)
        if not _holds_index(path):
            if not create:
                raise IndexLoadError(
                    f"{path}: no index here ({MANIFEST} not found); check the path, "
                    f"or create one with `ragbudget index FOLDER --index {path}`"
                )
            path.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path / MANIFEST, json.dumps(expected, indent=2))
        version, recovered = _committed_version(path, recover=True)
        if not recovered:  # after a recovery, which version was committed is a guess
            _remove_superseded(path, version)
        records, sparse, copy = _load_sparse(path, version, config)
        manifest = _load_manifest(path, expected, copy)
        chunks = {str(c.id): c for c in sparse.documents} if sparse else {}
        vectorstore = _open_dense(
            path,
            config,
            embeddings or build_embeddings(config.embedding),
            may_create=create and not records,
        )
        index = cls(path, config, vectorstore, records, chunks, manifest)
        index._sparse = sparse
        index.sync_report = index.sync_check()
        if not records and index._dense_hashes:
            index.close()
            raise IndexLoadError(
                f"{path}: the BM25 side is missing (no committed version) but the "
                f"vector store holds {len(index._dense_hashes)} chunk(s); run "
                f"`ragbudget repair --index {path}` to rebuild it from the vector store"
            )
        if not index.sync_report.in_sync:
            logger.warning("index %s: %s", path, index.sync_report.summary())
        return index

    @classmethod
    def inspect(
        cls, directory: str | Path, config: RagBudgetConfig | None = None
    ) -> IndexInspection:
        """Report what the index in `directory` holds, changing nothing.

        Unlike `open`, it recovers nothing, creates nothing and removes nothing:
        a missing `CURRENT`, a damaged manifest or a missing BM25 folder is
        reported in `problems`. chromadb writes to its files when it opens them,
        so the vector side is read from a temporary copy (a Chroma server is read
        directly); the copy costs the vector store's size in temporary space.

        Args:
            directory: The index folder.
            config: The configuration the index is used with (its embedding model
                and chunking are compared with the manifest); defaults if None.

        Returns:
            Counts, manifest, versions, sync state, sizes and the problems found.

        Raises:
            IndexLoadError: `directory` does not exist, is a file, or holds no index.
        """
        config = config or load_config()
        path = Path(directory)
        if not _holds_index(path):
            raise IndexLoadError(f"{path}: no index here ({MANIFEST} not found)")
        found = IndexInspection(path, sizes=_sizes(path))
        sparse = _read_sparse_tolerant(path, config)
        found.problems += sparse.notes + sparse.problems
        if sparse.version is not None:
            found.committed_version = sparse.version.name
        found.other_versions = sorted(
            entry.name
            for entry in path.iterdir()
            if _version_key(entry.name) is not None
            and entry.name != found.committed_version
        )
        found.moved_aside = sorted(
            e.name for e in path.iterdir() if e.name.startswith("damaged-")
        )
        if sparse.records is not None:
            found.documents = len(sparse.records)
        if sparse.chunks_complete:
            found.bm25_chunks = len(sparse.chunks)
        found.manifest = _inspect_manifest(path, sparse.manifest_copy, found.problems)
        if found.manifest:
            try:
                _check_manifest(path / MANIFEST, found.manifest, _manifest(config))
            except IndexLoadError as exc:
                found.problems.append(str(exc))
        dense = _inspect_dense(path, config, found.problems, bool(sparse.chunks))
        if dense is not None:
            found.vector_chunks = len(dense)
            if sparse.chunks_complete:
                found.sync = _sync_report(dense, _hashes(sparse.chunks))
        return found

    @classmethod
    def repair_directory(
        cls,
        directory: str | Path,
        config: RagBudgetConfig | None = None,
        embeddings: Embeddings | None = None,
    ) -> tuple[HybridIndex, RepairReport]:
        """Repair the index in `directory`, however damaged; see the module docstring.

        A side that cannot be read is rebuilt from the other; damaged files are
        moved aside (`damaged-*`), never deleted.

        Args:
            directory: The index folder.
            config: The configuration; the shipped defaults if None.
            embeddings: The embedding model; built from `config` if None.

        Returns:
            The repaired, open index and a report of what was found and done.

        Raises:
            IndexLoadError: `directory` holds no index (nothing is created), or
                it was built with another embedding model or chunking.
            IndexRepairError: Neither side can be read, or a Chroma server's side
                cannot (nothing is changed).
        """
        config = config or load_config()
        path = Path(directory)
        if not _holds_index(path):
            raise IndexLoadError(
                f"{path}: no index here ({MANIFEST} not found); nothing to repair"
            )
        report = RepairReport()
        expected = _manifest(config)
        sparse = _read_sparse_tolerant(path, config)
        report.problems += sparse.notes + sparse.problems
        manifest, rewrite = _manifest_tolerant(path, expected, sparse.manifest_copy)
        if rewrite:
            report.problems.append(f"{path / MANIFEST} is missing or unreadable")
        embeddings = embeddings or build_embeddings(config.embedding)
        store: Chroma | None = None
        dense: dict[str, Document] | None = None
        try:
            store = _open_dense(path, config, embeddings, may_create=False)
            dense = _dense_documents(store)
        except IndexLoadError as exc:
            report.problems.append(str(exc))
            if store is not None:
                _close_store(store)
                store = None
        if dense is None and not sparse.chunks_complete:
            raise IndexRepairError(
                f"{path}: neither side of the index can be read ("
                + "; ".join(report.problems)
                + "). Nothing was changed. Restore the folder from a backup, or "
                "index the files again into a new directory."
            )
        merged = _merge(sparse.records, sparse.chunks, dense or {})
        report.restored_to_bm25 = merged.restored_to_bm25
        report.needs_reingest = merged.needs_reingest
        if store is None:  # the vector side is unreadable: rebuild it aside
            if config.vector_store.host is not None:
                raise IndexRepairError(
                    f"the vector store server cannot be read ({report.problems[-1]}); "
                    "nothing was changed"
                )
            damaged = path / CHROMA_DIR
            if damaged.exists():
                _release_chroma(damaged)
                aside = path / f"damaged-{CHROMA_DIR}-{time.time_ns()}"
                os.rename(damaged, aside)
                report.moved_aside.append(str(aside))
            store = _open_dense(path, config, embeddings, may_create=True)
        if sparse.problems and sparse.version is not None and sparse.version.is_dir():
            aside = path / f"damaged-{sparse.version.name}"
            os.rename(sparse.version, aside)
            report.moved_aside.append(str(aside))
        if rewrite:
            atomic_write_text(path / MANIFEST, json.dumps(manifest, indent=2))
            report.manifest_rewritten = True
        index = cls(path, config, store, {}, {}, manifest)
        index.sync_check()
        written, removed = index._apply(merged, dense or {})
        report.re_embedded, report.removed_superseded = written, removed
        return index, report

    @property
    def document_ids(self) -> list[str]:
        """Ids of the source documents in the index."""
        return sorted(self._records)

    @property
    def chunk_count(self) -> int:
        """Number of chunks (the same on both sides when in sync)."""
        return len(self._chunks)

    @property
    def root(self) -> Path | None:
        """The folder document ids are relative to (set by the first `index`)."""
        root = self._manifest.get("root")
        return Path(root) if root else None

    def set_root(self, root: str | Path) -> None:
        """Record the folder document ids are relative to (absolute) in the manifest."""
        self._manifest["root"] = str(Path(root).resolve())
        atomic_write_text(
            self.directory / MANIFEST, json.dumps(self._manifest, indent=2)
        )

    def close(self) -> None:
        """Release the embedded Chroma client (its files can then be moved)."""
        _close_store(self.vectorstore)

    def __enter__(self) -> HybridIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def upsert(
        self,
        documents: Iterable[Document],
        *,
        progress: ProgressCallback | None = None,
    ) -> IngestSummary:
        """Add new documents, replace changed ones, skip unchanged ones; then save.

        A document needs an id (`Document.id` or `metadata["doc_id"]`). Empty,
        whitespace-only or placeholder text is an error for that document; if it
        was indexed before it is removed, so a blanked document stops answering.
        An unchanged document whose chunks are missing from either side is re-added.
        A document counts as changed when its text or its metadata changed.

        Every document is chunked before any chunk is embedded: embedding takes
        nearly all the time, and so its progress has a true total from the start,
        and the vector side gets all new chunks in one length-sorted run.

        Args:
            documents: Whole source documents (chunked here).
            progress: Hears `CHUNKING` (documents handled; the total when
                `documents` has a length), then `EMBEDDING` (chunks embedded and
                written, of all new chunks).

        Returns:
            What happened to each document; refused ones are in `errors`.

        Raises:
            ValueError: A document has no id.
        """
        summary = IngestSummary()
        total = len(documents) if isinstance(documents, Sized) else None
        chunked = StageProgress(progress, CHUNKING, total).start()
        for document in documents:
            self._upsert_one(_doc_id(document), document, summary)
            chunked.advance()
        self.commit(progress)
        return summary

    def _upsert_one(
        self, doc_id: str, document: Document, summary: IngestSummary
    ) -> None:
        problem = check_content(document.page_content, self.config.index.placeholders)
        digest = _document_hash(document)
        chunks: list[Document] = []
        if problem is None:
            chunks, blank = self._chunker.split_counted(document, doc_id)
            if not chunks:
                problem = "empty: only whitespace or invisible characters"
            elif blank:
                summary.notes.append(
                    FileError(
                        doc_id,
                        f"{blank} piece(s) of only whitespace or invisible characters "
                        "left out",
                    )
                )
        if problem is not None:
            if doc_id in self._records:
                summary.chunks_deleted += self._remove(doc_id)
                summary.deleted.append(doc_id)
                problem += "; it was indexed before and has been removed"
            summary.errors.append(FileError(doc_id, problem))
            return
        record = self._records.get(doc_id)
        if record is not None and record["hash"] == digest:
            if self._holds(record):
                summary.unchanged.append(doc_id)
                return
            summary.restored.append(doc_id)
        elif record is not None:
            summary.updated.append(doc_id)
        else:
            summary.added.append(doc_id)
        for chunk in chunks:
            chunk.metadata["content_hash"] = content_hash(chunk.page_content)
            chunk.metadata["doc_hash"] = digest
            chunk.metadata["doc_chunks"] = len(chunks)
        if record is not None:
            summary.chunks_deleted += self._remove(doc_id)
        self._pending_adds.update({str(chunk.id): chunk for chunk in chunks})
        self._records[doc_id] = {
            "hash": digest,
            "chunks": [chunk.id for chunk in chunks],
            "source": document.metadata.get("source", doc_id),
        }
        self._chunks.update({str(chunk.id): chunk for chunk in chunks})
        summary.chunks_added += len(chunks)

    def _holds(self, record: dict[str, Any]) -> bool:
        """Whether both sides hold every chunk of `record`, with the same text."""
        ids = record["chunks"]
        return bool(ids) and all(
            chunk_id in self._chunks
            and chunk_id in self._dense_hashes
            and self._dense_hashes[chunk_id]
            == self._chunks[chunk_id].metadata.get("content_hash")
            for chunk_id in ids
        )

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Remove documents (all their chunks, both sides); returns those removed.

        Args:
            doc_ids: Source document ids; ids not in the index are ignored.

        Returns:
            The ids that were in the index and are now removed.
        """
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

    def _flush(self, progress: ProgressCallback | None = None) -> None:
        """Write pending vector-side changes: deletes first, then adds in batches.

        Batching matters: one Chroma write per document cost a quarter of ingest.
        """
        if self._pending_deletes:
            _delete_all(self.vectorstore, self._pending_deletes)
            for chunk_id in self._pending_deletes:
                self._dense_hashes.pop(chunk_id, None)
            self._pending_deletes = []
        if self._pending_adds:
            embedded = StageProgress(progress, EMBEDDING, len(self._pending_adds))
            add_documents(
                self.vectorstore,
                list(self._pending_adds.values()),
                on_batch=embedded.start().advance,
            )
            for chunk_id, chunk in self._pending_adds.items():
                self._dense_hashes[chunk_id] = chunk.metadata.get("content_hash")
            self._pending_adds = {}

    def commit(self, progress: ProgressCallback | None = None) -> None:
        """Write the vector side, then rebuild BM25 and save it atomically.

        Args:
            progress: Hears `EMBEDDING`, chunks embedded of those pending.
        """
        self._flush(progress)
        chunks = list(self._chunks.values())
        self._sparse = build_sparse_retriever(chunks, self.config) if chunks else None
        _save_sparse(self.directory, self._records, self._sparse, self._manifest)
        self.sync_report = self._compare()

    def sync_check(self) -> SyncReport:
        """Compare the chunk ids and text hashes of the two sides."""
        try:
            self._dense_hashes = _content_hashes(self.vectorstore)
        except Exception as exc:  # chromadb raises its own types for a broken store
            raise IndexLoadError(
                f"{self.directory / CHROMA_DIR / CHROMA_DB}: the vector store cannot "
                f"be read ({type(exc).__name__}: {exc}); run `ragbudget repair "
                f"--index {self.directory}`"
            ) from exc
        return self._compare()

    def _compare(self) -> SyncReport:
        """Sync report from the vector-side hashes known to this process (no query)."""
        return _sync_report(self._dense_hashes, _hashes(self._chunks))

    def repair(self) -> SyncReport:
        """Bring the two sides together without losing data; returns what differed.

        Chunks only the vector store holds go back to BM25 (unless their document's
        committed record supersedes them); chunks only BM25 holds, or whose text
        differs from the committed record, are re-embedded. See the module docstring.
        For files that no longer open, use `repair_directory`.

        Returns:
            The comparison before the repair; `sync_report` holds the one after.

        Raises:
            IndexLoadError: The vector store cannot be read.
        """
        report = self.sync_check()
        dense = _dense_documents(self.vectorstore)
        merged = _merge(self._records, self._chunks, dense)
        self._apply(merged, dense)
        return report

    def _apply(
        self, merged: _Merged, dense: dict[str, Document]
    ) -> tuple[list[str], list[str]]:
        """Write a merge to both sides; returns (ids embedded, vectors removed)."""
        dense_hashes = dict(self._dense_hashes)
        removed = sorted(set(dense_hashes) - set(merged.chunks))
        stale = [
            chunk_id
            for chunk_id, chunk in merged.chunks.items()
            if chunk_id in dense_hashes
            and dense_hashes[chunk_id] != chunk.metadata.get("content_hash")
        ]
        written = sorted(
            chunk_id
            for chunk_id, chunk in merged.chunks.items()
            if dense_hashes.get(chunk_id) != chunk.metadata.get("content_hash")
            or chunk_id not in dense_hashes
        )
        if removed or stale:
            _delete_all(self.vectorstore, removed + stale)
        add_documents(self.vectorstore, [merged.chunks[key] for key in written])
        self._records = merged.records
        self._chunks = merged.chunks
        self.commit()
        self.sync_report = self.sync_check()
        return written, removed

    def as_retriever(self, **overrides: Any) -> HybridRetriever:
        """A HybridRetriever over this index, as configured (`overrides` e.g. k).

        Args:
            **overrides: HybridRetriever fields to set instead (e.g. `k`).

        Returns:
            BM25 and dense search over the committed chunks, fused as configured.

        Raises:
            IndexLoadError: The index holds no chunks yet.
        """
        if self._sparse is None:
            raise IndexLoadError(
                f"index {self.directory} is empty: ingest documents first"
            )
        return hybrid_retriever(
            self._sparse, self.vectorstore, self.config, self._chunks, **overrides
        )


def _doc_id(document: Document) -> str:
    doc_id = document.id or document.metadata.get("doc_id")
    if not doc_id:
        raise InvalidInputError(
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


def _holds_index(path: Path) -> bool:
    """Whether `path` holds (part of) an index; a path that is a file is refused."""
    if path.exists() and not path.is_dir():
        raise IndexLoadError(
            f"{path} is a file, not an index folder; give --index a folder"
        )
    if not path.is_dir():
        return False
    names = {entry.name for entry in path.iterdir()}
    return bool(
        names & {MANIFEST, CURRENT, CHROMA_DIR}
        or any(_VERSION.match(name) and not name.startswith(".") for name in names)
    )


def _hashes(chunks: dict[str, Document]) -> dict[str, str | None]:
    """Text hash by chunk id, as each chunk's metadata records it."""
    return {key: chunk.metadata.get("content_hash") for key, chunk in chunks.items()}


def _sync_report(
    dense: dict[str, str | None], sparse: dict[str, str | None]
) -> SyncReport:
    """Compare two sides given as text hash by chunk id."""
    return SyncReport(
        only_dense=sorted(set(dense) - set(sparse)),
        only_sparse=sorted(set(sparse) - set(dense)),
        differing=sorted(
            key for key in set(dense) & set(sparse) if dense[key] != sparse[key]
        ),
    )


def _sizes(directory: Path) -> dict[str, int]:
    """Bytes on disk per top-level entry; links are counted, never followed."""
    sizes: dict[str, int] = {}
    for entry in sorted(directory.iterdir()):
        total = entry.lstat().st_size if not entry.is_dir() or entry.is_symlink() else 0
        if entry.is_dir() and not entry.is_symlink():
            for folder, _, names in os.walk(entry):
                total += sum(os.lstat(os.path.join(folder, n)).st_size for n in names)
        sizes[entry.name] = total
    return sizes


def _inspect_manifest(
    directory: Path, copy: dict[str, Any] | None, problems: list[str]
) -> dict[str, Any]:
    """The manifest, or its committed copy when it is damaged (noted in problems)."""
    path = directory / MANIFEST
    try:
        found = _read_json(path)
        if isinstance(found, dict):
            return dict(found)
        problem = f"{path} is damaged (not a JSON object)"
    except IndexLoadError as exc:
        problem = str(exc)
    if copy is not None:
        problems.append(
            f"{problem}; opening the index restores it from the copy in {RECORDS}"
        )
        return dict(copy)
    problems.append(f"{problem}; run `ragbudget repair --index {directory}`")
    return {}


def _inspect_dense(
    directory: Path, config: RagBudgetConfig, problems: list[str], expected: bool
) -> dict[str, str | None] | None:
    """Text hash by chunk id on the vector side, read without writing to it.

    None (with a problem noted) when it cannot be read; an empty mapping when
    there is no vector store yet and BM25 holds nothing either (`expected` false).
    """
    from chromadb import PersistentClient
    from chromadb.config import Settings

    settings = Settings(anonymized_telemetry=False)
    database = directory / CHROMA_DIR / CHROMA_DB
    repair = f"run `ragbudget repair --index {directory}`"
    try:
        if config.vector_store.host is not None:
            client = connect_chroma_server(config.vector_store, settings)
            collection = client.get_collection(config.vector_store.collection)
            return _content_hashes(collection)
        if not database.is_file():
            if not expected:
                return {}
            raise IndexLoadError(f"{database} is missing: the vector side is gone")
        _check_hnsw(directory / CHROMA_DIR)
        with tempfile.TemporaryDirectory(prefix="ragbudget-inspect-") as temporary:
            copy = Path(temporary) / CHROMA_DIR
            shutil.copytree(directory / CHROMA_DIR, copy)
            client = PersistentClient(path=str(copy), settings=settings)
            try:
                return _content_hashes(client.get_collection(COLLECTION))
            finally:
                _close_client(client)
                _release_chroma(copy)
    except IndexLoadError as exc:
        problems.append(f"{str(exc).split('; run ')[0]}; {repair}")
    except Exception as exc:  # chromadb raises its own types for a broken store
        problems.append(
            f"{database}: the vector store cannot be read "
            f"({type(exc).__name__}: {exc}); {repair}"
        )
    return None


def _content_hashes(store: Any) -> dict[str, str | None]:
    """Text hash by chunk id of a Chroma store or a chromadb collection."""
    found = _get_all(store, ["metadatas"])
    return {
        chunk_id: (meta or {}).get("content_hash")
        for chunk_id, meta in zip(found["ids"], found["metadatas"], strict=True)
    }


def _read_json(path: Path) -> Any:
    """Parsed JSON; raises IndexLoadError naming the file and what is wrong."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise IndexLoadError(f"{path} is missing") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexLoadError(f"{path} is damaged ({exc})") from exc


def _load_manifest(
    directory: Path, expected: dict[str, Any], copy: dict[str, Any] | None
) -> dict[str, Any]:
    """The manifest, restored from the committed copy if missing or damaged."""
    path = directory / MANIFEST
    try:
        found = _read_json(path)
        if not isinstance(found, dict):
            raise IndexLoadError(f"{path} is damaged (not a JSON object)")
    except IndexLoadError as exc:
        if copy is None:
            raise IndexLoadError(
                f"{exc}; run `ragbudget repair --index {directory}` to rewrite it "
                f"(embedding model {expected['embedding_model']!r}, chunking "
                f"{expected['chunking']})"
            ) from exc
        logger.warning("%s; restored from the copy in %s", exc, RECORDS)
        atomic_write_text(path, json.dumps(copy, indent=2))
        found = copy
    _check_manifest(path, found, expected)
    return dict(found)


def _manifest_tolerant(
    directory: Path, expected: dict[str, Any], copy: dict[str, Any] | None
) -> tuple[dict[str, Any], bool]:
    """(manifest, whether it must be rewritten) for repair; refuses another model."""
    path = directory / MANIFEST
    try:
        found = _read_json(path)
        if isinstance(found, dict):
            _check_manifest(path, found, expected)
            return dict(found), False
    except IndexLoadError as exc:
        if "built with" in str(exc):
            raise
    manifest = dict(copy) if copy is not None else dict(expected)
    _check_manifest(path, manifest, expected)
    return manifest, True


def _check_manifest(
    path: Path, found: dict[str, Any], expected: dict[str, Any]
) -> None:
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
        collection=COLLECTION,
        persist_directory=str(directory / CHROMA_DIR),
        ef_search=config.vector_store.ef_search,
    )


def _version_key(name: str) -> tuple[int, int] | None:
    match = _VERSION.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _complete_versions(directory: Path) -> list[Path]:
    """Published version folders whose records parse, oldest first."""
    found = []
    for entry in directory.iterdir():
        key = _version_key(entry.name)
        if key is None or entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            _read_json(entry / RECORDS)
        except IndexLoadError:
            continue
        found.append((key, entry))
    return [entry for _, entry in sorted(found)]


def _committed_version(directory: Path, *, recover: bool) -> tuple[Path | None, bool]:
    """The version folder `CURRENT` names; recovered if `CURRENT` is lost or damaged.

    Recovery takes the newest complete version not older than the one `CURRENT`
    named (when its name is still readable), and rewrites `CURRENT` if `recover`.
    A named version that is gone, with nothing as new to replace it, is an error.
    Returns the version (None: nothing committed yet) and whether it was recovered.
    """
    current_file = directory / CURRENT
    named: str | None = None
    try:
        named = current_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        named = None
    named_key = _version_key(named) if named else None
    if named and named_key is not None and (directory / named).is_dir():
        return directory / named, False
    candidates = [
        version
        for version in _complete_versions(directory)
        if named_key is None or _version_key(version.name) >= named_key  # type: ignore[operator]
    ]
    if not candidates:
        if named_key is not None:
            raise IndexLoadError(
                f"{current_file} names {named}, which is missing: the BM25 side is "
                f"gone. Run `ragbudget repair --index {directory}` to rebuild it "
                "from the vector store."
            )
        if current_file.exists() and any(
            _version_key(entry.name) for entry in directory.iterdir()
        ):
            raise IndexLoadError(
                f"{current_file} is damaged and no complete version folder is left; "
                f"run `ragbudget repair --index {directory}`"
            )
        return None, False
    version = candidates[-1]
    logger.warning(
        "%s: %s was missing or damaged; using the newest complete version %s",
        directory,
        CURRENT,
        version.name,
    )
    if recover:
        atomic_write_text(current_file, version.name)
    return version, True


def _remove_superseded(directory: Path, committed: Path | None) -> None:
    """Remove version folders older than the committed one; leave newer ones alone."""
    if committed is None:
        return
    committed_key = _version_key(committed.name)
    assert committed_key is not None
    for entry in directory.iterdir():
        key = _version_key(entry.name)
        if key is not None and key < committed_key and entry.is_dir():
            shutil.rmtree(entry)  # an interrupted or superseded save


def _load_sparse(
    directory: Path, version: Path | None, config: RagBudgetConfig
) -> tuple[dict[str, dict[str, Any]], BM25Retriever | None, dict[str, Any] | None]:
    """Records, BM25 index and manifest copy of the committed version.

    Raises IndexLoadError naming the first missing, truncated or unreadable file.
    """
    if version is None:
        return {}, None, None
    repair = f"run `ragbudget repair --index {directory}`"
    try:
        data = _read_json(version / RECORDS)
        records = data["documents"]
        if not isinstance(records, dict):
            raise TypeError("documents is not an object")
    except IndexLoadError as exc:
        raise IndexLoadError(f"{exc}; {repair}") from exc
    except (KeyError, TypeError) as exc:
        raise IndexLoadError(
            f"{version / RECORDS} is damaged ({exc!r}); {repair}"
        ) from exc
    for name, size in (data.get("files") or {}).items():
        path = version / name
        if not path.is_file():
            raise IndexLoadError(f"{path} is missing; {repair}")
        if path.stat().st_size != size:
            raise IndexLoadError(
                f"{path} is truncated or damaged ({path.stat().st_size} bytes, "
                f"{size} written); {repair}"
            )
    copy = data.get("manifest") if isinstance(data.get("manifest"), dict) else None
    if not (version / BM25_DIR).is_dir():
        if records:
            raise IndexLoadError(f"{version / BM25_DIR} is missing; {repair}")
        return records, None, copy
    try:
        sparse = BM25Retriever.load(
            version / BM25_DIR, k=config.retrieval.sparse.fetch_k
        )
    except Exception as exc:  # bm25s, numpy and json raise their own types
        raise IndexLoadError(
            f"{version / BM25_DIR} cannot be loaded ({type(exc).__name__}: {exc}); "
            f"{repair}"
        ) from exc
    recorded = {
        chunk_id for record in records.values() for chunk_id in record["chunks"]
    }
    if recorded != {str(chunk.id) for chunk in sparse.documents}:
        raise IndexLoadError(
            f"{version / RECORDS} and {version / BM25_DIR / BM25_DOCUMENTS} list "
            f"different chunks; {repair}"
        )
    return records, sparse, copy


@dataclass
class _SparseRead:
    version: Path | None = None
    records: dict[str, dict[str, Any]] | None = None
    chunks: dict[str, Document] = field(default_factory=dict)
    chunks_complete: bool = False
    manifest_copy: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)  # damage to the version's files
    notes: list[str] = field(default_factory=list)  # recovered without loss


def _read_sparse_tolerant(directory: Path, config: RagBudgetConfig) -> _SparseRead:
    """Whatever can be read of the sparse side, and what could not (for repair)."""
    read = _SparseRead()
    try:
        read.version, recovered = _committed_version(directory, recover=False)
    except IndexLoadError as exc:
        read.problems.append(str(exc))
        return read
    if read.version is None:
        read.problems.append(f"{directory}: no committed BM25 version found")
        return read
    if recovered:
        read.notes.append(
            f"{directory / CURRENT} is missing or damaged; using {read.version.name}"
        )
    try:
        data = _read_json(read.version / RECORDS)
        listed = data["documents"]
        read.records = listed if isinstance(listed, dict) else None
        if isinstance(data.get("manifest"), dict):
            read.manifest_copy = data["manifest"]
    except (IndexLoadError, KeyError, TypeError) as exc:
        read.problems.append(f"{read.version / RECORDS}: {exc}")
    documents = read.version / BM25_DIR / BM25_DOCUMENTS
    read.chunks_complete = True
    try:
        lines = documents.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
        if read.records is None or read.records:
            read.chunks_complete = False
            read.problems.append(f"{documents} is missing")
    except (OSError, UnicodeDecodeError) as exc:
        lines, read.chunks_complete = [], False
        read.problems.append(f"{documents}: {exc}")
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
            chunk = Document(
                page_content=row["page_content"], metadata=row["metadata"], id=row["id"]
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            read.chunks_complete = False
            read.problems.append(f"{documents}: line {number} is damaged")
            continue
        read.chunks[str(chunk.id)] = chunk
    if not read.problems:
        try:
            _load_sparse(directory, read.version, config)
        except IndexLoadError as exc:
            read.problems.append(str(exc))
    return read


def _check_hnsw(chroma: Path) -> None:
    """Refuse HNSW segment files chromadb would crash on (a short header segfaults)."""
    if not chroma.is_dir():
        return
    for segment in sorted(p for p in chroma.iterdir() if p.is_dir()):
        present = [name for name in _HNSW_FILES if (segment / name).exists()]
        if not present:
            continue
        repair = f"run `ragbudget repair --index {chroma.parent}` to re-embed"
        for name in _HNSW_FILES:
            if not (segment / name).is_file():
                raise IndexLoadError(f"{segment / name} is missing; {repair}")
        header = (segment / "header.bin").read_bytes()
        if len(header) != _HNSW_HEADER_SIZE:
            raise IndexLoadError(
                f"{segment / 'header.bin'} is damaged ({len(header)} bytes, "
                f"{_HNSW_HEADER_SIZE} expected); {repair}"
            )
        # Two layouts are seen on disk: a file sized for the segment's capacity
        # (max_elements, small segments, count still 0 in the header) or for
        # the elements it holds (count, once the segment has grown).
        capacity, count, size_per_element = struct.unpack_from("<12xQQQ", header)
        for name, unit in (("data_level0.bin", size_per_element), ("length.bin", 4)):
            found = (segment / name).stat().st_size
            sizes = {capacity * unit, count * unit} - ({0} if count else set())
            if found not in sizes:
                shown = " or ".join(str(size) for size in sorted(sizes))
                raise IndexLoadError(
                    f"{segment / name} is truncated or damaged ({found} bytes, "
                    f"{shown} expected); {repair}"
                )


def _open_dense(
    directory: Path,
    config: RagBudgetConfig,
    embeddings: Embeddings,
    *,
    may_create: bool,
) -> Chroma:
    """The vector store; IndexLoadError if its files are missing or unreadable."""
    settings = _vector_settings(config, directory)
    repair = f"run `ragbudget repair --index {directory}`"
    database = directory / CHROMA_DIR / CHROMA_DB
    if settings.host is None:
        if not database.is_file() and not may_create:
            raise IndexLoadError(
                f"{database} is missing: the vector side is gone; {repair} to "
                "re-embed it from BM25"
            )
        _check_hnsw(directory / CHROMA_DIR)
    try:
        store = build_vector_store(settings, embeddings)
    except Exception as exc:  # chromadb raises its own types for a broken database
        raise IndexLoadError(
            f"{database}: the vector store cannot be opened "
            f"({type(exc).__name__}: {exc}); {repair}"
        ) from exc
    from langchain_chroma import Chroma

    if not isinstance(store, Chroma):  # build_vector_store makes Chroma
        raise TypeError(f"expected a Chroma store, got {type(store)}")
    try:
        collection: Any = store._collection
        sample = collection.get(limit=1, include=["embeddings"])
        if len(sample["ids"]):
            collection.query(
                query_embeddings=[list(sample["embeddings"][0])],
                n_results=1,
                include=[],
            )
    except Exception as exc:
        _close_store(store)
        raise IndexLoadError(
            f"{database}: the vector store cannot be read "
            f"({type(exc).__name__}: {exc}); {repair}"
        ) from exc
    return store


def _dense_documents(store: Chroma) -> dict[str, Document]:
    """Every chunk the vector store holds, with its text and metadata."""
    try:
        found = _get_all(store, ["documents", "metadatas"])
    except Exception as exc:
        raise IndexLoadError(
            f"the vector store cannot be read ({type(exc).__name__}: {exc})"
        ) from exc
    return {
        chunk_id: Document(id=chunk_id, page_content=text or "", metadata=meta or {})
        for chunk_id, text, meta in zip(
            found["ids"], found["documents"], found["metadatas"], strict=True
        )
    }


def _close_store(store: Any) -> None:
    _close_client(getattr(store, "_client", None))


def _close_client(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # already closed, or a client without close()
            logger.debug("closing the Chroma client failed", exc_info=True)


def _release_chroma(folder: Path) -> None:
    """Stop any chromadb system still holding `folder` open in this process."""
    try:
        from chromadb.api.shared_system_client import SharedSystemClient
    except ImportError:  # pragma: no cover - chromadb moved it
        return
    systems = SharedSystemClient._identifier_to_system
    for identifier in list(systems):
        try:
            same = Path(identifier).resolve() == folder.resolve()
        except (OSError, ValueError):
            same = False
        if same:
            system = systems.pop(identifier)
            SharedSystemClient._identifier_to_refcount.pop(identifier, None)
            try:
                system.stop()
            except Exception:
                logger.debug("stopping chromadb for %s failed", folder, exc_info=True)


@dataclass
class _Merged:
    records: dict[str, dict[str, Any]]
    chunks: dict[str, Document]
    restored_to_bm25: list[str]
    needs_reingest: list[str]


def _merge(
    records: dict[str, dict[str, Any]] | None,
    sparse: dict[str, Document],
    dense: dict[str, Document],
) -> _Merged:
    """Both sides' chunks and the committed records into one consistent index.

    See the module docstring for the rules; nothing here writes.
    """
    chunks: dict[str, Document] = {}
    merged: dict[str, dict[str, Any]] = {}
    restored: list[str] = []
    reingest: list[str] = []
    for doc_id, record in (records or {}).items():
        kept = []
        for chunk_id in record.get("chunks", []):
            chunk = sparse.get(chunk_id)
            if chunk is None:
                candidate = dense.get(chunk_id)
                if candidate is not None and candidate.metadata.get(
                    "doc_hash", record.get("hash")
                ) == record.get("hash"):
                    chunk = candidate
                    restored.append(chunk_id)
            if chunk is not None:
                chunks[chunk_id] = chunk
                kept.append(chunk_id)
        entry = {**record, "chunks": kept}
        if len(kept) < len(record.get("chunks", [])) or not kept:
            entry["hash"] = None  # the next ingest re-adds it
            reingest.append(doc_id)
        merged[doc_id] = entry
    orphans: dict[str, dict[str, tuple[Document, bool]]] = {}
    for from_sparse, side in ((False, dense), (True, sparse)):  # BM25 wins on an id
        for chunk_id, chunk in side.items():
            if chunk_id in chunks:
                continue
            doc_id = str(chunk.metadata.get("doc_id") or chunk_id.rsplit("::", 1)[0])
            if doc_id in merged:
                continue  # superseded by the committed record of its document
            orphans.setdefault(doc_id, {})[chunk_id] = (chunk, from_sparse)
    for doc_id, found in sorted(orphans.items()):
        committed = {key: chunk for key, (chunk, sp) in found.items() if sp}
        if committed:
            hashes = {chunk.metadata.get("doc_hash") for chunk in committed.values()}
            version = hashes.pop() if len(hashes) == 1 else None
            picked = dict(committed)
            for key, (chunk, _) in found.items():
                if version is not None and chunk.metadata.get("doc_hash") == version:
                    picked.setdefault(key, chunk)
        else:
            picked = {key: chunk for key, (chunk, _) in found.items()}
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
        merged[doc_id] = {
            "hash": next(iter(hashes)) if complete else None,
            "chunks": ordered,
            "source": first.metadata.get("source", doc_id),
        }
        if not complete:
            reingest.append(doc_id)
        restored += [key for key in ordered if key not in sparse]
        chunks.update(picked)
    for chunk_id, chunk in list(chunks.items()):
        digest = content_hash(chunk.page_content)
        metadata = {**chunk.metadata, "doc_id": chunk.metadata.get("doc_id")}
        if metadata["doc_id"] is None:
            metadata["doc_id"] = chunk_id.rsplit("::", 1)[0]
        metadata.setdefault("chunk_id", chunk_id)
        metadata["content_hash"] = digest
        chunks[chunk_id] = Document(
            id=chunk_id, page_content=chunk.page_content, metadata=metadata
        )
    return _Merged(merged, chunks, sorted(restored), sorted(reingest))


def _position(chunk: Document) -> int:
    position = chunk.metadata.get("position")
    return position if isinstance(position, int) else 1 << 30


def _save_sparse(
    directory: Path,
    records: dict[str, dict[str, Any]],
    sparse: BM25Retriever | None,
    manifest: dict[str, Any],
) -> None:
    """Write a new version folder, then point CURRENT at it (atomic rename)."""
    version = f"sparse-{time.time_ns()}-{os.getpid()}"
    staging = directory / f".{version}.tmp"
    staging.mkdir(parents=True)
    if sparse is not None:
        sparse.save(staging / BM25_DIR)
    files = {
        item.relative_to(staging).as_posix(): item.stat().st_size
        for item in sorted(staging.rglob("*"))
        if item.is_file()
    }
    (staging / RECORDS).write_text(
        json.dumps(
            {
                "format": FORMAT_VERSION,
                "manifest": manifest,
                "files": files,
                "documents": records,
            }
        ),
        encoding="utf-8",
    )
    publish_folder(staging, directory / version)
    atomic_write_text(directory / CURRENT, version)
    _remove_superseded(directory, directory / version)


GET_PAGE = 5000  # records per read: chromadb passes every id of a read to SQLite


def _get_all(store: Chroma, include: list[str]) -> dict[str, list[Any]]:
    """Every record of the store, read in pages.

    One unpaged `get` fails past SQLite's limit of 32,766 variables ("too many
    SQL variables"), i.e. on any collection of more than about 32,000 chunks.
    """
    out: dict[str, list[Any]] = {"ids": [], **{name: [] for name in include}}
    offset = 0
    while True:
        page = store.get(include=include, limit=GET_PAGE, offset=offset)
        for name in out:
            out[name].extend(page[name] or [])
        if len(page["ids"]) < GET_PAGE:
            return out
        offset += GET_PAGE


def _delete_all(store: Chroma, ids: list[str]) -> None:
    """Delete `ids` in pages, for the same SQLite limit as `_get_all`."""
    for start in range(0, len(ids), GET_PAGE):
        store.delete(ids=ids[start : start + GET_PAGE])
