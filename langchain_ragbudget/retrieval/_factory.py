"""Configuration to objects: the one place that wires the pipeline.

Embeddings, vector store, BM25, the hybrid retriever, the reranker, each surface's
budget and the chat model are built here from a loaded `RagBudgetConfig`, and only
here are the retrievers given their names (`_metadata_keys.SPARSE` and `.DENSE`),
which become the metadata keys later stages read. A surface whose weak-evidence check
names a score no stage writes is refused here, not ignored at query time.

The embedded default runs on one laptop: BM25 in process, Chroma embedded, local ONNX
embeddings. Pass your own `vectorstore` (a Chroma server, or any LangChain
VectorStore already filled) to run the same fusion against it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore

from langchain_ragbudget.config._fields import import_provider
from langchain_ragbudget.config._settings import (
    EmbeddingSettings,
    RagBudgetConfig,
    VectorStoreSettings,
    as_config,
)
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.ledger._metadata_keys import (
    DENSE,
    FUSED_SCORE,
    RERANK_SCORE,
    SPARSE,
    score_key,
)
from langchain_ragbudget.ledger._validation import check_passages
from langchain_ragbudget.retrieval._dense import (
    DenseRetriever,
    add_documents,
    connect_chroma_server,
    is_chroma,
)
from langchain_ragbudget.retrieval._embeddings import FastEmbedEmbeddings
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._rerank import FlashRankRerank
from langchain_ragbudget.retrieval._sparse import BM25Retriever

ConfigLike = RagBudgetConfig | str | Path | None
"""What every builder takes as its config: a loaded one, a YAML file, or None."""
RETRIEVER_NAMES = (SPARSE, DENSE)  # the order of HybridRetriever.retrievers
DEFAULT_CHAT_MODEL = "openai:gpt-4o-mini"  # when only OPENAI_API_KEY is set
# The embedding settings FastEmbedEmbeddings takes under the same names.
_FASTEMBED_FIELDS = {
    "model_path",
    "cache_dir",
    "batch_size",
    "threads",
    "query_precision",
}


def build_embeddings(settings: EmbeddingSettings | ConfigLike = None) -> Embeddings:
    """The configured embedding model (fastembed ONNX by default).

    Args:
        settings: The `embedding` section of a loaded config, or a config (a
            loaded one, a YAML file, or None for the shipped defaults).

    Returns:
        A `FastEmbedEmbeddings` (its model loads on first use), or an instance of
        the configured `package.module:Class` provider, made with `options`.
    """
    if not isinstance(settings, EmbeddingSettings):
        settings = as_config(settings).embedding
    if settings.provider != "fastembed":
        provider = import_provider(settings.provider)
        embeddings: Embeddings = provider(**settings.options)
        return embeddings
    same_names = settings.model_dump(include=_FASTEMBED_FIELDS)
    return FastEmbedEmbeddings(model_name=settings.model, **same_names)


def build_vector_store(
    settings: VectorStoreSettings | ConfigLike, embeddings: Embeddings
) -> VectorStore:
    """Chroma: in memory, embedded in a folder, or a server, as configured.

    In memory, every call gets a collection of its own (chromadb shares in-memory
    collections across clients of one process, so two corpora would mix).
    Telemetry is off: it would be a network call nobody asked for.

    Args:
        settings: The `vector_store` section of a loaded config, or a config (a
            loaded one, a YAML file, or None for the shipped defaults).
        embeddings: The embedding model the store uses.

    Returns:
        A Chroma store (cosine distance, and `ef_search` set on its collection when
        configured), or an instance of the configured
        `package.module:Class` provider, made with `embedding` and `options`.

    Raises:
        VectorStoreUnavailableError: A Chroma server (`host` set) cannot be
            reached within `timeout`.
    """
    if not isinstance(settings, VectorStoreSettings):
        settings = as_config(settings).vector_store
    if settings.provider != "chroma":
        provider = import_provider(settings.provider)
        store: VectorStore = provider(embedding=embeddings, **settings.options)
        return store
    from chromadb.config import Settings
    from langchain_chroma import Chroma

    client_settings = Settings(anonymized_telemetry=False)
    common: dict[str, Any] = {
        "collection_name": settings.collection,
        "embedding_function": embeddings,
        "collection_metadata": {"hnsw:space": "cosine"},
    }
    if settings.host is not None:
        client = connect_chroma_server(settings, client_settings)
        chroma = Chroma(client=client, **common)
    else:
        if settings.persist_directory is None:
            name = f"{settings.collection}-{uuid.uuid4().hex[:12]}"
            common["collection_name"] = name
        chroma = Chroma(
            persist_directory=settings.persist_directory,
            client_settings=client_settings,
            **common,
        )
    if settings.ef_search is not None:
        _set_ef_search(chroma._client, chroma._collection.name, settings.ef_search)
    return chroma


CHROMA_DEFAULT_EF_SEARCH = 100
"""Chroma's own HNSW `ef_search` for a new collection (not a setting of ours)."""


def _set_ef_search(client: Any, collection: str, ef_search: int) -> None:
    """Set a collection's HNSW search breadth, before its index is first loaded.

    Chroma keeps it in the collection's configuration (so a persistent index, or a
    server's collection, keeps it for later opens too); it is written only when it
    differs, through a handle of its own: the handle that modifies marks its
    embedding function "legacy", and langchain-chroma would warn of it per query.
    """
    handle = client.get_collection(collection)
    hnsw = (handle.configuration_json or {}).get("hnsw") or {}
    if hnsw.get("ef_search") != ef_search:
        handle.modify(configuration={"hnsw": {"ef_search": ef_search}})


def build_sparse_retriever(
    documents: Sequence[Document], config: ConfigLike = None
) -> BM25Retriever:
    """BM25 (bm25s) over `documents` with the configured parameters and fetch size.

    Raises:
        ConfigError: `sparse.provider` names another class: the on-disk index and
            the corpus caches keep a bm25s side of their own, and would otherwise
            ignore that setting in silence.
    """
    config = as_config(config)
    if config.sparse.provider != "bm25s":
        raise ConfigError(
            config.source,
            "sparse.provider",
            config.sparse.provider,
            "the on-disk index and corpus caches keep their own bm25s side; a "
            "class-path sparse retriever is used by build_hybrid_retriever",
        )
    return BM25Retriever.from_documents(
        documents, k=config.retrieval.sparse.fetch_k, **bm25_settings(config)
    )


def bm25_settings(config: RagBudgetConfig) -> dict[str, Any]:
    """The `BM25Retriever` fields the configuration's `sparse` section sets."""
    sparse = config.sparse
    return {
        "k1": sparse.k1,
        "b": sparse.b,
        "method": sparse.method,
        "stemmer_language": sparse.stemmer,
        "stopwords": sparse.stopwords,
        "index_title": sparse.index_title,
    }


def build_sparse_side(
    documents: Sequence[Document], config: ConfigLike = None
) -> BaseRetriever:
    """The configured sparse retriever: bm25s, or the `sparse.provider` class.

    A class with `from_documents` indexes `documents` (as bm25s does); one without
    is made with `options` alone, for a server that already holds the passages.
    `retrieval.sparse.fetch_k` becomes its `k` when it has that field and `options`
    does not set one.

    Raises:
        ConfigError: The class refuses `options` (named with the file and key).
    """
    config = as_config(config)
    settings = config.sparse
    if settings.provider == "bm25s":
        return build_sparse_retriever(documents, config)
    provider = import_provider(settings.provider)
    options = dict(settings.options)
    if "k" in getattr(provider, "model_fields", {}):
        options.setdefault("k", config.retrieval.sparse.fetch_k)
    try:
        if hasattr(provider, "from_documents"):
            retriever: BaseRetriever = provider.from_documents(documents, **options)
        else:
            retriever = provider(**options)
    except (TypeError, ValueError) as exc:  # pydantic's ValidationError included
        raise ConfigError(
            config.source,
            "sparse.options",
            settings.options,
            f"{settings.provider} refused them: {type(exc).__name__}: {exc}",
        ) from exc
    return retriever


def hybrid_retriever(
    sparse: BaseRetriever,
    vectorstore: VectorStore,
    config: ConfigLike = None,
    docstore: Mapping[str, Document] | None = None,
    **overrides: Any,
) -> HybridRetriever:
    """BM25 and dense search over `vectorstore`, fused as configured.

    Args:
        sparse: A sparse retriever (BM25, or any retriever) over the same
            passages as `vectorstore`.
        vectorstore: Any LangChain vector store, filled.
        config: The configuration (weights, fetch sizes, k, fusion, rrf_c,
            id_key): a loaded one, a YAML file, or None for the shipped defaults.
        docstore: Passages by id, so a Chroma store is asked for ids and distances
            only (the sparse side already holds the texts), and the neighbours
            of retrieved chunks come from it (`retrieval.neighbours`).
        **overrides: HybridRetriever fields to set instead (e.g. `k`).

    Returns:
        A HybridRetriever whose metadata names the retrievers `bm25` and `dense`.
    """
    retrieval = as_config(config).retrieval
    settings: dict[str, Any] = {
        "retrievers": [
            sparse,
            DenseRetriever(
                vectorstore=vectorstore, k=retrieval.dense.fetch_k, docstore=docstore
            ),
        ],
        "names": list(RETRIEVER_NAMES),
        "weights": [retrieval.sparse.weight, retrieval.dense.weight],
        "k": retrieval.k,
        "fusion": retrieval.fusion,
        "rrf_c": retrieval.rrf_c,
        "id_key": retrieval.id_key,
        "chunk_store": docstore,
        "neighbours": retrieval.neighbours,
    }
    return HybridRetriever(**{**settings, **overrides})


def build_hybrid_retriever(
    documents: Sequence[Document],
    config: ConfigLike = None,
    *,
    vectorstore: VectorStore | None = None,
    embeddings: Embeddings | None = None,
    sparse: BaseRetriever | None = None,
) -> HybridRetriever:
    """BM25 + dense over `documents`, fused as configured.

    Args:
        documents: The passages to search; each needs text (an empty one is refused).
        config: A loaded configuration, a YAML file, or None for the shipped
            defaults.
        vectorstore: A store already holding `documents`; when None, the configured
            Chroma is built and `documents` are added to it.
        embeddings: The embedding model for a new store (else built from config).
        sparse: A sparse retriever already built over `documents` (e.g. BM25 from
            a cache); when None, `sparse.provider` is built.

    Returns:
        The hybrid retriever. With Chroma and ids on every document, the dense side
        reads texts from `documents` instead of from Chroma (faster; an id Chroma has
        and `documents` lacks is an error, since the two sides would disagree).

    Raises:
        InvalidInputError: A document is not a Document or has no text.
        ValueError: `documents` is empty, or no document has a word BM25 can
            index (when `sparse` is not given).
        ModelUnavailableError: The embedding model cannot be loaded (when the
            documents are embedded into a new store).
        VectorStoreUnavailableError: The configured Chroma server cannot be
            reached.
        ConfigError: The `sparse.provider` class refuses its `options`.
    """
    documents = check_passages(documents)
    config = as_config(config)
    if vectorstore is None:
        vectorstore = build_vector_store(
            config.vector_store, embeddings or build_embeddings(config.embedding)
        )
        add_documents(vectorstore, documents)
    docstore = {doc.id: doc for doc in documents if doc.id is not None}
    use_docstore = is_chroma(vectorstore) and len(docstore) == len(documents)
    return hybrid_retriever(
        sparse or build_sparse_side(documents, config),
        vectorstore,
        config,
        docstore if use_docstore else None,
    )


def build_reranker(config: ConfigLike = None, **kwargs: Any) -> FlashRankRerank | None:
    """The configured rerank stage, or None when `rerank.enabled` is false.

    Use it rather than `FlashRankRerank.from_config`, which builds the stage
    whatever `enabled` says: with `enabled: false` there is no rerank stage, so
    no model download is tried and no answer carries a rerank warning.

    Args:
        config: A loaded configuration, a YAML file, or None for the shipped
            defaults.
        **kwargs: Fields of the stage to set instead (`FlashRankRerank.from_config`).

    Raises:
        ConfigError: The file is invalid.
        ModelUnavailableError: The model cannot be had and
            `rerank.on_unavailable` is `error`.
    """
    config = as_config(config)
    if not config.rerank.enabled:
        return None
    return FlashRankRerank.from_config(config, **kwargs)


def produced_score_keys(names: Sequence[str] = RETRIEVER_NAMES) -> set[str]:
    """Every score key the pipeline's stages can write, for retrievers `names`."""
    return {RERANK_SCORE, FUSED_SCORE, *(score_key(name) for name in names)}
