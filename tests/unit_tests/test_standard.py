"""LangChain's standard retriever suite, run offline on the real embedded stack."""

from functools import cache
from typing import Any

import pytest
from langchain_core.retrievers import BaseRetriever
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragbudget import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    build_embeddings,
    load_config,
)
from langchain_ragbudget.config._settings import VectorStoreSettings
from langchain_ragbudget.retrieval._dense import add_documents, open_chroma
from langchain_ragbudget.sample import load_sample_corpus


@cache
def _parts() -> tuple[BM25Retriever, DenseRetriever]:
    corpus = load_sample_corpus()
    config = load_config()
    store = open_chroma(
        VectorStoreSettings(collection="standard-suite"), build_embeddings(config)
    )
    add_documents(store, corpus)
    return BM25Retriever.from_documents(corpus, k=20), DenseRetriever(
        vectorstore=store, k=20
    )


@pytest.mark.needs_embedding_model  # the dense half embeds the sample corpus
class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retrievers": list(_parts()), "k": 5}

    @property
    def retriever_query_example(self) -> str:
        return "How long are application logs retained?"


class TestBM25RetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return lambda **kwargs: BM25Retriever.from_documents(
            load_sample_corpus(), **kwargs
        )  # type: ignore[return-value]

    @property
    def retriever_query_example(self) -> str:
        return "API rate limit per key"
