"""One config shape: every public builder and `from_config` takes a loaded config,
a YAML path or None; `build_reranker` honours `rerank.enabled: false`.

Real parts (bm25s, embedded Chroma, fastembed ONNX, the budget); the chat model is
a fake (`GenericFakeChatModel`) standing in for an LLM API that cannot run here.
"""

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from langchain_ragbudget import (
    BM25Retriever,
    ContextBudget,
    FlashRankRerank,
    HybridRetriever,
    build_embeddings,
    build_hybrid_retriever,
    build_reranker,
    build_vector_store,
    create_budgeted_rag_chain,
    load_config,
    load_surface,
)
from langchain_ragbudget.chain._factory import build_budget, build_chat_model
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.retrieval._factory import (
    build_sparse_retriever,
    build_sparse_side,
    hybrid_retriever,
)


def corpus() -> list[Document]:
    texts = [
        "Solar panels turn sunlight into electricity.",
        "Bread rises because yeast ferments sugar.",
        "Tides follow the moon.",
        "Wind turbines turn moving air into electricity.",
    ]
    return [
        Document(id=f"d{i}::0", page_content=t, metadata={"doc_id": f"d{i}"})
        for i, t in enumerate(texts)
    ]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A config whose every value checked below differs from the defaults."""
    empty = tmp_path / "no-models"
    empty.mkdir()
    file = tmp_path / "ragbudget.yml"
    file.write_text(
        "retrieval:\n  k: 3\n  sparse:\n    fetch_k: 2\n  dense:\n    fetch_k: 2\n"
        "rerank:\n  enabled: false\n  top_n: 3\n"
        f"  cache_dir: {empty}\n  download: false\n"
        "embedding:\n  batch_size: 7\n"
        "llm:\n  max_tokens: 123\n"
        "surfaces:\n  chat:\n    max_docs: 2\n    max_tokens: 333\n",
        encoding="utf-8",
    )
    return file


def test_budget_and_surface_take_a_path(path: Path) -> None:
    assert ContextBudget.from_config(path).settings.max_tokens == 333
    assert build_budget(path).settings.max_tokens == 333
    assert load_surface(path, name="chat").max_docs == 2
    assert load_surface(str(path), name="chat") == load_config(path).surface("chat")
    assert (
        load_surface(name="search").max_docs == load_config().surface("search").max_docs
    )


def test_load_surface_takes_name_by_keyword_only(path: Path) -> None:
    with pytest.raises(TypeError):
        old_order: Any = load_surface
        old_order("chat", path)


def test_sparse_builders_take_a_path_or_none(path: Path) -> None:
    assert build_sparse_retriever(corpus(), path).k == 2
    sparse = build_sparse_side(corpus(), str(path))
    assert isinstance(sparse, BM25Retriever)
    assert sparse.k == 2
    assert build_sparse_retriever(corpus()).k == load_config().retrieval.sparse.fetch_k


def test_embeddings_and_chat_model_take_a_config(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embeddings = build_embeddings(path)
    assert getattr(embeddings, "batch_size", None) == 7
    assert getattr(build_embeddings(load_config(path)), "batch_size", None) == 7
    assert getattr(build_embeddings(load_config().embedding), "batch_size", None) == 32
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert build_chat_model(path) is None  # llm.model is null: no model configured


@pytest.mark.needs_embedding_model
def test_hybrid_builders_take_a_path(path: Path) -> None:
    documents = corpus()
    built = build_hybrid_retriever(documents, path)
    assert built.k == 3
    assert len(built.invoke("electricity from sunlight")) <= 3
    made = HybridRetriever.from_config(str(path), documents=documents)
    assert made.k == 3
    assert [d.id for d in made.invoke("yeast bread")][:1] == ["d1::0"]
    embeddings: Embeddings = build_embeddings(path)
    store = build_vector_store(path, embeddings)
    store.add_documents(documents, ids=[str(d.id) for d in documents])
    fused = hybrid_retriever(build_sparse_retriever(documents, path), store, path)
    assert fused.k == 3


@pytest.mark.needs_tiktoken
def test_disabled_rerank_is_no_stage_and_no_warning(path: Path) -> None:
    assert build_reranker(path) is None
    assert build_reranker(load_config(path)) is None

    def answer(reranker: FlashRankRerank | None) -> str:
        chain = create_budgeted_rag_chain(
            BM25Retriever.from_documents(corpus(), k=3),
            GenericFakeChatModel(messages=iter([AIMessage(content="Sunlight [1].")])),
            budget=ContextBudget.from_config(path),
            reranker=reranker,
        )
        return str(chain.invoke("solar electricity"))

    assert "rerank stage skipped" not in answer(build_reranker(path))
    # what the old recipe did: the stage is built whatever `enabled` says, and
    # offline (no model, no download) every answer carries the warning
    assert "rerank stage skipped" in answer(FlashRankRerank.from_config(path))


def test_enabled_rerank_is_built_from_a_path(tmp_path: Path) -> None:
    file = tmp_path / "on.yml"
    file.write_text(
        f"rerank:\n  top_n: 5\n  cache_dir: {tmp_path}\n  download: false\n",
        encoding="utf-8",
    )
    stage = build_reranker(file)
    assert isinstance(stage, FlashRankRerank)
    assert stage.top_n == 5


def test_build_budget_checks_every_surface_a_call_can_switch_to(
    tmp_path: Path,
) -> None:
    """`search`'s check reads a score no stage writes: refused even for `chat`."""
    file = tmp_path / "ragbudget.yml"
    file.write_text(
        "surfaces:\n  search:\n    weak_evidence:\n"
        "      thresholds: {dense_scor: 0.3}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        build_budget(file, surface="chat")
    assert caught.value.key == "surfaces.search.weak_evidence.thresholds.dense_scor"
    assert "no stage writes this score" in str(caught.value)


def test_build_budget_takes_the_surface_by_keyword_only(path: Path) -> None:
    with pytest.raises(TypeError):
        old_order: Any = build_budget
        old_order("chat", path)
