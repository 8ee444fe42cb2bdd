"""What the index reports: sync state, repair, ingest and inspection results."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.index._loaders import FileError, Skipped
from langchain_ragbudget.index._versions import MANIFEST, version_key
from langchain_ragbudget.ledger._html import display, key_values, table
from langchain_ragbudget.ledger._names import display_name


@dataclass(frozen=True)
class SyncReport:
    """Chunks present on one side only, or with different text on the two sides.

    Attributes:
        only_dense: Chunk ids only the vector store holds.
        only_sparse: Chunk ids only BM25 holds.
        differing: Chunk ids both sides hold with different text hashes.
        writer: The write lock's holder when the difference is its write in
            progress, not damage.
    """

    only_dense: list[str] = field(default_factory=list)
    only_sparse: list[str] = field(default_factory=list)
    differing: list[str] = field(default_factory=list)
    writer: str = ""

    @property
    def in_sync(self) -> bool:
        """True when both sides hold the same chunks with the same text."""
        return not (self.only_dense or self.only_sparse or self.differing)

    def summary(self) -> str:
        """One line for logs and the CLI."""
        if self.in_sync:
            return "sparse and dense sides are in sync"
        if self.writer:
            return (
                f"a write by {self.writer} is in progress: answering from the last "
                f"committed version ({len(self.only_dense)} new chunk(s) not yet "
                "published)"
            )
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
        removed_superseded: Vector ids their document's committed record superseded.
        needs_reingest: Document ids not fully restored; the next index re-adds them.
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
                + ", ".join(map(display_name, self.needs_reingest[:10]))
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
        restored: Ids of unchanged documents whose chunks a side lacked, re-added.
        deleted: Ids of documents removed (e.g. blanked since the last ingest).
        errors: Documents refused, each with the reason.
        notes: Documents indexed with a remark (e.g. blank pieces left out).
        chunks_added: Chunks written.
        chunks_deleted: Chunks removed.
        skipped: Files of an ingested folder passed over on purpose.
        unreadable: Ids of files that could not be read (also in `errors`).
        missing: Indexed documents whose file is gone, kept (no prune).
        reported_before: Ids in `unreadable` the last ingest refused alike, their
            file unchanged since (not a new failure).
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    notes: list[FileError] = field(default_factory=list)
    chunks_added: int = 0
    chunks_deleted: int = 0
    skipped: list[Skipped] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    reported_before: list[str] = field(default_factory=list)


@dataclass
class IndexInspection:
    """What an index folder holds, read without changing it (`HybridIndex.inspect`).

    Attributes:
        directory: The index folder.
        documents: Source documents in the committed records (None: unreadable).
        bm25_chunks: Chunks on the BM25 side (None: unreadable).
        vector_chunks: Chunks in the vector store (None: unreadable).
        manifest: The manifest (or, if damaged, its committed copy).
        committed_version: The BM25 version folder `open` would read, or None.
        other_versions: Other version folders (an unfinished or superseded save).
        moved_aside: `damaged-*` entries a repair left for the user to delete.
        sync: How the two sides compare; None when a side cannot be read.
        sizes: Bytes on disk per top-level entry of the folder.
        problems: Damage and mismatches found, each naming its file and what to do.
        indexed: Chunk count by indexed document id (committed records).
        refused: Files the last ingest of their path refused, and why.
        skipped: Files the last ingest of their path skipped, and why.
        building: The writer building the first version, when one is.
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
    indexed: dict[str, int] = field(default_factory=dict)
    refused: list[FileError] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    building: str = ""

    @property
    def healthy(self) -> bool:
        """True when nothing is damaged.

        Both sides hold the same chunks, or the difference is a writer's work in
        progress (or its first build).
        """
        if self.problems:
            return False
        if self.building:
            return True
        return self.sync is not None and (self.sync.in_sync or bool(self.sync.writer))

    @property
    def size_bytes(self) -> int:
        """Bytes on disk of the whole folder."""
        return sum(self.sizes.values())

    @property
    def saved_at(self) -> str | None:
        """When the committed version was saved (UTC, ISO 8601), from its name."""
        key = version_key(self.committed_version or "")
        if key is None:
            return None
        return datetime.fromtimestamp(key[0] / 1e9, UTC).isoformat(timespec="seconds")

    def to_dict(self, *, documents: bool = False) -> dict[str, Any]:
        """A JSON-serialisable view, for `ragbudget inspect --json`.

        With `documents`, every file: indexed (with its chunk count), skipped and
        refused (with why), for `--documents`.
        """
        found = self._summary_dict()
        if documents:
            found["files"] = {
                "indexed": [
                    {"id": key, "chunks": count}
                    for key, count in sorted(self.indexed.items())
                ],
                "skipped": [
                    {"id": s.path, "reason": s.reason, "detail": s.detail}
                    for s in self.skipped
                ],
                "refused": [{"id": e.path, "problem": e.problem} for e in self.refused],
            }
        return found

    def _summary_dict(self) -> dict[str, Any]:
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
            "first_build_in_progress": self.building or None,
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
                *(
                    ["only in the vector store", display_name(k)]
                    for k in sync.only_dense
                ),
                *(["only in BM25", display_name(k)] for k in sync.only_sparse),
                *(["different text", display_name(k)] for k in sync.differing),
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


def chunk_hashes(chunks: dict[str, Document]) -> dict[str, str | None]:
    """Text hash by chunk id, as each chunk's metadata records it."""
    return {key: chunk.metadata.get("content_hash") for key, chunk in chunks.items()}


def compare_sides(
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
