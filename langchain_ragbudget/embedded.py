"""The embedded default: BM25 in process plus Chroma with local ONNX embeddings.

One laptop, no server, no API key. Pass your own `vectorstore` (a Chroma server, or
any LangChain VectorStore already filled) to run the same fusion against it.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore

from langchain_ragbudget.config import RagBudgetConfig, load_config
from langchain_ragbudget.dense import (
    DenseRetriever,
    add_documents,
    build_embeddings,
    build_vector_store,
    is_chroma,
)
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.inputs import check_passages
from langchain_ragbudget.sparse import BM25Retriever


def build_sparse_retriever(
    documents: Sequence[Document], config: RagBudgetConfig
) -> BM25Retriever:
    """BM25 over `documents` with the configured parameters and fetch size."""
    return BM25Retriever.from_documents(
        documents,
        k=config.retrieval.sparse.fetch_k,
        k1=config.sparse.k1,
        b=config.sparse.b,
        method=config.sparse.method,
        stemmer_language=config.sparse.stemmer,
        stopwords=config.sparse.stopwords,
    )


def build_hybrid_retriever(
    documents: Sequence[Document],
    config: RagBudgetConfig | None = None,
    *,
    vectorstore: VectorStore | None = None,
    embeddings: Embeddings | None = None,
    sparse: BM25Retriever | None = None,
) -> HybridRetriever:
    """BM25 + dense over `documents`, fused as configured.

    Without `vectorstore`, the configured Chroma is built and `documents` are
    embedded into it; with one, it is used as it is (already filled). With Chroma
    and ids on every document, the dense side reads documents from `documents`
    instead of from Chroma (faster; an id Chroma has and `documents` lacks is an
    error, since the two sides would disagree). `sparse` is a BM25 index already
    built over `documents` (e.g. loaded from the cache).
    """
    documents = check_passages(documents)
    config = config or load_config()
    if vectorstore is None:
        vectorstore = build_vector_store(
            config.vector_store, embeddings or build_embeddings(config.embedding)
        )
        add_documents(vectorstore, documents)
    docstore = {doc.id: doc for doc in documents if doc.id is not None}
    use_docstore = is_chroma(vectorstore) and len(docstore) == len(documents)
    retrieval = config.retrieval
    return HybridRetriever(
        retrievers=[
            sparse or build_sparse_retriever(documents, config),
            DenseRetriever(
                vectorstore=vectorstore,
                k=retrieval.dense.fetch_k,
                docstore=docstore if use_docstore else None,
            ),
        ],
        names=["bm25", "dense"],
        weights=[retrieval.sparse.weight, retrieval.dense.weight],
        k=retrieval.k,
        c=retrieval.rrf_c,
        id_key=retrieval.id_key,
    )
