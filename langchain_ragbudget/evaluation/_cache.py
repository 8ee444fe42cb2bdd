"""On-disk cache of corpus indexes, keyed by corpus content and model or settings.

Embedding a corpus is the slow part of a run. A folder counts as cached only once
its manifest is written, last, so an interrupted build is redone, not trusted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from langchain_ragbudget.config._disk import atomic_write_text, cache_root
from langchain_ragbudget.config._settings import (
    EmbeddingSettings,
    RagBudgetConfig,
    VectorStoreSettings,
)
from langchain_ragbudget.progress import ProgressCallback, StageProgress
from langchain_ragbudget.retrieval._dense import (
    CHROMA_DEFAULT_EF_SEARCH,
    add_documents,
    open_chroma,
)
from langchain_ragbudget.retrieval._embeddings import build_embeddings
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._sparse import BM25Retriever

_MANIFEST = "ragbudget_cache.json"
_Built = TypeVar("_Built")
EMBEDDING_CORPUS = "embedding corpus"


def corpus_fingerprint(documents: Sequence[Document], model: str) -> str:
    """sha256 over every id and text, in order, and the embedding model name."""
    digest = hashlib.sha256(model.encode("utf-8"))
    for document in documents:
        digest.update(b"\x00" + str(document.id).encode("utf-8"))
        digest.update(b"\x01" + document.page_content.encode("utf-8"))
    return digest.hexdigest()[:20]


def cached_sparse_retriever(
    documents: Sequence[Document],
    config: RagBudgetConfig,
    *,
    name: str = "corpus",
    root: Path | None = None,
) -> BM25Retriever:
    """A BM25 index over `documents`, built once per content and BM25 settings."""
    settings = config.sparse.model_dump_json()
    key = corpus_fingerprint(documents, f"bm25 {settings}")
    folder = (root or cache_root()) / f"{name}-bm25-{key}"
    fetch_k = config.retrieval.sparse.fetch_k

    def build() -> BM25Retriever:
        retriever = BM25Retriever.from_config(config, documents=documents)
        retriever.save(folder)
        return retriever

    return _built_once(
        folder,
        {"documents": len(documents), "sparse": settings, "key": key},
        lambda: BM25Retriever.load(folder, k=fetch_k),
        build,
    )


def _built_once(
    folder: Path,
    manifest: dict[str, object],
    open_cached: Callable[[], _Built],
    build: Callable[[], _Built],
) -> _Built:
    """What `folder` holds: opened if a build finished there, else built afresh."""
    if (folder / _MANIFEST).is_file():
        return open_cached()
    if folder.exists():
        shutil.rmtree(folder)
    built = build()
    atomic_write_text(folder / _MANIFEST, json.dumps(manifest))
    return built


def vector_store_folder(
    documents: Sequence[Document],
    embedding: EmbeddingSettings,
    name: str = "corpus",
    root: Path | None = None,
) -> Path:
    """The Chroma folder `cached_vector_store` keeps `documents` in."""
    key = corpus_fingerprint(documents, embedding.model)
    return _store_folder(name, key, root) / "chroma"


def _store_folder(name: str, key: str, root: Path | None) -> Path:
    return (root or cache_root()) / f"{name}-{key}"


def cached_vector_store(
    documents: Sequence[Document],
    embedding: EmbeddingSettings,
    embeddings: Embeddings,
    *,
    name: str = "corpus",
    root: Path | None = None,
    progress: ProgressCallback | None = None,
    ef_search: int | None = None,
) -> VectorStore:
    """A persistent Chroma holding `documents`, embedded once per content and model.

    `ef_search` (None: Chroma's default) is set every time, so no run inherits
    the one before it.
    """
    key = corpus_fingerprint(documents, embedding.model)
    folder = _store_folder(name, key, root)
    settings = VectorStoreSettings(
        collection=f"{name[:40]}-{key[:12]}",
        persist_directory=str(folder / "chroma"),
        ef_search=ef_search or CHROMA_DEFAULT_EF_SEARCH,
    )

    def build() -> VectorStore:
        folder.mkdir(parents=True)
        store = open_chroma(settings, embeddings)
        embedded = StageProgress(progress, EMBEDDING_CORPUS, len(documents)).start()
        add_documents(store, documents, on_batch=embedded.advance)
        return store

    return _built_once(
        folder,
        {"documents": len(documents), "model": embedding.model, "key": key},
        lambda: open_chroma(settings, embeddings),
        build,
    )


def cached_hybrid_retriever(
    documents: Sequence[Document],
    config: RagBudgetConfig,
    *,
    name: str = "corpus",
    root: Path | None = None,
    progress: ProgressCallback | None = None,
) -> HybridRetriever:
    """BM25 and dense over `documents` from the caches, fused as configured."""
    store = cached_vector_store(
        documents,
        config.embedding,
        build_embeddings(config),
        name=name,
        root=root,
        progress=progress,
        ef_search=config.vector_store.ef_search,
    )
    sparse = cached_sparse_retriever(documents, config, name=name, root=root)
    return HybridRetriever.from_config(
        config, documents=documents, vectorstore=store, sparse=sparse
    )
