"""Memories through the whole chain: their own section, the share, the records.

`create_budgeted_rag_chain(..., memory=MemoryRetriever(...))`: superseded and
stale-source memories appear in `BudgetedAnswer.dropped` (or kept with a stale
marker) and in the warning's counts; memories are never citation-numbered; a
surface that budgets the whole prompt counts the memory section as sent; and a
real `HybridIndex` update of a memory's source document flips it to stale.

Real embeddings (fastembed, the all-MiniLM-L6-v2 ONNX folder), real SQLite, real
tiktoken. The chat model is a fake standing in for an LLM API that cannot run
here (`GenericFakeChatModel`); it records nothing, so the messages are captured by
a callback at the model.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate
from list_retriever import ListRetriever
from sent_to_model import Sent
from test_history import rendered_count

from langchain_ragbudget import (
    ContextBudget,
    build_embeddings,
    create_budgeted_rag_chain,
    load_config,
)
from langchain_ragbudget.chain._pipeline import explain
from langchain_ragbudget.chain._stuff import BudgetedAnswer
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

START = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
QUESTION = "Which editor theme should I use?"
PASSAGE = Document(
    id="p1",
    page_content="The editor supports a light and a dark theme.",
    metadata={"doc_id": "editor.md", "source": "editor.md", "dense_score": 0.9},
)


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(scope="module")
def embeddings() -> Embeddings:
    return build_embeddings(load_config())


@pytest.fixture
def store(
    new_memory_store: Callable[[], str | Path], embeddings: Embeddings
) -> MemoryStore:
    return MemoryStore(new_memory_store(), embeddings, clock=Clock())


def themes(store: MemoryStore) -> tuple[str, str]:
    """The seed's pair on one subject: dark said 90 days ago, light today."""
    assert isinstance(store.clock, Clock)
    store.clock.now = START - timedelta(days=90)
    dark = store.remember("Prefers the dark editor theme", subject="editor.theme")
    store.clock.now = START
    light = store.remember(
        "Switched the editor to the light theme", subject="editor.theme"
    )
    return dark.id, light.id


def ask(
    memory: MemoryRetriever, prompt: Any = None, **surface: Any
) -> tuple[BudgetedAnswer, Sent]:
    fields = {"max_docs": 4, "max_tokens": 1_000, "encoding": "cl100k_base"}
    budget = ContextBudget(settings=SurfaceSettings(**{**fields, **surface}))
    model = GenericFakeChatModel(messages=iter([AIMessage("Use the light theme.")]))
    chain = create_budgeted_rag_chain(
        ListRetriever(documents=[PASSAGE]),
        model,
        budget=budget,
        prompt=prompt,
        memory=memory,
        structured=True,
    )
    sent = Sent()
    answer = chain.invoke(QUESTION, {"callbacks": [sent]})
    assert isinstance(answer, BudgetedAnswer) and len(sent.messages) == 1
    return answer, sent


def test_a_superseded_memory_is_dropped_on_the_record(store: MemoryStore) -> None:
    dark, light = themes(store)
    answer, sent = ask(MemoryRetriever(store=store))
    assert [m["id"] for m in answer.memories] == [light]
    (record,) = [d for d in answer.dropped if d["stage"] == "memory"]
    assert (record["id"], record["reason"]) == (dark, "superseded")
    assert light in record["detail"]
    (line,) = [w for w in answer.warnings if "memory" in w]
    assert "1 memory(ies) dropped (1 superseded)" in line
    human = sent.messages[0][-1].text
    memories, context = human.split("Context:\n")
    assert "> Switched the editor to the light theme" in memories
    assert "dark" not in memories and "[" not in memories  # no citation number
    assert "[1]" in context
    assert "Memories section" in sent.messages[0][0].text  # the system prompt says
    html = answer._repr_html_()
    assert "memories in the prompt (not cited)" in html and "light theme" in html


def test_a_stale_memory_is_marked_or_dropped(store: MemoryStore) -> None:
    store.remember(
        "The team indents with tabs", source_id="style.md", source_hash="old-hash"
    )

    class Index:  # the source document now has another hash
        def document_hash(self, doc_id: str) -> str | None:
            return {"style.md": "new-hash"}.get(doc_id)

    answer, sent = ask(MemoryRetriever(store=store, sources=Index()))
    (kept,) = answer.memories
    assert "style.md has changed" in kept["stale"]
    assert "STALE: its source style.md has changed" in sent.messages[0][-1].text
    assert any("1 memory(ies) kept marked stale" in w for w in answer.warnings)
    assert not [d for d in answer.dropped if d["stage"] == "memory"]

    dropping = MemoryRetriever.from_config(store=store, sources=Index(), stale="drop")
    answer, sent = ask(dropping)
    assert answer.memories == []
    assert [(d["stage"], d["reason"]) for d in answer.dropped] == [
        ("memory", "stale_source")
    ]
    assert any("1 memory(ies) dropped (1 stale_source)" in w for w in answer.warnings)
    assert "No memories were recalled." in sent.messages[0][-1].text


def test_the_surface_share_bounds_memories(store: MemoryStore) -> None:
    for i, fact in enumerate(["likes tea", "works in Lisbon", "has a cat named Io"]):
        store.remember(fact, importance=1.0 - i / 10)
    answer, _ = ask(MemoryRetriever(store=store), max_memories=1)
    assert len(answer.memories) == 1
    reasons = [d["reason"] for d in answer.dropped if d["stage"] == "memory"]
    assert reasons == ["over_max_memories", "over_max_memories"]
    # memories the prompt had no room for are left out: counted in the line
    assert "[warning: chat context: 2 memory(ies) dropped (2 over_max_memories)]" in (
        answer.warnings
    )

    answer, _ = ask(MemoryRetriever(store=store), memory_tokens=12)
    reasons = [d["reason"] for d in answer.dropped if d["stage"] == "memory"]
    assert len(answer.memories) + len(reasons) == 3 and "over_max_tokens" in reasons
    assert any("over_max_tokens" in w and "memory" in w for w in answer.warnings)


def test_the_whole_prompt_budget_counts_the_memory_section(store: MemoryStore) -> None:
    themes(store)
    for fact in ["likes tea", "works in Lisbon"]:
        store.remember(fact)
    retriever = MemoryRetriever(store=store, supersede=False)
    answer, sent = ask(retriever, max_prompt_tokens=400, min_docs=0)
    (report,) = sent.reports
    assert report["prompt"]["prompt_tokens"] == rendered_count(
        sent.messages[0], "cl100k_base"
    )
    assert report["prompt"]["prompt_tokens"] <= 400
    assert answer.memories  # counted, not left out


def test_a_prompt_without_memories_gets_the_section_before_the_context(
    store: MemoryStore,
) -> None:
    themes(store)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Answer."), ("human", "{context}\nQ: {question}")]
    )
    _, sent = ask(MemoryRetriever(store=store), prompt)
    human = sent.messages[0][-1].text
    assert human.startswith("Memories (remembered, not documents")
    assert human.index("light theme") < human.index("Documents:\n") < human.index("[1]")


def test_explain_shows_the_memory_section(store: MemoryStore) -> None:
    themes(store)
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=4, max_tokens=1_000, encoding="cl100k_base")
    )
    shown = explain(
        QUESTION,
        ListRetriever(documents=[PASSAGE]),
        budget,
        memory=MemoryRetriever(store=store),
    )
    assert shown.context.memory is not None
    assert "> Switched the editor to the light theme" in shown.messages[-1].text


def test_a_real_index_update_flips_a_memory_to_stale(
    tmp_path: Path, store: MemoryStore, embeddings: Embeddings
) -> None:
    from langchain_ragbudget.index import HybridIndex

    note = "Our services deploy on Fridays after the review."
    with HybridIndex.open(tmp_path / "index", embeddings=embeddings) as index:
        index.upsert([Document(id="deploy.md", page_content=note)])
        learned = index.document_hash("deploy.md")
        assert learned is not None
        memory = store.remember(
            "Deploys happen on Fridays", source_id="deploy.md", source_hash=learned
        )
        retriever = MemoryRetriever(store=store, sources=index)
        (fresh,) = retriever.recall("when do we deploy?").kept
        assert fresh.stale == ""
        index.upsert(
            [Document(id="deploy.md", page_content=note.replace("Fridays", "Tuesdays"))]
        )
        (changed,) = retriever.recall("when do we deploy?").kept
        assert changed.memory.id == memory.id and "has changed" in changed.stale
        answer, _ = ask(retriever)
        assert "has changed" in answer.memories[0]["stale"]
        index.delete(["deploy.md"])
        (gone,) = retriever.recall("when do we deploy?").kept
        assert "no longer in the index" in gone.stale


def test_the_async_chain_recalls_memories_too(store: MemoryStore) -> None:
    import asyncio

    dark, light = themes(store)
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=4, max_tokens=1_000, encoding="cl100k_base")
    )
    chain = create_budgeted_rag_chain(
        ListRetriever(documents=[PASSAGE]),
        GenericFakeChatModel(messages=iter([AIMessage("Light.")])),
        budget=budget,
        memory=MemoryRetriever(store=store),
        structured=True,
    )
    answer = asyncio.run(chain.ainvoke(QUESTION))
    assert [m["id"] for m in answer.memories] == [light]
    assert [(d["id"], d["reason"]) for d in answer.dropped] == [(dark, "superseded")]
