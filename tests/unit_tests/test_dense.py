"""Dense side on the real parts: fastembed ONNX (local model) and embedded Chroma."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document

from langchain_ragbudget import (
    DenseRetriever,
    FastEmbedEmbeddings,
    HybridRetriever,
    ModelUnavailableError,
    build_embeddings,
    load_config,
)
from langchain_ragbudget.config._settings import VectorStoreSettings
from langchain_ragbudget.ledger._records import LEDGER_KEY, drops_of
from langchain_ragbudget.retrieval._dense import add_documents, open_chroma
from langchain_ragbudget.retrieval._hybrid import ScoredSearch
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

DOCS = [
    Document(
        page_content="The cat sat on the warm mat.", metadata={"source": "a"}, id="a"
    ),
    Document(
        page_content="Stock markets fell sharply today.",
        metadata={"source": "b"},
        id="b",
    ),
    Document(
        page_content="Kittens like to sleep in the sun.",
        metadata={"source": "c"},
        id="c",
    ),
]


@pytest.fixture(scope="module")
def embeddings() -> FastEmbedEmbeddings:
    embedder = build_embeddings(load_config())
    assert isinstance(embedder, FastEmbedEmbeddings)
    return embedder


@pytest.mark.needs_embedding_model
def test_embeddings_are_normalised_minilm_vectors(
    embeddings: FastEmbedEmbeddings,
) -> None:
    vectors = embeddings.embed_documents(["a cat", "a dog", "stock prices"])
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert all(math.isclose(sum(x * x for x in v), 1.0, rel_tol=1e-4) for v in vectors)
    query = embeddings.embed_query("a cat")
    assert query == pytest.approx(vectors[0], abs=1e-5)


@pytest.mark.needs_embedding_model
def test_batches_are_bounded(
    embeddings: FastEmbedEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = embeddings._text_embedding()
    seen: list[int] = []
    original = model.embed

    def spy(texts: list[str], batch_size: int) -> object:
        seen.append(batch_size)
        return original(texts, batch_size=batch_size)

    monkeypatch.setattr(model, "embed", spy)
    embeddings.embed_documents(["x"] * 5)
    assert seen == [32]


def test_missing_local_model_is_a_clear_error(tmp_path: Path) -> None:
    embedder = FastEmbedEmbeddings(model_path=str(tmp_path))
    with pytest.raises(ModelUnavailableError, match=r"holds no model\.onnx"):
        embedder.embed_query("x")


@pytest.mark.needs_embedding_model
def test_dense_retriever_keeps_ids_and_scores(embeddings: FastEmbedEmbeddings) -> None:
    store = open_chroma(VectorStoreSettings(), embeddings)
    add_documents(store, DOCS, batch_size=2)
    results = DenseRetriever(vectorstore=store, k=2).invoke("a kitten sleeping")
    assert {d.id for d in results} == {"a", "c"}
    assert all(type(d.metadata["score"]) is float for d in results)
    assert results[0].metadata["score"] >= results[1].metadata["score"]


@pytest.mark.needs_embedding_model
def test_persistent_chroma_reopens(
    embeddings: FastEmbedEmbeddings, tmp_path: Path
) -> None:
    settings = VectorStoreSettings(
        collection="persisted", persist_directory=str(tmp_path / "db")
    )
    add_documents(open_chroma(settings, embeddings), DOCS)
    reopened = DenseRetriever(vectorstore=open_chroma(settings, embeddings), k=1)
    assert reopened.invoke("markets")[0].id == "b"


def _ef_search(store: Any) -> Any:
    """The collection's setting as Chroma has it now (a handle of its own)."""
    collection = store._client.get_collection(store._collection.name)
    return collection.configuration_json["hnsw"]["ef_search"]


@pytest.mark.needs_embedding_model
def test_ef_search_is_set_on_the_collection_and_kept(
    embeddings: FastEmbedEmbeddings, tmp_path: Path
) -> None:
    folder = str(tmp_path / "db")
    assert _ef_search(open_chroma(VectorStoreSettings(), embeddings)) == 200
    settings = VectorStoreSettings(
        collection="tuned", persist_directory=folder, ef_search=None
    )
    store = open_chroma(settings, embeddings)
    assert _ef_search(store) == 100  # None: Chroma's own, left alone
    add_documents(store, DOCS)
    wider = settings.model_copy(update={"ef_search": 250})
    searched = DenseRetriever(vectorstore=open_chroma(wider, embeddings), k=1)
    assert _ef_search(searched.vectorstore) == 250
    assert searched.invoke("markets")[0].id == "b"
    assert _ef_search(open_chroma(settings, embeddings)) == 250  # kept
    in_memory = open_chroma(VectorStoreSettings(ef_search=40), embeddings)
    assert _ef_search(in_memory) == 40


@pytest.mark.needs_embedding_model
def test_embedded_hybrid_end_to_end(embeddings: FastEmbedEmbeddings) -> None:
    config = load_config()
    results = HybridRetriever.from_config(
        config, documents=DOCS, embeddings=embeddings
    ).invoke("cat on a mat", k=2)
    top = results[0]
    assert top.id == "a"
    assert {
        "bm25_rank",
        "bm25_score",
        "dense_rank",
        "dense_score",
        "fused_score",
    } <= set(top.metadata)
    json.dumps([d.metadata for d in results])
    assert [r.key for r in drops_of(results)] in (["b"], ["c"])


@pytest.mark.needs_embedding_model
def test_docstore_path_matches_the_plain_path(embeddings: FastEmbedEmbeddings) -> None:
    store = open_chroma(VectorStoreSettings(), embeddings)
    add_documents(store, DOCS)
    plain = DenseRetriever(vectorstore=store, k=3).invoke("cats")
    docstore = {doc.id: doc for doc in DOCS if doc.id is not None}
    fast = DenseRetriever(vectorstore=store, k=3, docstore=docstore).invoke("cats")
    assert [(d.id, d.page_content) for d in fast] == [
        (d.id, d.page_content) for d in plain
    ]
    for fast_doc, plain_doc in zip(fast, plain, strict=True):
        assert fast_doc.metadata == pytest.approx(plain_doc.metadata)


@pytest.mark.needs_embedding_model
async def test_docstore_path_leaves_out_vectors_not_yet_committed(
    embeddings: FastEmbedEmbeddings,
) -> None:
    """Vectors the docstore lacks (a publish in progress) are not hits, not errors."""
    store = open_chroma(VectorStoreSettings(), embeddings)
    add_documents(store, DOCS)
    partial = {"a": DOCS[0]}
    retriever = DenseRetriever(vectorstore=store, k=3, docstore=partial)
    assert [d.id for d in await retriever.ainvoke("cats")] == ["a"]
    assert [d.id for d in await retriever.ainvoke("warm mat", k=1)] == ["a"]


@pytest.mark.needs_embedding_model
def test_the_collection_is_counted_only_when_a_hit_is_not_committed(
    embeddings: FastEmbedEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counting costs about a millisecond a query; a committed top k needs none."""
    store: Any = open_chroma(VectorStoreSettings(), embeddings)
    add_documents(store, DOCS)
    counted: list[int] = []
    collection_type = type(store._collection)
    real_count = collection_type.count

    def count(self: Any) -> int:
        counted.append(1)
        return int(real_count(self))

    monkeypatch.setattr(collection_type, "count", count)
    everything = {doc.id: doc for doc in DOCS if doc.id is not None}
    DenseRetriever(vectorstore=store, k=3, docstore=everything).invoke("cats")
    assert counted == []
    only_a = DenseRetriever(vectorstore=store, k=1, docstore={"a": DOCS[0]})
    assert [d.id for d in only_a.invoke("stock markets")] == ["a"]  # b ranks first
    assert counted == [1]


def test_docstore_needs_chroma(embeddings: FastEmbedEmbeddings) -> None:
    from langchain_core.vectorstores import InMemoryVectorStore

    with pytest.raises(ValueError, match="only used with a Chroma"):
        DenseRetriever(vectorstore=InMemoryVectorStore(embeddings), docstore={})


@pytest.mark.needs_embedding_model
def test_two_in_memory_builds_do_not_mix(embeddings: FastEmbedEmbeddings) -> None:
    config = load_config()
    first = HybridRetriever.from_config(
        config, documents=DOCS[:2], embeddings=embeddings
    )
    second = HybridRetriever.from_config(
        config, documents=DOCS[2:], embeddings=embeddings
    )
    assert {d.id for d in first.invoke("cat", k=5)} <= {"a", "b"}
    assert {d.id for d in second.invoke("cat", k=5)} == {"c"}


def test_embeddings_and_vector_store_swapped_by_config(tmp_path: Path) -> None:
    path = tmp_path / "swap.yml"
    path.write_text(
        "embedding:\n"
        "  provider: langchain_core.embeddings:DeterministicFakeEmbedding\n"
        "  options: {size: 32}\n"
        "vector_store:\n"
        "  provider: langchain_core.vectorstores:InMemoryVectorStore\n"
    )
    config = load_config(path)
    retriever = HybridRetriever.from_config(config, documents=DOCS)
    dense = retriever.retrievers[1]
    assert isinstance(dense, DenseRetriever)
    assert type(dense.vectorstore).__name__ == "InMemoryVectorStore"
    assert len(retriever.invoke("cat mat", k=3)) == 3
    assert all(
        type(d.metadata["dense_score"]) is float for d in retriever.invoke("cat")
    )


def test_a_provider_that_does_not_import_is_named(tmp_path: Path) -> None:
    from langchain_ragbudget import ConfigError

    path = tmp_path / "bad.yml"
    path.write_text("embedding:\n  provider: no_such_pkg.mod:Thing\n")
    with pytest.raises(
        ConfigError, match=r"bad\.yml: key 'embedding\.provider'.*no_such_pkg"
    ):
        load_config(path)
    path.write_text("embedding:\n  provider: not a path\n")
    with pytest.raises(ConfigError, match=r"embedding\.provider"):
        load_config(path)


async def test_store_without_relevance_function_async() -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    add_documents(store, DOCS)
    results = await DenseRetriever(vectorstore=store, k=2).ainvoke("cat")
    assert len(results) == 2 and all(
        type(d.metadata["score"]) is float for d in results
    )


def test_a_silent_chroma_server_times_out_with_a_clear_error() -> None:
    import socket
    import time

    from langchain_ragbudget.errors import VectorStoreUnavailableError

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()  # accepts connections, never answers: a stalled server
    port = listener.getsockname()[1]
    settings = VectorStoreSettings(host="127.0.0.1", port=port, timeout=0.5)
    start = time.monotonic()
    with pytest.raises(VectorStoreUnavailableError, match=f"127.0.0.1:{port}"):
        open_chroma(settings, build_embeddings(load_config()))
    assert time.monotonic() - start < 5
    listener.close()


class _RunRecorder(BaseCallbackHandler):
    """Records retriever runs, so the hybrid takes its traced path."""

    def __init__(self) -> None:
        self.retriever_runs: list[str] = []

    def on_retriever_start(self, serialized: Any, query: str, **kwargs: Any) -> None:
        self.retriever_runs.append(kwargs.get("name") or "")


def without_run(metadata: dict[str, object]) -> dict[str, object]:
    """Metadata minus the run id, which differs from run to run by design."""
    return {key: value for key, value in metadata.items() if key != LEDGER_KEY}


@pytest.mark.needs_embedding_model
def test_direct_hits_and_traced_child_runs_give_the_same_result(
    embeddings: FastEmbedEmbeddings,
) -> None:
    corpus = load_sample_corpus()
    hybrid = HybridRetriever.from_config(
        load_config(), documents=corpus, embeddings=embeddings
    )
    assert all(isinstance(r, ScoredSearch) for r in hybrid.retrievers)
    recorder = _RunRecorder()
    for query in ("How long are application logs retained?", "refund policy"):
        direct = hybrid.invoke(query, k=5)
        traced = hybrid.invoke(query, {"callbacks": [recorder]}, k=5)
        assert [d.id for d in direct] == [d.id for d in traced]
        assert [without_run(d.metadata) for d in direct] == [
            without_run(d.metadata) for d in traced
        ]
        assert [r.to_dict() for r in drops_of(direct)] == [
            r.to_dict() for r in drops_of(traced)
        ]
        assert len(drops_of(direct)) > 0
    # the traced path shows the hybrid run and one child run per retriever
    assert len(recorder.retriever_runs) == 2 * 3


@pytest.mark.needs_embedding_model
async def test_async_direct_hits_equal_the_sync_ones(
    embeddings: FastEmbedEmbeddings,
) -> None:
    corpus = load_sample_corpus()
    hybrid = HybridRetriever.from_config(
        load_config(), documents=corpus, embeddings=embeddings
    )
    for query in ("How long are application logs retained?", "refund policy"):
        sync = hybrid.invoke(query, k=5)
        not_sync = await hybrid.ainvoke(query, k=5)
        assert [d.id for d in not_sync] == [d.id for d in sync]
        assert [without_run(d.metadata) for d in not_sync] == [
            without_run(d.metadata) for d in sync
        ]
        assert [r.to_dict() for r in drops_of(not_sync)] == [
            r.to_dict() for r in drops_of(sync)
        ]
        assert len(drops_of(not_sync)) > 0


@pytest.mark.needs_embedding_model
def test_batch_from_threads_matches_one_by_one(
    embeddings: FastEmbedEmbeddings,
) -> None:
    # Runnable.batch runs invokes in a thread pool: BM25, the ONNX session and Chroma
    # are then used from several threads at once.
    corpus = load_sample_corpus()
    hybrid = HybridRetriever.from_config(
        load_config(), documents=corpus, embeddings=embeddings
    )
    questions = [q["question"] for q in load_sample_questions()][:12]
    one_by_one = [[d.id for d in hybrid.invoke(q, k=5)] for q in questions]
    batched = hybrid.batch(questions, {"max_concurrency": 4}, k=5)
    assert [[d.id for d in docs] for docs in batched] == one_by_one
    assert all(len(drops_of(docs)) > 0 for docs in batched)
