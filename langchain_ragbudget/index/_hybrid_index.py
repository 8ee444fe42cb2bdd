"""One index, two sides: BM25 and the vector store, kept in sync by source document.

LangChain's indexing API (`index()` with a record manager) cannot reach the BM25
side, hence this. The vector side is written first, then a new BM25 version is
published atomically; after a crash between the two, `repair` brings the sides
together without losing data.

One writer at a time: a writer takes the write lock before reading anything. A
reader never takes it and never waits: it reads the committed version, starts
again if a writer replaces it mid-read, and writes nothing while a writer holds
the lock, whose publish in progress is then reported, not taken for damage.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Iterator, Sequence, Sized
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget.config._settings import ConfigLike, RagBudgetConfig, as_config
from langchain_ragbudget.errors import (
    IndexLoadError,
    IndexRepairError,
    IndexWriteError,
    InvalidInputError,
)
from langchain_ragbudget.index._chroma import (
    CHROMA_DB,
    CHROMA_DIR,
    close_vector_store,
    delete_vectors,
    inspect_vector_store,
    open_vector_store,
    read_vector_chunks,
    read_vector_side,
    replace_vector_store,
    vector_hashes,
    vector_metadata,
)
from langchain_ragbudget.index._chunking import make_chunker
from langchain_ragbudget.index._folder_plan import (
    FolderPlan,
    check_found,
    not_indexed,
    plan_folder,
    read_files,
    remember_outcomes,
    root_for,
    scan_path,
)
from langchain_ragbudget.index._loaders import (
    DEFAULT_ENCODINGS,
    FileError,
    Scan,
    check_content,
    check_encodings,
)
from langchain_ragbudget.index._lock import (
    WriterLock,
    describe_holder,
    lock_holder,
    writer_active,
)
from langchain_ragbudget.index._merge import Merged, merge_sides
from langchain_ragbudget.index._reports import (
    IndexInspection,
    IngestSummary,
    RepairReport,
    SyncReport,
    chunk_hashes,
    compare_sides,
)
from langchain_ragbudget.index._versions import (
    MANIFEST,
    SalvagedVersion,
    bm25_as_configured,
    check_manifest,
    current_version_name,
    find_committed_version,
    holds_index,
    load_version,
    manifest_for,
    manifest_for_inspection,
    manifest_for_open,
    manifest_for_repair,
    move_damaged_version_aside,
    publish_version,
    remove_superseded,
    salvage_version,
    sizes_on_disk,
    version_key,
    write_manifest,
)
from langchain_ragbudget.index._write_errors import disk_errors_named
from langchain_ragbudget.ledger._identity import content_hash
from langchain_ragbudget.progress import ProgressCallback, StageProgress
from langchain_ragbudget.retrieval._dense import add_documents
from langchain_ragbudget.retrieval._embeddings import build_embeddings
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._sparse import BM25Retriever

if TYPE_CHECKING:  # chromadb takes most of a second to import: only when used
    from langchain_chroma import Chroma

logger = logging.getLogger(__name__)

CHUNKING = "chunking documents"  # progress stages of `upsert`
EMBEDDING = "embedding chunks"
READ_ATTEMPTS = 5  # a reader whose version a writer replaced mid-read starts again


class HybridIndex:
    """BM25 and a vector store over the same chunks, updated by source document.

    A changed document replaces all its chunks on both sides; unchanged content
    (same hash, both sides holding its chunks) is skipped. Open one with `open`
    or `repair_directory`, not the constructor; use it as a context manager, or
    call `close`, to release the embedded Chroma.

    Attributes:
        directory: The index folder.
        config: The configuration it was opened with.
        vectorstore: The Chroma store of the dense side.
        sync_report: How the two sides compared at the last open, commit or check.

    Example:
        .. code-block:: python

            from langchain_core.documents import Document
            from langchain_ragbudget import load_config
            from langchain_ragbudget.index import HybridIndex

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
        self._manifest = manifest if manifest is not None else manifest_for(config)
        self.vectorstore = vectorstore
        self._records = records
        self._chunks = chunks
        self._sparse: BM25Retriever | None = None
        self._chunker = make_chunker(config.index)
        self._pending_adds: dict[str, Document] = {}
        self._pending_deletes: list[str] = []
        self._dense_hashes: dict[str, str | None] = {}
        self.sync_report = SyncReport()
        self._lock = WriterLock(directory)
        self._version = current_version_name(directory)

    @classmethod
    def open(
        cls,
        directory: str | Path,
        config: ConfigLike = None,
        embeddings: Embeddings | None = None,
        *,
        create: bool = True,
        write: bool = False,
    ) -> HybridIndex:
        """Open the index in `directory`; create it if absent and `create` is true.

        Sides out of sync are logged and shown in `sync_report`, not refused.

        Args:
            directory: The index folder.
            config: The configuration; the shipped defaults if None.
            embeddings: The embedding model; built from `config` if None.
            create: Whether a folder holding no index may become a new one.
            write: Hold the write lock (waiting up to `index.lock_timeout`) until
                `close`, so nothing changes between what is read and published.

        Raises:
            IndexLoadError: No index here and `create` is false; a file, not a
                folder; another embedding model or chunking; a missing, truncated
                or unreadable file; or a vector side without its BM25 side.
            IndexLockedError: `write`, and another writer held the lock throughout.
        """
        config = as_config(config)
        path = Path(directory)
        if not holds_index(path) and not create:
            raise IndexLoadError(
                f"{path}: no index here ({MANIFEST} not found); check the path, "
                f"or create one with `ragbudget index FOLDER --index {path}`"
            )
        lock = WriterLock(path)
        if write:
            lock.acquire(config.index.lock_timeout)
        try:
            for attempt in range(1, READ_ATTEMPTS + 1):
                seen = current_version_name(path)
                try:
                    return cls._read(path, config, embeddings, create, lock)
                except (IndexLoadError, OSError):
                    if lock.held or attempt == READ_ATTEMPTS:
                        raise
                    if current_version_name(path) == seen and not writer_active(path):
                        raise
                    logger.info("%s: a writer published mid-read; reading again", path)
            raise AssertionError("unreachable: the last attempt returns or raises")
        except BaseException:
            lock.release()
            raise

    @classmethod
    def _read(
        cls,
        path: Path,
        config: RagBudgetConfig,
        embeddings: Embeddings | None,
        create: bool,
        lock: WriterLock,
    ) -> HybridIndex:
        """One attempt of `open`: read the committed version and both sides."""
        expected = manifest_for(config)
        busy = not lock.held and writer_active(path)
        if not holds_index(path):
            path.mkdir(parents=True, exist_ok=True)
            write_manifest(path, expected)
        version, recovered = find_committed_version(path, recover=not busy)
        if not recovered and not busy:  # after a recovery, committed is a guess
            remove_superseded(path, version)
        records, sparse, copy = load_version(path, version, config)
        manifest = manifest_for_open(path, expected, copy)
        sparse = bm25_as_configured(path, sparse, config)
        chunks = {str(c.id): c for c in sparse.documents} if sparse else {}
        vectorstore = open_vector_store(
            path,
            config,
            embeddings or build_embeddings(config),
            may_create=create and not records,
        )
        index = cls(path, config, vectorstore, records, chunks, manifest)
        index._version = version.name if version is not None else ""
        index._lock = lock
        index._sparse = sparse
        index.sync_report = index.sync_check()
        in_sync = index.sync_report.in_sync
        read = version.name if version is not None else ""
        if (
            not (lock.held or in_sync or recovered)
            and current_version_name(path) != read
        ):
            index.close()  # the vectors are a newer version's: `open` reads again
            raise IndexLoadError(
                f"{path}: a version newer than {read!r} was published mid-read"
            )
        writer = ""
        if not lock.held and not in_sync and writer_active(path):
            writer = describe_holder(lock_holder(path))
        if not records and index._dense_hashes and not lock.held:
            index.close()
            if writer:
                raise IndexLoadError(
                    f"{path}: a first index is being built by {writer}; no version "
                    "is committed yet. Try again when it finishes."
                )
            raise IndexLoadError(
                f"{path}: the BM25 side is missing (no committed version) but the "
                f"vector store holds {len(index._dense_hashes)} chunk(s); run "
                f"`ragbudget repair --index {path}` to rebuild it from the vector store"
            )
        if writer:
            index.sync_report = dataclasses.replace(index.sync_report, writer=writer)
        if not in_sync and not writer and not lock.held:  # a writer completes it
            logger.warning("index %s: %s", path, index.sync_report.summary())
        return index

    @classmethod
    def inspect(
        cls, directory: str | Path, config: ConfigLike = None
    ) -> IndexInspection:
        """Report what the index in `directory` holds, changing nothing.

        Unlike `open` it recovers nothing and reports damage in `problems`.
        chromadb writes to its files when it opens them, so the vector side is
        read from a temporary copy (the store's size in temporary space).

        Args:
            directory: The index folder.
            config: The configuration to compare the manifest with.

        Raises:
            IndexLoadError: `directory` does not exist, is a file, or holds no index.
        """
        config = as_config(config)
        path = Path(directory)
        if not holds_index(path):
            raise IndexLoadError(f"{path}: no index here ({MANIFEST} not found)")
        found = IndexInspection(path, sizes=sizes_on_disk(path))
        salvaged = salvage_version(path, config)
        writer = describe_holder(lock_holder(path)) if writer_active(path) else ""
        if salvaged.version is None and writer:  # a first build: nothing to damage
            found.building = writer
        else:
            found.problems += salvaged.notes + salvaged.problems
        if salvaged.version is not None:
            found.committed_version = salvaged.version.name
        found.other_versions = sorted(
            entry.name
            for entry in path.iterdir()
            if version_key(entry.name) is not None
            and entry.name != found.committed_version
        )
        found.moved_aside = sorted(
            e.name for e in path.iterdir() if e.name.startswith("damaged-")
        )
        if salvaged.records is not None:
            found.documents = len(salvaged.records)
            found.indexed = {
                key: len(record.get("chunks", ())) if isinstance(record, dict) else 0
                for key, record in salvaged.records.items()
            }
        found.refused, found.skipped = not_indexed(path)
        if salvaged.chunks_complete:
            found.bm25_chunks = len(salvaged.chunks)
        found.manifest = manifest_for_inspection(
            path, salvaged.manifest_copy, found.problems
        )
        if found.manifest:
            try:
                check_manifest(path / MANIFEST, found.manifest, manifest_for(config))
            except IndexLoadError as exc:
                found.problems.append(str(exc))
        _inspect_sides(found, salvaged, config, writer)
        return found

    @classmethod
    def repair_directory(
        cls,
        directory: str | Path,
        config: ConfigLike = None,
        embeddings: Embeddings | None = None,
    ) -> tuple[HybridIndex, RepairReport]:
        """Repair the index in `directory`, however damaged; return it open, reported.

        A side that cannot be read is rebuilt from the other; damaged files are
        moved aside (`damaged-*`), never deleted. The write lock is held until
        the repaired index is closed.

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
                index, report = cls._repair_locked(path, config, embeddings)
        except BaseException:
            lock.release()
            raise
        index._lock = lock  # held until the repaired index is closed
        return index, report

    @classmethod
    def _repair_locked(
        cls, path: Path, config: RagBudgetConfig, embeddings: Embeddings | None
    ) -> tuple[HybridIndex, RepairReport]:
        report = RepairReport()
        salvaged = salvage_version(path, config)
        report.problems += salvaged.notes + salvaged.problems
        manifest, rewrite = manifest_for_repair(
            path, manifest_for(config), salvaged.manifest_copy
        )
        if rewrite:
            report.problems.append(f"{path / MANIFEST} is missing or unreadable")
        embeddings = embeddings or build_embeddings(config)
        store: Chroma | None = None
        dense: dict[str, Document] | None = None
        try:
            store, dense = read_vector_side(path, config, embeddings)
        except IndexLoadError as exc:
            report.problems.append(str(exc))
        if dense is None and not salvaged.chunks_complete:
            raise IndexRepairError(
                f"{path}: neither side of the index can be read ("
                + "; ".join(report.problems)
                + "). Nothing was changed. Restore the folder from a backup, or "
                "index the files again into a new directory."
            )
        merged = merge_sides(salvaged.records, salvaged.chunks, dense or {})
        report.restored_to_bm25 = merged.restored_to_bm25
        report.needs_reingest = merged.needs_reingest
        if store is None:  # the vector side is unreadable: rebuild it aside
            store, aside = replace_vector_store(
                path, config, embeddings, report.problems[-1]
            )
            if aside is not None:
                report.moved_aside.append(str(aside))
        aside = move_damaged_version_aside(salvaged)
        if aside is not None:
            report.moved_aside.append(str(aside))
        if rewrite:
            write_manifest(path, manifest)
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

    def document_hash(self, doc_id: str) -> str | None:
        """A document's content hash (text and metadata), or None if not indexed."""
        record = self._records.get(doc_id)
        return None if record is None else str(record["hash"])

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
        write_manifest(self.directory, self._manifest)

    def close(self) -> None:
        """Release the embedded Chroma client and the write lock, if held."""
        close_vector_store(self.vectorstore)
        self._lock.release()

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """Hold the write lock for one write, unless `open(write=True)` holds it.

        A version another writer committed since is read first, so this write
        starts from it instead of overwriting it.
        """
        if self._lock.held:
            with self._reread_on_disk_error():
                yield
            return
        self._lock.acquire(self.config.index.lock_timeout)
        try:
            if current_version_name(self.directory) != self._version:
                self._reload()
            with self._reread_on_disk_error():
                yield
        finally:
            self._lock.release()

    @contextmanager
    def _reread_on_disk_error(self) -> Iterator[None]:
        """A full disk is `IndexWriteError`, after reading the committed version again.

        The failed write changed this object, not the committed version.
        """
        try:
            with disk_errors_named(self.directory, len(self._records)):
                yield
        except IndexWriteError:
            self._pending_adds, self._pending_deletes = {}, []
            try:
                self._reload()
            except Exception:  # the store may need space to read (chromadb compacts
                # its log first): the error says what to do; --debug shows this
                logger.debug(
                    "%s: could not read the index again", self.directory, exc_info=True
                )
            raise

    def _reload(self) -> None:
        """Read the committed version and the vector store again (under the lock)."""
        embeddings = self.vectorstore.embeddings
        close_vector_store(self.vectorstore)
        version, _ = find_committed_version(self.directory, recover=True)
        self._records, sparse, _ = load_version(self.directory, version, self.config)
        self._sparse = bm25_as_configured(self.directory, sparse, self.config)
        self._chunks = (
            {str(c.id): c for c in self._sparse.documents} if self._sparse else {}
        )
        self._version = version.name if version is not None else ""
        assert embeddings is not None
        self.vectorstore = open_vector_store(
            self.directory, self.config, embeddings, may_create=True
        )
        self.sync_report = self.sync_check()

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
        """Add new documents, replace changed ones (text or metadata), skip the rest.

        Empty or placeholder text is an error for that document, and removes it
        if it was indexed, so a blanked document stops answering. Everything is
        chunked before anything is embedded, so the embedding progress has a
        true total.

        Args:
            documents: Whole source documents with ids (`Document.id` or
                `metadata["doc_id"]`), chunked here.
            progress: Hears `CHUNKING`, then `EMBEDDING`.

        Raises:
            InvalidInputError: A document has no id.
        """
        summary = IngestSummary()
        total = len(documents) if isinstance(documents, Sized) else None
        with self._writing():
            chunked = StageProgress(progress, CHUNKING, total).start()
            for document in documents:
                self._upsert_one(_required_id(document), document, summary)
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

    def ingest(
        self,
        path: str | Path,
        *,
        exclude: Sequence[str] = (),
        prune: bool = False,
        progress: ProgressCallback | None = None,
        encodings: Sequence[str] = DEFAULT_ENCODINGS,
    ) -> IngestSummary:
        """Index a folder (or one file) as `ragbudget index` does.

        Ids are paths relative to the root folder the first ingest records; the
        summary names every file not indexed. The write lock is held from the
        plan to the last write.

        Args:
            path: The folder or file.
            exclude: Glob patterns of paths or names to leave out.
            prune: Delete indexed documents under `path` whose file is gone.
            progress: Hears the reading, chunking and embedding stages.
            encodings: Text encodings tried in order (`read_file`).

        Raises:
            InvalidInputError: `path` does not exist, holds nothing to index, or is
                outside the index's root folder.
        """
        given = Path(path)
        encodings = check_encodings(encodings)
        found = scan_path(given, exclude)
        check_found(found, given, prune=prune)
        with self._writing():  # the plan and its writes under one lock
            plan = self.plan_ingest(given, found, encodings)
            return self.ingest_plan(plan, prune=prune, progress=progress)

    def plan_ingest(
        self, given: Path, found: Scan, encodings: Sequence[str] = DEFAULT_ENCODINGS
    ) -> FolderPlan:
        """The ids of the files `found` under `given`, and the documents gone.

        Hold the write lock (`open(write=True)`) until `ingest_plan`, so the plan
        is still true when it is applied.

        Raises:
            InvalidInputError: `given` is outside the index's root folder.
        """
        root = self.root
        if root is None:  # the first ingest (or an index made before roots)
            root = root_for(given)
            self.set_root(root)
        return plan_folder(given, found, root, self.document_ids, encodings)

    def ingest_plan(
        self,
        plan: FolderPlan,
        *,
        prune: bool = False,
        progress: ProgressCallback | None = None,
    ) -> IngestSummary:
        """Read every file of `plan`, upsert them all, then delete the gone if `prune`.

        An unreadable file is listed in `unreadable` too: a failure, where an
        empty file is an expected refusal.
        """
        documents, read_errors = read_files(plan, progress)
        summary = self.upsert(documents, progress=progress)
        summary.errors[:0] = read_errors
        summary.unreadable = [error.path for error in read_errors]
        known = remember_outcomes(self.directory, plan, summary.errors)
        summary.reported_before = [key for key in known if key in summary.unreadable]
        summary.skipped = list(plan.skipped)
        if plan.gone and prune:
            before = self.chunk_count
            summary.deleted += self.delete(plan.gone)
            summary.chunks_deleted += before - self.chunk_count
        elif plan.gone:
            summary.missing = list(plan.gone)
        return summary

    def delete(self, doc_ids: Iterable[str]) -> list[str]:
        """Remove documents (all their chunks, both sides); return the ids removed."""
        wanted = list(doc_ids)
        with self._writing():
            removed = [doc_id for doc_id in wanted if doc_id in self._records]
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

        Adds are batched across documents (each Chroma write has a fixed cost). A
        chunk the store already holds with the same text is not embedded again:
        that resumes a run stopped before it published. A chunk deleted and added
        back unchanged (same text, same document version: a document a repair
        could not fully restore, re-read) keeps its vector.
        """
        unchanged = self._unchanged_vectors()
        self._pending_deletes = [
            chunk_id for chunk_id in self._pending_deletes if chunk_id not in unchanged
        ]
        if self._pending_deletes:
            delete_vectors(self.vectorstore, self._pending_deletes)
            for chunk_id in self._pending_deletes:
                self._dense_hashes.pop(chunk_id, None)
            self._pending_deletes = []
        for chunk_id, chunk in list(self._pending_adds.items()):
            # written by an earlier run that stopped before publishing: resume
            known = self._dense_hashes.get(chunk_id, "")
            if known and known == chunk.metadata.get("content_hash"):
                del self._pending_adds[chunk_id]
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

    def _unchanged_vectors(self) -> set[str]:
        """Pending deletes added back as the very chunk the store holds."""
        candidates = [
            chunk_id
            for chunk_id in self._pending_deletes
            if chunk_id in self._pending_adds
            and self._dense_hashes.get(chunk_id)
            == self._pending_adds[chunk_id].metadata.get("content_hash")
        ]
        if not candidates:
            return set()
        stored = vector_metadata(self.vectorstore, candidates)
        return {
            chunk_id
            for chunk_id in candidates
            if chunk_id in stored
            and stored[chunk_id].get("doc_hash")
            == self._pending_adds[chunk_id].metadata.get("doc_hash")
        }

    def commit(self, progress: ProgressCallback | None = None) -> None:
        """Write the vector side, then rebuild BM25 and save it atomically."""
        self._flush(progress)
        chunks = list(self._chunks.values())
        self._sparse = (
            BM25Retriever.from_config(self.config, documents=chunks) if chunks else None
        )
        self._version = publish_version(
            self.directory, self._records, self._sparse, self._manifest
        )
        self.sync_report = self._compare()

    def sync_check(self) -> SyncReport:
        """Compare the chunk ids and text hashes of the two sides."""
        try:
            self._dense_hashes = vector_hashes(self.vectorstore)
        except Exception as exc:  # chromadb raises its own types for a broken store
            raise IndexLoadError(
                f"{self.directory / CHROMA_DIR / CHROMA_DB}: the vector store cannot "
                f"be read ({type(exc).__name__}: {exc}); run `ragbudget repair "
                f"--index {self.directory}`"
            ) from exc
        return self._compare()

    def _compare(self) -> SyncReport:
        """Sync report from the vector-side hashes known to this process (no query)."""
        return compare_sides(self._dense_hashes, chunk_hashes(self._chunks))

    def repair(self) -> SyncReport:
        """Bring the two sides together without losing data; return what differed.

        `merge_sides` states the rules; `sync_report` holds the state after. For
        files that no longer open, use `repair_directory`.

        Raises:
            IndexLoadError: The vector store cannot be read.
        """
        with self._writing():
            report = self.sync_check()
            dense = read_vector_chunks(self.vectorstore)
            merged = merge_sides(self._records, self._chunks, dense)
            self._apply(merged, dense)
        return report

    def _apply(
        self, merged: Merged, dense: dict[str, Document]
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
            delete_vectors(self.vectorstore, removed + stale)
        add_documents(self.vectorstore, [merged.chunks[key] for key in written])
        self._records = merged.records
        self._chunks = merged.chunks
        self.commit()
        self.sync_report = self.sync_check()
        return written, removed

    def as_retriever(self, **overrides: Any) -> HybridRetriever:
        """A HybridRetriever over the committed chunks (`overrides`: fields, e.g. k).

        Raises:
            IndexLoadError: The index holds no chunks yet.
        """
        if self._sparse is None:
            raise IndexLoadError(
                f"index {self.directory} is empty: ingest documents first"
            )
        return HybridRetriever.from_config(
            self.config,
            sparse=self._sparse,
            vectorstore=self.vectorstore,
            chunk_store=self._chunks,
            **overrides,
        )


def _inspect_sides(
    found: IndexInspection,
    salvaged: SalvagedVersion,
    config: RagBudgetConfig,
    writer: str,
) -> None:
    """The vector side and how it compares with the committed chunks.

    A writer's chunks not yet published are its work in progress, not damage;
    while it builds the first version the store may be mid-write: read, not judged.
    """
    problems: list[str] = [] if found.building else found.problems
    dense = inspect_vector_store(
        found.directory, config, problems, bool(salvaged.chunks)
    )
    if dense is None:
        return
    found.vector_chunks = len(dense)
    if salvaged.chunks_complete and not found.building:
        sync = compare_sides(dense, chunk_hashes(salvaged.chunks))
        if writer and not sync.in_sync:
            sync = dataclasses.replace(sync, writer=writer)
        found.sync = sync


def _required_id(document: Document) -> str:
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
