"""Opening an index folder: the committed version, read without a writer's help.

`open_directory` is `HybridIndex.open`. A writer (`write=True`) takes the write
lock before reading anything. A reader never takes it and never waits: it reads
the version `CURRENT` names; if a writer replaces that version mid-read (its
files are removed once superseded), the reader starts again from the new one.
While a writer holds the lock, a reader writes nothing to the folder (no
recovery of `CURRENT`, no clean-up) and a difference between the two sides is
that writer's publish in progress, reported in `SyncReport.writer`, not damage;
searches answer from the committed chunks (the dense side drops vector ids the
committed version does not hold).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_core.embeddings import Embeddings

from langchain_ragbudget.config._settings import ConfigLike, RagBudgetConfig, as_config
from langchain_ragbudget.errors import IndexLoadError
from langchain_ragbudget.index._chroma import open_dense
from langchain_ragbudget.index._lock import (
    WriterLock,
    describe_holder,
    lock_holder,
    writer_active,
)
from langchain_ragbudget.index._versions import (
    CURRENT,
    MANIFEST,
    as_configured,
    find_committed_version,
    holds_index,
    load_manifest,
    load_sparse,
    manifest_of,
    remove_superseded,
    write_manifest,
)
from langchain_ragbudget.retrieval._embeddings import build_embeddings

if TYPE_CHECKING:
    from langchain_ragbudget.index._hybrid_index import HybridIndex

logger = logging.getLogger(__name__)

READ_ATTEMPTS = 5  # a reader whose version a writer replaced mid-read starts again


def open_directory(
    cls: type[HybridIndex],
    directory: str | Path,
    config: ConfigLike,
    embeddings: Embeddings | None,
    create: bool,
    write: bool,
) -> HybridIndex:
    """`HybridIndex.open`: take the lock if writing, then read (again if replaced)."""
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
            seen = current_name(path)
            try:
                return _load(cls, path, config, embeddings, create, lock)
            except (IndexLoadError, OSError):
                if lock.held or attempt == READ_ATTEMPTS:
                    raise
                if current_name(path) == seen and not writer_active(path):
                    raise
                logger.info("%s: a writer published mid-read; reading again", path)
        raise AssertionError("unreachable: the last attempt returns or raises")
    except BaseException:
        lock.release()
        raise


def _load(
    cls: type[HybridIndex],
    path: Path,
    config: RagBudgetConfig,
    embeddings: Embeddings | None,
    create: bool,
    lock: WriterLock,
) -> HybridIndex:
    """One attempt of `open`: read the committed version and both sides."""
    expected = manifest_of(config)
    busy = not lock.held and writer_active(path)
    if not holds_index(path):
        path.mkdir(parents=True, exist_ok=True)
        write_manifest(path, expected)
    version, recovered = find_committed_version(path, recover=not busy)
    if not recovered and not busy:  # after a recovery, committed is a guess
        remove_superseded(path, version)
    records, sparse, copy = load_sparse(path, version, config)
    manifest = load_manifest(path, expected, copy)
    sparse = as_configured(path, sparse, config)
    chunks = {str(c.id): c for c in sparse.documents} if sparse else {}
    vectorstore = open_dense(
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


def current_name(directory: Path) -> str:
    """The version `CURRENT` names now ("" when none or unreadable)."""
    try:
        return (directory / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
