"""The Chroma adapter of the index: the vector side opened, checked, read, released.

Opening checks what chromadb would crash on or fail late with: the database file,
the HNSW segment files (a short header makes hnswlib segfault) and one read and
query.
"""

from __future__ import annotations

import logging
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget.config._settings import RagBudgetConfig, VectorStoreSettings
from langchain_ragbudget.errors import IndexLoadError, IndexRepairError
from langchain_ragbudget.retrieval._dense import connect_chroma_server, open_chroma

if TYPE_CHECKING:  # chromadb takes most of a second to import: only when used
    from langchain_chroma import Chroma

logger = logging.getLogger(__name__)

CHROMA_DIR = "chroma"
CHROMA_DB = "chroma.sqlite3"
COLLECTION = "ragbudget-index"
GET_PAGE = 5000  # records per read: chromadb passes every id of a read to SQLite
_HNSW_FILES = ("header.bin", "data_level0.bin", "length.bin", "link_lists.bin")
_HNSW_HEADER_SIZE = 100  # chromadb's hnswlib: int32 version, then the index header


def _vector_settings(config: RagBudgetConfig, directory: Path) -> VectorStoreSettings:
    if config.vector_store.host is not None:
        return config.vector_store
    return VectorStoreSettings(
        collection=COLLECTION,
        persist_directory=str(directory / CHROMA_DIR),
        ef_search=config.vector_store.ef_search,
    )


def open_vector_store(
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
        store = open_chroma(settings, embeddings)
    except Exception as exc:  # chromadb raises its own types for a broken database
        raise IndexLoadError(
            f"{database}: the vector store cannot be opened "
            f"({type(exc).__name__}: {exc}); {repair}"
        ) from exc
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
        close_vector_store(store)
        raise IndexLoadError(
            f"{database}: the vector store cannot be read "
            f"({type(exc).__name__}: {exc}); {repair}"
        ) from exc
    return store


def read_vector_side(
    directory: Path, config: RagBudgetConfig, embeddings: Embeddings
) -> tuple[Chroma, dict[str, Document]]:
    """The open vector store and every chunk it holds, for a repair.

    Raises:
        IndexLoadError: It is missing or cannot be read (the store is closed).
    """
    store = open_vector_store(directory, config, embeddings, may_create=False)
    try:
        return store, read_vector_chunks(store)
    except IndexLoadError:
        close_vector_store(store)
        raise


def replace_vector_store(
    directory: Path, config: RagBudgetConfig, embeddings: Embeddings, problem: str
) -> tuple[Chroma, Path | None]:
    """An empty vector store in place of an unreadable one, moved aside (returned).

    Nothing is deleted: the damaged folder becomes `damaged-chroma-<ns>`.

    Raises:
        IndexRepairError: The store is a server's (`problem` says why it failed).
    """
    if config.vector_store.host is not None:
        raise IndexRepairError(
            f"the vector store server cannot be read ({problem}); nothing was changed"
        )
    damaged = directory / CHROMA_DIR
    aside = None
    if damaged.exists():
        release_chroma(damaged)
        aside = directory / f"damaged-{CHROMA_DIR}-{time.time_ns()}"
        os.rename(damaged, aside)
    return open_vector_store(directory, config, embeddings, may_create=True), aside


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


def read_vector_chunks(store: Chroma) -> dict[str, Document]:
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


def inspect_vector_store(
    directory: Path, config: RagBudgetConfig, problems: list[str], expected: bool
) -> dict[str, str | None] | None:
    """Text hash by chunk id on the vector side, read without writing to it.

    None (a problem noted) when unreadable; {} when there is none, as `expected`.
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
            return vector_hashes(collection)
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
                return vector_hashes(client.get_collection(COLLECTION))
            finally:
                _close_client(client)
                release_chroma(copy)
    except IndexLoadError as exc:
        problems.append(f"{str(exc).split('; run ')[0]}; {repair}")
    except Exception as exc:  # chromadb raises its own types for a broken store
        problems.append(
            f"{database}: the vector store cannot be read "
            f"({type(exc).__name__}: {exc}); {repair}"
        )
    return None


def vector_hashes(store: Any) -> dict[str, str | None]:
    """Text hash by chunk id of a Chroma store or a chromadb collection."""
    found = _get_all(store, ["metadatas"])
    return {
        chunk_id: (meta or {}).get("content_hash")
        for chunk_id, meta in zip(found["ids"], found["metadatas"], strict=True)
    }


def vector_metadata(store: Chroma, ids: list[str]) -> dict[str, dict[str, Any]]:
    """The stored metadata of the chunks `ids` (those the store holds), in pages."""
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), GET_PAGE):
        page = store.get(ids=ids[start : start + GET_PAGE], include=["metadatas"])
        for chunk_id, meta in zip(page["ids"], page["metadatas"] or [], strict=True):
            found[chunk_id] = dict(meta or {})
    return found


def _get_all(store: Chroma, include: list[str]) -> dict[str, list[Any]]:
    """Every record, in pages: one `get` would pass SQLite's variable limit."""
    out: dict[str, list[Any]] = {"ids": [], **{name: [] for name in include}}
    offset = 0
    while True:
        page = store.get(include=include, limit=GET_PAGE, offset=offset)
        for name in out:
            out[name].extend(page[name] or [])
        if len(page["ids"]) < GET_PAGE:
            return out
        offset += GET_PAGE


def delete_vectors(store: Chroma, ids: list[str]) -> None:
    """Delete `ids` in pages, for the same SQLite limit as `_get_all`."""
    for start in range(0, len(ids), GET_PAGE):
        store.delete(ids=ids[start : start + GET_PAGE])


def close_vector_store(store: Any) -> None:
    """Close the store's Chroma client, so its files are released."""
    _close_client(getattr(store, "_client", None))


def _close_client(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # already closed, or a client without close()
            logger.debug("closing the Chroma client failed", exc_info=True)


def release_chroma(folder: Path) -> None:
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
            # chromadb 1.5.4 and later count references; older ones do not
            refcounts = getattr(SharedSystemClient, "_identifier_to_refcount", {})
            refcounts.pop(identifier, None)
            try:
                system.stop()
            except Exception:
                logger.debug("stopping chromadb for %s failed", folder, exc_info=True)
