from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragbudget import build_embeddings, load_config
from langchain_ragbudget.evaluation import _cache as cache
from langchain_ragbudget.evaluation._cache import (
    cached_sparse_retriever,
    cached_vector_store,
    corpus_fingerprint,
    vector_store_folder,
)
from langchain_ragbudget.retrieval._dense import CHROMA_DEFAULT_EF_SEARCH

DOCS = [
    Document(id="a", page_content="Solar panels make electricity."),
    Document(id="b", page_content="Bread needs flour and water."),
]


class CountingEmbeddings:
    """Wraps the real embedder and counts the texts it embeds."""

    def __init__(self) -> None:
        self.inner = build_embeddings(load_config())
        self.embedded = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_fingerprint_follows_content_ids_and_model() -> None:
    base = corpus_fingerprint(DOCS, "m")
    assert corpus_fingerprint(list(DOCS), "m") == base
    assert corpus_fingerprint(DOCS, "other") != base
    changed = [DOCS[0], Document(id="b", page_content="Bread needs yeast.")]
    assert corpus_fingerprint(changed, "m") != base


@pytest.mark.needs_embedding_model
def test_vector_store_is_embedded_once(tmp_path: Path) -> None:
    settings = load_config().embedding
    embeddings = CountingEmbeddings()
    first = cached_vector_store(DOCS, settings, embeddings, root=tmp_path)  # type: ignore[arg-type]
    second = cached_vector_store(DOCS, settings, embeddings, root=tmp_path)  # type: ignore[arg-type]
    assert embeddings.embedded == 2
    assert second.similarity_search("electricity", k=1)[0].id == "a"
    assert first is not second
    folder = vector_store_folder(DOCS, settings, root=tmp_path)
    assert (folder / "chroma.sqlite3").is_file()
    assert vector_store_folder(DOCS[:1], settings, root=tmp_path) != folder


@pytest.mark.needs_embedding_model
def test_a_cached_store_never_inherits_the_last_run_s_ef_search(
    tmp_path: Path,
) -> None:
    settings = load_config().embedding
    embeddings = CountingEmbeddings()

    def ef_search(store: Any) -> Any:
        collection = store._client.get_collection(store._collection.name)
        return collection.configuration_json["hnsw"]["ef_search"]

    wide = cached_vector_store(DOCS, settings, embeddings, root=tmp_path, ef_search=300)  # type: ignore[arg-type]
    assert ef_search(wide) == 300
    plain = cached_vector_store(DOCS, settings, embeddings, root=tmp_path)  # type: ignore[arg-type]
    assert ef_search(plain) == CHROMA_DEFAULT_EF_SEARCH
    assert embeddings.embedded == 2


@pytest.mark.needs_embedding_model
def test_interrupted_build_is_redone(tmp_path: Path) -> None:
    settings = load_config().embedding
    key = corpus_fingerprint(DOCS, settings.model)
    (tmp_path / f"corpus-{key}" / "chroma").mkdir(
        parents=True
    )  # no manifest: unfinished
    embeddings = CountingEmbeddings()
    cached_vector_store(DOCS, settings, embeddings, root=tmp_path)  # type: ignore[arg-type]
    assert embeddings.embedded == 2


def test_bm25_is_loaded_not_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = load_config()
    built = cached_sparse_retriever(DOCS, config, root=tmp_path)

    def no_rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("rebuilt instead of loaded")

    monkeypatch.setattr(cache.BM25Retriever, "from_config", no_rebuild)
    loaded = cached_sparse_retriever(DOCS, config, root=tmp_path)
    assert loaded.invoke("solar") == built.invoke("solar")
    assert loaded.k == config.retrieval.sparse.fetch_k
