"""One builder per stage, one way to call it, every config check made once at load.

Each public builder takes the config first (a loaded one, a YAML path or None),
and refuses a bad file with the same `ConfigError`, naming the same key, before it
loads a model or writes a file: the check lives in `load_config`, so no builder
can skip it.

Real parts (bm25s, embedded Chroma, fastembed ONNX, the budget, SQLite); the chat
model is a fake (`GenericFakeChatModel`) standing in for an LLM API that cannot
run here.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from pydantic import ValidationError

from langchain_ragbudget import (
    BM25Retriever,
    ConfigError,
    ContextBudget,
    FastEmbedEmbeddings,
    FlashRankRerank,
    HybridRetriever,
    MemoryRetriever,
    MemoryStore,
    RagBudgetConfig,
    SurfaceSettings,
    build_chat_model,
    build_embeddings,
    build_vector_store,
    create_budgeted_rag_chain,
    load_config,
)
from langchain_ragbudget.config import explain_config
from langchain_ragbudget.index import HybridIndex

# Each bad file, and the key its error must name.
BAD = {
    "threshold-no-stage-writes": (
        "surfaces:\n  chat:\n    weak_evidence:\n"
        "      thresholds: {rerank_scroe: 0.3}\n",
        "surfaces.chat.weak_evidence.thresholds.rerank_scroe",
    ),
    "unknown-top-level-key": ("retreival:\n  k: 3\n", "retreival"),
    "unknown-surface-key": (
        "surfaces:\n  chat:\n    max_token: 900\n",
        "surfaces.chat.max_token",
    ),
    "string-for-a-number": ('retrieval:\n  k: "10"\n', "retrieval.k"),
    "bad-enum": (
        "surfaces:\n  chat:\n    packing: squeeze\n",
        "surfaces.chat.packing",
    ),
}


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


class Work:
    """Where a builder could write, and an embedder that must stay unloaded."""

    def __init__(self, folder: Path, store: MemoryStore) -> None:
        self.folder = folder
        self.store = store
        self.embeddings = FastEmbedEmbeddings()


BUILDERS: dict[str, Callable[[Path, Work], object]] = {
    "load_config": lambda file, w: load_config(file),
    "explain_config": lambda file, w: explain_config(file),
    "ContextBudget.from_config": lambda file, w: ContextBudget.from_config(file),
    "HybridRetriever.from_config": lambda file, w: HybridRetriever.from_config(
        file, documents=corpus(), embeddings=w.embeddings
    ),
    "BM25Retriever.from_config": lambda file, w: BM25Retriever.from_config(
        file, documents=corpus()
    ),
    "FlashRankRerank.from_config": lambda file, w: FlashRankRerank.from_config(file),
    "MemoryStore.from_config": lambda file, w: MemoryStore.from_config(
        file, path=w.folder / "memory.sqlite", embeddings=w.embeddings
    ),
    "MemoryRetriever.from_config": lambda file, w: MemoryRetriever.from_config(
        file, store=w.store
    ),
    "build_embeddings": lambda file, w: build_embeddings(file),
    "build_vector_store": lambda file, w: build_vector_store(file, w.embeddings),
    "build_chat_model": lambda file, w: build_chat_model(file),
    "HybridIndex.open": lambda file, w: HybridIndex.open(
        w.folder / "index", file, w.embeddings
    ),
    "HybridIndex.inspect": lambda file, w: HybridIndex.inspect(
        w.folder / "index", file
    ),
    "HybridIndex.repair_directory": lambda file, w: HybridIndex.repair_directory(
        w.folder / "index", file, w.embeddings
    ),
}


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> MemoryStore:
    return MemoryStore(tmp_path_factory.mktemp("store") / "memory.sqlite")


@pytest.mark.parametrize("builder", sorted(BUILDERS))
@pytest.mark.parametrize("bad", sorted(BAD))
def test_every_builder_refuses_a_bad_file_the_same_way_before_any_work(
    bad: str,
    builder: str,
    tmp_path: Path,
    store: MemoryStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text, key = BAD[bad]
    file = tmp_path / "ragbudget.yml"
    file.write_text(text, encoding="utf-8")
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as expected:
        load_config(file)
    work = Work(tmp_path, store)
    with pytest.raises(ConfigError) as caught:
        BUILDERS[builder](file, work)
    assert (caught.value.file, caught.value.key) == (str(file), key)
    assert caught.value.value == expected.value.value
    assert str(caught.value) == str(expected.value)
    assert files_under(tmp_path) == [file]  # no index, store, cache or model file
    assert work.embeddings._model is None  # no embedding model loaded


def test_a_threshold_on_a_score_no_stage_writes_is_refused_for_every_surface(
    tmp_path: Path,
) -> None:
    """A call can switch to any surface, so `search`'s typo fails `chat` too."""
    file = tmp_path / "ragbudget.yml"
    file.write_text(
        "surfaces:\n  search:\n    weak_evidence:\n"
        "      thresholds: {dense_scor: 0.3}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        ContextBudget.from_config(file, surface="chat")
    assert caught.value.key == "surfaces.search.weak_evidence.thresholds.dense_scor"
    assert caught.value.value == 0.3
    assert caught.value.problem == (
        "no stage writes this score; known: bm25_score, dense_score, fused_score, "
        "rerank_score; did you mean 'dense_score'?"
    )


def test_a_disabled_threshold_on_an_unknown_score_is_refused_too(
    tmp_path: Path,
) -> None:
    file = tmp_path / "ragbudget.yml"
    file.write_text(
        "surfaces:\n  chat:\n    weak_evidence:\n"
        "      thresholds: {vector_score: null}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match="no stage writes this score") as caught:
        load_config(file)
    assert caught.value.key == "surfaces.chat.weak_evidence.thresholds.vector_score"


def test_a_config_made_in_python_is_checked_too() -> None:
    settings = SurfaceSettings(
        max_docs=2, max_tokens=100, weak_evidence={"thresholds": {"rerank_scroe": 0.3}}
    )
    assert settings.weak_evidence.thresholds == {"rerank_scroe": 0.3}  # permissive
    with pytest.raises(ValidationError, match=r"chat\.weak_evidence\.thresholds"):
        RagBudgetConfig(surfaces={"chat": settings})


# --- one way to call each: the config first, a path, a loaded one, or None ---


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
        "memory:\n  k: 3\n  restate_similarity: 0.9\n"
        "surfaces:\n  chat:\n    max_docs: 2\n    max_tokens: 333\n",
        encoding="utf-8",
    )
    return file


def test_a_budget_takes_a_path_a_config_or_none(path: Path) -> None:
    assert ContextBudget.from_config(path).settings.max_tokens == 333
    assert ContextBudget.from_config(str(path)).settings.max_docs == 2
    assert ContextBudget.from_config(load_config(path)).settings.max_docs == 2
    defaults = load_config().surface("search")
    assert ContextBudget.from_config(surface="search").settings == defaults


def test_the_surface_is_a_keyword(path: Path) -> None:
    old_order: Any = ContextBudget.from_config
    with pytest.raises(TypeError):
        old_order(path, "chat")


def test_bm25_takes_the_configured_fetch_size(path: Path) -> None:
    assert BM25Retriever.from_config(path, documents=corpus()).k == 2
    fetch_k = load_config().retrieval.sparse.fetch_k
    assert BM25Retriever.from_config(documents=corpus()).k == fetch_k


def test_embeddings_and_chat_model_take_a_config(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert getattr(build_embeddings(path), "batch_size", None) == 7
    assert getattr(build_embeddings(load_config(path)), "batch_size", None) == 7
    assert getattr(build_embeddings(), "batch_size", None) == 32
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert build_chat_model(path) is None  # llm.model is null: no model configured


def test_a_settings_section_is_not_a_config() -> None:
    section: Any = load_config().embedding
    with pytest.raises(TypeError, match="takes the whole configuration"):
        build_embeddings(section)


def test_memory_takes_the_memory_section(path: Path, tmp_path: Path) -> None:
    with MemoryStore.from_config(path, path=tmp_path / "m.sqlite") as store:
        assert store.restate_similarity == 0.9
        retriever = MemoryRetriever.from_config(path, store=store, min_score=0.1)
        assert (retriever.k, retriever.min_score) == (3, 0.1)
        with pytest.raises(TypeError, match="'half_life'"):
            MemoryRetriever.from_config(path, store=store, half_life=3)


def test_a_hybrid_needs_documents_or_both_sides(path: Path) -> None:
    sparse = BM25Retriever.from_config(path, documents=corpus())
    with pytest.raises(TypeError, match="documents, or both sparse and vectorstore"):
        HybridRetriever.from_config(path, sparse=sparse)


@pytest.mark.parametrize("keyword", ["c", "names", "retrievers"])
def test_a_hybrid_refuses_a_keyword_it_cannot_set(path: Path, keyword: str) -> None:
    overrides: dict[str, Any] = {keyword: 1}
    with pytest.raises(TypeError, match=f"'{keyword}'"):
        HybridRetriever.from_config(path, documents=corpus(), **overrides)


@pytest.mark.needs_embedding_model
def test_a_hybrid_over_documents_or_over_its_own_sides(path: Path) -> None:
    documents = corpus()
    made = HybridRetriever.from_config(str(path), documents=documents)
    assert made.k == 3 and made.resolved_names == ["bm25", "dense"]
    assert [d.id for d in made.invoke("yeast bread")][:1] == ["d1::0"]
    store = build_vector_store(path, build_embeddings(path))
    store.add_documents(documents, ids=[str(d.id) for d in documents])
    fused = HybridRetriever.from_config(
        path,
        sparse=BM25Retriever.from_config(path, documents=documents),
        vectorstore=store,
        k=2,
    )
    assert fused.k == 2
    assert [d.id for d in fused.invoke("yeast bread")][:1] == ["d1::0"]


@pytest.mark.needs_tiktoken
def test_a_disabled_rerank_is_no_stage_and_no_warning(path: Path) -> None:
    assert FlashRankRerank.from_config(path) is None
    assert FlashRankRerank.from_config(load_config(path)) is None

    def answer(reranker: FlashRankRerank | None) -> str:
        chain = create_budgeted_rag_chain(
            BM25Retriever.from_documents(corpus(), k=3),
            GenericFakeChatModel(messages=iter([AIMessage(content="Sunlight [1].")])),
            budget=ContextBudget.from_config(path),
            reranker=reranker,
        )
        return str(chain.invoke("solar electricity"))

    assert "rerank stage skipped" not in answer(FlashRankRerank.from_config(path))
    # enabled and offline (no model, no download): skipped, and every answer says so
    offline = FlashRankRerank.from_config(
        load_config(), cache_dir=str(path.parent / "no-models"), download=False
    )
    assert "rerank stage skipped" in answer(offline)


def test_an_enabled_rerank_is_built_from_a_path(tmp_path: Path) -> None:
    file = tmp_path / "on.yml"
    file.write_text(
        f"rerank:\n  top_n: 5\n  cache_dir: {tmp_path}\n  download: false\n",
        encoding="utf-8",
    )
    stage = FlashRankRerank.from_config(file)
    assert isinstance(stage, FlashRankRerank)
    assert stage.top_n == 5
    with pytest.raises(TypeError, match="'enabled'"):
        FlashRankRerank.from_config(file, enabled=False)
