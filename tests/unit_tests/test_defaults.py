"""One source for every default: the settings models. The shipped YAML documents
them and the components take them; these tests fail the moment any of them drifts."""

from importlib import resources
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import (
    EmbeddingSettings,
    IndexSettings,
    LlmSettings,
    RerankSettings,
    RetrievalSettings,
    SparseSettings,
    SurfaceSettings,
    TracingSettings,
    VectorStoreSettings,
    load_config,
)
from langchain_ragbudget.memory._retriever import MemoryRetriever, MemorySettings
from langchain_ragbudget.retrieval._embeddings import FastEmbedEmbeddings
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._rerank import FlashRankRerank
from langchain_ragbudget.retrieval._sparse import BM25Retriever

SHIPPED = yaml.safe_load(
    resources.files("langchain_ragbudget").joinpath("config_default.yml").read_text()
)
SECTIONS: dict[str, type[BaseModel]] = {
    "retrieval": RetrievalSettings,
    "sparse": SparseSettings,
    "embedding": EmbeddingSettings,
    "vector_store": VectorStoreSettings,
    "index": IndexSettings,
    "rerank": RerankSettings,
    "llm": LlmSettings,
    "tracing": TracingSettings,
    "memory": MemorySettings,
}


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_shipped_yaml_writes_the_settings_defaults(section: str) -> None:
    assert SHIPPED[section] == SECTIONS[section]().model_dump()


def test_shipped_yaml_has_no_section_the_models_lack() -> None:
    assert set(SHIPPED) == {*SECTIONS, "surfaces"}


# A surface may set a key on purpose; the shipped YAML says why next to it.
OVERRIDES = {"chat": {"packing"}}


@pytest.mark.parametrize("surface", sorted(SHIPPED["surfaces"]))
def test_surface_keys_with_a_model_default_agree(surface: str) -> None:
    shipped = SHIPPED["surfaces"][surface]
    differ = {
        name
        for name, field in SurfaceSettings.model_fields.items()
        if not field.is_required()
        and name != "weak_evidence"
        and shipped[name] != field.get_default(call_default_factory=True)
    }
    assert differ == OVERRIDES.get(surface, set())


def default(model: type[BaseModel], name: str) -> Any:
    return model.model_fields[name].get_default(call_default_factory=True)


@pytest.mark.parametrize(
    ("component", "field", "settings", "setting"),
    [
        (FlashRankRerank, name, RerankSettings, name)
        for name in (
            "model",
            "max_length",
            "top_n",
            "score_floor",
            "on_unavailable",
            "download",
            "download_timeout",
            "cache_dir",
        )
    ]
    + [
        (BM25Retriever, "k1", SparseSettings, "k1"),
        (BM25Retriever, "b", SparseSettings, "b"),
        (BM25Retriever, "method", SparseSettings, "method"),
        (BM25Retriever, "stemmer_language", SparseSettings, "stemmer"),
        (BM25Retriever, "stopwords", SparseSettings, "stopwords"),
        (BM25Retriever, "index_title", SparseSettings, "index_title"),
        (HybridRetriever, "k", RetrievalSettings, "k"),
        (HybridRetriever, "fusion", RetrievalSettings, "fusion"),
        (HybridRetriever, "rrf_c", RetrievalSettings, "rrf_c"),
        (HybridRetriever, "id_key", RetrievalSettings, "id_key"),
        (FlashRankRerank, "id_key", RetrievalSettings, "id_key"),
        (ContextBudget, "id_key", RetrievalSettings, "id_key"),
        (FastEmbedEmbeddings, "model_name", EmbeddingSettings, "model"),
        (FastEmbedEmbeddings, "batch_size", EmbeddingSettings, "batch_size"),
        (FastEmbedEmbeddings, "query_precision", EmbeddingSettings, "query_precision"),
    ]
    + [
        (MemoryRetriever, name, MemorySettings, name)
        for name in ("k", "half_life_days", "min_score", "supersede", "stale")
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else str(value),
)
def test_components_take_the_settings_defaults(
    component: type[BaseModel], field: str, settings: type[BaseModel], setting: str
) -> None:
    assert default(component, field) == default(settings, setting)


def test_the_loaded_defaults_are_the_shipped_file() -> None:
    config = load_config()
    assert config.rerank.model == SHIPPED["rerank"]["model"]
    assert (
        config.surface("chat").max_tokens == SHIPPED["surfaces"]["chat"]["max_tokens"]
    )


def test_a_weak_evidence_key_no_stage_writes_fails_loudly() -> None:
    from langchain_ragbudget import ConfigError
    from langchain_ragbudget.chain._factory import build_budget
    from langchain_ragbudget.retrieval._factory import RETRIEVER_NAMES

    config = load_config()
    assert build_budget(config).settings.weak_evidence  # the default works
    # a retriever renamed in the factory: dense_score is written by no stage
    renamed = [name if name != "dense" else "vector" for name in RETRIEVER_NAMES]
    with pytest.raises(
        ConfigError, match=r"weak_evidence\.thresholds\.dense_score.*no stage"
    ):
        build_budget(config, names=renamed)


# --- the shipped numbers fit each other: every cap is reachable, none warns alone ---


@pytest.mark.parametrize("surface", sorted(SHIPPED["surfaces"]))
def test_every_max_docs_is_reachable_through_rerank_and_fusion(surface: str) -> None:
    config = load_config()
    assert config.surface(surface).max_docs <= config.rerank.top_n
    assert config.rerank.top_n <= config.retrieval.k


def largest_default_chunks(config: Any, encoding: str) -> list[int]:
    """Rendered costs of the sample corpus chunked as `ragbudget index` does,
    each with a citation header of its own (the worst case), largest first."""
    from langchain_ragbudget.budget._render import ContextFormat
    from langchain_ragbudget.config._tokens import count_tokens
    from langchain_ragbudget.index._chunking import Chunker
    from langchain_ragbudget.sample import load_sample_corpus

    chunker, fmt = Chunker(config.index), ContextFormat()
    documents: dict[str, list[Any]] = {}
    for passage in load_sample_corpus():
        documents.setdefault(passage.metadata["source"], []).append(passage)
    costs = []
    for source, passages in documents.items():
        text = "\n\n".join(p.page_content for p in passages)
        whole = passages[0].model_copy(update={"page_content": text, "id": None})
        for chunk in chunker.split(whole, source):
            chunk.metadata["dense_score"] = 0.5  # headers show a score
            header = fmt.render_header(1, chunk)
            costs.append(
                count_tokens(header, encoding)
                + count_tokens(fmt.render_passage(chunk), encoding)
            )
    return sorted(costs, reverse=True)


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("surface", sorted(SHIPPED["surfaces"]))
def test_a_surface_holds_max_docs_default_chunks_whole(surface: str) -> None:
    config = load_config()
    settings = config.surface(surface)
    costs = largest_default_chunks(config, settings.encoding_name)
    assert len(costs) > settings.max_docs  # the sample has chunks enough to tell
    assert sum(costs[: settings.max_docs]) <= settings.max_tokens
    # the allowance the YAML states covers what was measured here
    assert costs[0] <= config.index.chunk_size + 64


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("surface", sorted(SHIPPED["surfaces"]))
def test_the_default_pipeline_counts_its_cuts_and_names_none(surface: str) -> None:
    from langchain_core.documents import Document

    from langchain_ragbudget.chain._stuff import context_warnings

    config = load_config()
    settings = config.surface(surface)
    # k same-sized full chunks, fused: the budget keeps max_docs, drops the rest
    words = " ".join(["word"] * (config.index.chunk_size - 8))
    docs = [
        Document(
            id=f"c{i}",
            page_content=f"Chunk {i}: {words}.",
            metadata={"fused_rank": i + 1, "source": f"file-{i}.md"},
        )
        for i in range(config.retrieval.k)
    ]
    context = ContextBudget.from_config(config, surface=surface).fit(docs)
    assert len(context.report.kept_ids) == settings.max_docs
    cut = config.retrieval.k - settings.max_docs
    assert [line for line in context_warnings(context) if "context:" in line] == [
        f"[warning: {surface} context: {cut} lower-ranked left out ({cut} "
        "over_max_docs)]"
    ]
