"""The sparse side chosen in YAML by class path, like embeddings and vector store."""

from pathlib import Path

import pytest
from keyword_retriever import KeywordRetriever
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_ragbudget import (
    BM25Retriever,
    ConfigError,
    HybridRetriever,
    RagBudgetConfig,
    build_embeddings,
    load_config,
)
from langchain_ragbudget.ledger._records import drops_of
from langchain_ragbudget.sample import load_sample_corpus

KEYWORD = "keyword_retriever:KeywordRetriever"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragbudget.yml"
    path.write_text(text, encoding="utf-8")
    return path


def sparse_side(config: RagBudgetConfig) -> BaseRetriever:
    """The sparse side `HybridRetriever.from_config` builds over the sample.

    The dense side gets an empty store: nothing is embedded, no model loads.
    """
    store = InMemoryVectorStore(embedding=build_embeddings(config))
    hybrid = HybridRetriever.from_config(
        config, documents=load_sample_corpus(), vectorstore=store
    )
    return hybrid.retrievers[0]


def test_class_path_builds_that_retriever_over_the_passages(tmp_path: Path) -> None:
    config = load_config(
        write(tmp_path, f"sparse:\n  provider: {KEYWORD}\n  options:\n    k: 3\n")
    )
    corpus = load_sample_corpus()
    sparse = sparse_side(config)
    assert isinstance(sparse, KeywordRetriever)
    assert sparse.made_with == {"k": 3} and len(sparse.documents) == len(corpus)
    hits = sparse.invoke("How long are application logs retained?")
    assert len(hits) == 3 and hits[0].id == "data-retention-policy::0"


def test_fetch_k_is_its_k_unless_options_set_one(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            f"sparse:\n  provider: {KEYWORD}\nretrieval:\n  sparse:\n    fetch_k: 7\n",
        )
    )
    sparse = sparse_side(config)
    assert isinstance(sparse, KeywordRetriever) and sparse.k == 7


@pytest.mark.needs_embedding_model
def test_hybrid_fuses_the_configured_sparse_retriever(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, f"sparse:\n  provider: {KEYWORD}\n"))
    hybrid = HybridRetriever.from_config(config, documents=load_sample_corpus())
    assert isinstance(hybrid.retrievers[0], KeywordRetriever)
    top = hybrid.invoke("How long are application logs retained?", k=3)
    assert top[0].id == "data-retention-policy::0"
    assert "bm25_rank" in top[0].metadata and "dense_rank" in top[0].metadata
    assert len(drops_of(top)) > 0  # fusion still reports what it cut


def test_a_class_that_is_no_retriever_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "sparse:\n  provider: collections:OrderedDict\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "sparse.provider"
    assert "BaseRetriever" in str(caught.value)


def test_options_the_class_refuses_are_named(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            f"sparse:\n  provider: {KEYWORD}\n  options:\n    k: not-a-number\n",
        )
    )
    with pytest.raises(ConfigError) as caught:
        sparse_side(config)
    assert caught.value.key == "sparse.options"
    assert "not-a-number" in str(caught.value)


def test_the_bm25s_index_refuses_rather_than_ignore_a_class_path(
    tmp_path: Path,
) -> None:
    config = load_config(write(tmp_path, f"sparse:\n  provider: {KEYWORD}\n"))
    with pytest.raises(ConfigError) as caught:
        BM25Retriever.from_config(config, documents=load_sample_corpus())
    assert caught.value.key == "sparse.provider"
