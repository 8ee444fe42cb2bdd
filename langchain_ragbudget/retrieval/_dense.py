"""Dense retrieval: any LangChain vector store, Chroma embedded by default.

Unlike `VectorStore.as_retriever()`, the relevance score stays in metadata. It
calls the store's `_similarity_search_with_relevance_scores` hook, since the
public wrapper warns on every negative cosine, a normal value; a store without a
relevance function gives its raw `similarity_search_with_score`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.runnables.config import run_in_executor
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, Field, model_validator

from langchain_ragbudget.config._fields import import_provider
from langchain_ragbudget.config._settings import (
    ConfigLike,
    VectorStoreSettings,
    as_config,
)
from langchain_ragbudget.config._timeouts import call_with_timeout
from langchain_ragbudget.errors import VectorStoreUnavailableError
from langchain_ragbudget.ledger._identity import with_scores
from langchain_ragbudget.ledger._validation import check_query
from langchain_ragbudget.retrieval._embeddings import embedding_progress
from langchain_ragbudget.retrieval._scored import ScoredRetriever

if TYPE_CHECKING:  # chromadb takes most of a second to import: only when used
    from langchain_chroma import Chroma

ADD_BATCH_SIZE = 256

logger = logging.getLogger(__name__)


class DenseRetriever(ScoredRetriever):
    """Top-`k` similarity search on any VectorStore, relevance score in metadata.

    Attributes:
        vectorstore: Any LangChain vector store, already filled.
        k: Documents returned (a call's `k` overrides it).
        score_key: The metadata key the relevance score is written to.
        docstore: Documents by id, for a Chroma store only: Chroma is then asked
            for ids and distances alone (no decoding), and a hit the docstore
            lacks (a publish not yet committed) is left out.

    Raises:
        ValueError: On creation, a `docstore` with a store that is not Chroma.
    """

    vectorstore: VectorStore
    k: int = Field(4, ge=1)
    score_key: str = "score"
    docstore: Mapping[str, Document] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @model_validator(mode="after")
    def _docstore_needs_chroma(self) -> DenseRetriever:
        if self.docstore is not None and not is_chroma(self.vectorstore):
            raise ValueError(
                "docstore is only used with a Chroma vector store; got "
                f"{type(self.vectorstore).__name__}"
            )
        return self

    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        """The top `k` documents and their relevance scores; no callbacks."""
        check_query(query)
        size = self.k if k is None else k
        if size < 1:
            raise ValueError(f"k must be at least 1, got {size}")
        if self.docstore is not None:
            return self._ids_search(query, size)
        store = self.vectorstore
        try:
            return store._similarity_search_with_relevance_scores(query, k=size)
        except NotImplementedError:  # the store has no relevance function
            return store.similarity_search_with_score(query, k=size)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        check_query(query)
        size = self.k if k is None else k
        store = self.vectorstore
        if self.docstore is not None:
            pairs = await run_in_executor(None, self._ids_search, query, size)
        else:
            try:
                pairs = await store._asimilarity_search_with_relevance_scores(
                    query, k=size
                )
            except NotImplementedError:  # the store has no relevance function
                pairs = await store.asimilarity_search_with_score(query, k=size)
        return with_scores(pairs, self.score_key)

    def _ids_search(self, query: str, k: int) -> list[tuple[Document, float]]:
        """Chroma ids and distances only; documents come from the docstore.

        When uncommitted vectors are among the first `k`, ask again for as many
        more as the collection holds beyond the committed chunks (counting costs
        a millisecond, so only then).
        """
        assert self.docstore is not None
        store: Any = self.vectorstore
        vector = store.embeddings.embed_query(query)
        pairs, unknown, returned = self._committed_hits(vector, k)
        if unknown and returned == k:
            extra = max(0, store._collection.count() - len(self.docstore))
            pairs, unknown, returned = self._committed_hits(vector, k + extra)
        if unknown:
            logger.info("%d vector id(s) not in the committed chunks left out", unknown)
        return pairs[:k]

    def _committed_hits(
        self, vector: list[float], n: int
    ) -> tuple[list[tuple[Document, float]], int, int]:
        """Committed hits among Chroma's first `n`, the uncommitted count, the total."""
        assert self.docstore is not None
        store: Any = self.vectorstore
        found = store._collection.query(
            query_embeddings=[vector], n_results=n, include=["distances"]
        )
        relevance = store._select_relevance_score_fn()
        docstore = self.docstore
        pairs = []
        unknown = 0
        ids, distances = found["ids"][0], found["distances"][0]
        for doc_id, distance in zip(ids, distances, strict=True):
            document = docstore.get(doc_id)
            if document is None:  # written by a publish not yet committed
                unknown += 1
                continue
            pairs.append((document, relevance(distance)))
        return pairs, unknown, len(ids)


def is_chroma(store: VectorStore) -> bool:
    """Whether `store` is langchain-chroma's Chroma (imported lazily)."""
    from langchain_chroma import Chroma

    return isinstance(store, Chroma)


def build_vector_store(config: ConfigLike, embeddings: Embeddings) -> VectorStore:
    """The configured vector store: Chroma (in memory, in a folder, or a server).

    Args:
        config: A configuration, a YAML file, or None; its `vector_store` is used.
        embeddings: The embedding model the store uses.

    Raises:
        ConfigError: The file is invalid (before anything is built).
        VectorStoreUnavailableError: A Chroma server (`host` set) cannot be
            reached within `timeout`.
    """
    settings = as_config(config).vector_store
    if settings.provider == "chroma":
        return open_chroma(settings, embeddings)
    provider = import_provider(settings.provider)
    store: VectorStore = provider(embedding=embeddings, **settings.options)
    return store


CHROMA_DEFAULT_EF_SEARCH = 100
"""Chroma's own HNSW `ef_search` for a new collection (not a setting of ours)."""


def open_chroma(settings: VectorStoreSettings, embeddings: Embeddings) -> Chroma:
    """A cosine Chroma store as `settings` describe it, whatever their `provider`.

    In memory, every call gets a collection of its own (chromadb shares in-memory
    collections within a process, so two corpora would mix). Telemetry is off:
    a network call nobody asked for.

    Raises:
        VectorStoreUnavailableError: A Chroma server (`host` set) cannot be
            reached within `timeout`.
    """
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


def _set_ef_search(client: Any, collection: str, ef_search: int) -> None:
    """Set a collection's HNSW search breadth, before its index is first loaded.

    Written only when it differs, through a handle of its own: the handle that
    modifies marks its embedding function "legacy", which langchain-chroma would
    warn of per query.
    """
    handle = client.get_collection(collection)
    hnsw = (handle.configuration_json or {}).get("hnsw") or {}
    if hnsw.get("ef_search") != ef_search:
        handle.modify(configuration={"hnsw": {"ef_search": ef_search}})


def connect_chroma_server(settings: VectorStoreSettings, client_settings: Any) -> Any:
    """A chromadb HttpClient whose every request has `settings.timeout`.

    chromadb's httpx session has `timeout=None` and its constructor calls the
    server, so the constructor runs under a timeout and the session gets one.
    """
    import chromadb
    import httpx

    host = str(settings.host)
    address = f"Chroma server {host}:{settings.port}"
    try:
        client = call_with_timeout(
            lambda: chromadb.HttpClient(
                host=host, port=settings.port, settings=client_settings
            ),
            settings.timeout,
            f"connecting to {address}",
        )
    except Exception as exc:
        raise VectorStoreUnavailableError(
            f"cannot reach {address} ({type(exc).__name__}: {exc}); check "
            "vector_store.host and port, or unset host for the embedded store"
        ) from exc
    session = getattr(getattr(client, "_server", None), "_session", None)
    if not isinstance(session, httpx.Client):
        raise VectorStoreUnavailableError(
            "this chromadb version's HTTP client cannot be given a timeout"
        )
    session.timeout = httpx.Timeout(settings.timeout)
    return client


def add_documents(
    vectorstore: VectorStore,
    documents: Sequence[Document],
    batch_size: int | None = None,
    on_batch: Callable[[int], None] | None = None,
) -> None:
    """Add documents in bounded batches, shortest first (each batch pads less).

    `on_batch` hears how many were embedded: every `EMBEDDED_STEP` with this
    package's embeddings, else once per batch.
    """
    size = batch_size or ADD_BATCH_SIZE
    documents = sorted(documents, key=lambda doc: len(doc.page_content))
    for start in range(0, len(documents), size):
        batch = list(documents[start : start + size])
        ids = [doc.id for doc in batch]
        heard: list[int] = []
        hook = None if on_batch is None else _both(heard.append, on_batch)
        with embedding_progress(hook):
            vectorstore.add_documents(
                batch, ids=ids if all(i is not None for i in ids) else None
            )
        if on_batch is not None and sum(heard) < len(batch):  # other embeddings
            on_batch(len(batch) - sum(heard))


def _both(
    first: Callable[[int], None], second: Callable[[int], None]
) -> Callable[[int], None]:
    def call(count: int) -> None:
        first(count)
        second(count)

    return call
