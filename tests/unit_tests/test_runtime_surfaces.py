"""A surface switched per call: `with_config(configurable={"surface": name})` runs
that call on all of the named surface's settings and labels the report with it."""

from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import ConfigurableField

from langchain_ragbudget import (
    BM25Retriever,
    ConfigError,
    ContextBudget,
    SurfaceSettings,
    create_budgeted_rag_chain,
    load_config,
)

YAML = """
surfaces:
  api:
    max_docs: 2
    max_tokens: 300
    packing: skip
"""


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    path = tmp_path / "ragbudget.yml"
    path.write_text(YAML, encoding="utf-8")
    return path


def corpus() -> list[Document]:
    sentence = "Solar panels on the roof turn sunlight into electricity for the house."
    return [
        Document(
            id=f"d{i}::0",
            page_content=f"{sentence} Panel {i} faces south. " * 3,
            metadata={"doc_id": f"d{i}", "source": f"d{i}.md"},
        )
        for i in range(10)
    ]


@pytest.mark.needs_tiktoken
def test_batch_with_mixed_surfaces_gives_each_call_its_own(config_path: Path) -> None:
    config = load_config(config_path)
    chain = create_budgeted_rag_chain(
        BM25Retriever.from_documents(corpus(), k=10),
        budget=ContextBudget.from_config(config_path, surface="chat"),
    )
    names = ["search", "api", "chat", "api"]
    configs: list[Any] = [{"configurable": {"surface": name}} for name in names]
    states = chain.batch(["solar panels"] * len(names), configs)
    for name, state in zip(names, states, strict=True):
        report = state["context"].report
        expected = config.surface(name)
        assert report.surface == name
        assert (report.max_docs, report.max_tokens, report.packing) == (
            expected.max_docs,
            expected.max_tokens,
            expected.packing,
        )
        assert len(state["context"].documents) <= expected.max_docs
        assert report.tokens_used <= expected.max_tokens
    # the surfaces really differ here, so a budget that kept one would fail above
    assert len({config.surface(n).max_tokens for n in names}) == 3


@pytest.mark.needs_tiktoken
def test_configurable_fields_surface_switches_the_settings_too() -> None:
    budget = ContextBudget.from_config(surface="chat").configurable_fields(
        surface=ConfigurableField(id="surface")
    )
    context = budget.invoke(corpus(), {"configurable": {"surface": "search"}})
    search = load_config().surface("search")
    assert context.report.surface == "search"
    assert context.report.max_tokens == search.max_tokens
    assert context.report.max_docs == search.max_docs


@pytest.mark.needs_tiktoken
def test_keyword_overrides_apply_to_the_surface_they_were_given_for() -> None:
    budget = ContextBudget.from_config(surface="chat", max_docs=1, max_tokens=3000)
    search = load_config().surface("search")
    context = budget.invoke(corpus(), {"configurable": {"surface": "search"}})
    assert context.report.surface == "search"
    assert (context.report.max_docs, context.report.max_tokens) == (
        search.max_docs,
        search.max_tokens,
    )
    assert len(context.documents) > 1
    back = budget.invoke(corpus(), {"configurable": {"surface": "chat"}})
    assert (back.report.max_docs, back.report.max_tokens) == (1, 3000)
    assert len(back.documents) == 1


def test_unknown_runtime_surface_is_named() -> None:
    budget = ContextBudget.from_config(surface="chat")
    with pytest.raises(ConfigError, match=r"configurable.surface' = 'nope'.*known"):
        budget.invoke(corpus(), {"configurable": {"surface": "nope"}})


@pytest.mark.needs_tiktoken
def test_budget_from_settings_alone_refuses_to_switch() -> None:
    budget = ContextBudget(settings=SurfaceSettings(max_docs=2, max_tokens=200))
    with pytest.raises(ConfigError, match="knows only its surface 'chat'"):
        budget.invoke(corpus(), {"configurable": {"surface": "search"}})
    # the same surface by name is no switch
    same = budget.invoke(corpus(), {"configurable": {"surface": "chat"}})
    assert same.report.max_docs == 2
