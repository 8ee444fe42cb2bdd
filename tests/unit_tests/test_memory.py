"""Agent memory: the seed's table, the wrong clocks it must catch, the store.

Seed 001 (Ossian) measured, after three recalls of both: "switched the editor to
the light theme" (fresh) 0.765, "prefers the dark theme" (90 days old) 0.102, and
0.817 once the dark-theme preference is restated. Their recency test passed the
whole time because it backdated the column the buggy query read; the table here is
also computed with the two wrong clocks the seed describes (the age run from
creation, or refreshed by every recall) and must fail for both.

No model: memories are stored with their embeddings given (unit vectors chosen so
cosine x importance is the seed's 0.765 and 0.817) and recalled with a query
vector, so every number is exact. The store is a real SQLite file here; the
integration tests run the same tests on a real PostgreSQL server
(`new_memory_store` in tests/conftest.py).
"""

from __future__ import annotations

import math
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._records import DropReason, Stage
from langchain_ragbudget.memory._ranking import CHANGED_SINCE
from langchain_ragbudget.memory._retriever import (
    Memory,
    MemoryRetriever,
    MemoryStore,
    MemoryStoreError,
)
from langchain_ragbudget.memory._score import Scored, best
from langchain_ragbudget.memory._store import SAME_TEXT

START = datetime(2026, 9, 1, 9, 0, tzinfo=UTC)
QUERY = [1.0, 0.0, 0.0]
# cosine with QUERY x importance: light 0.9 x 0.85 = 0.765, dark 0.95 x 0.86 = 0.817
LIGHT = ([0.9, math.sqrt(1 - 0.9**2), 0.0], 0.85)
DARK = ([0.95, 0.0, math.sqrt(1 - 0.95**2)], 0.86)


class Clock:
    """A clock the test moves by hand (the store and retriever take any callable)."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


AgeStart = Callable[[Memory], datetime]
NewStore = Callable[[], str | Path]


def said(memory: Memory) -> datetime:
    """Right: a memory's age runs from when it was last said."""
    return memory.said_at


def created(memory: Memory) -> datetime:
    """Wrong: from when it was created (Ossian's original query)."""
    return memory.created_at


def last_read(memory: Memory) -> datetime:
    """Wrong: every recall refreshes the age ("keeps a live memory from decaying").

    `memory` is as the recall read it, before that recall marked it.
    """
    return max(memory.said_at, memory.last_recalled_at or memory.said_at)


def aged_from(start: AgeStart, item: Scored, now: datetime, half_life: float) -> float:
    """`item`'s score with its age run from `start`: its other factors as recalled."""
    days = max((now - start(item.memory)).total_seconds(), 0.0) / 86_400
    return item.similarity * item.memory.importance * 0.5 ** (days / half_life)


def seed_scores(
    location: str | Path, age_from: AgeStart | None = None
) -> list[dict[str, float]]:
    """The seed's scenario: the scores (by text) after each step.

    Dark theme said on day 0; light theme said on day 90; recalled once, then
    three more times; then the dark-theme preference restated (same day). The
    scores are the retriever's, or, with `age_from`, computed from each recalled
    memory with its age run from that moment instead.
    """
    clock = Clock()
    store = MemoryStore(location, clock=clock)
    # the seed's own clock: 30 days (the shipped default is longer)
    retriever = MemoryRetriever(store=store, supersede=False, half_life_days=30.0)
    store.remember("prefers the dark theme", importance=DARK[1], embedding=DARK[0])
    clock.advance(days=90)
    light = "switched the editor to the light theme"
    store.remember(light, importance=LIGHT[1], embedding=LIGHT[0])

    def scores() -> dict[str, float]:
        kept = retriever.recall(vector=QUERY).kept
        if age_from is None:
            return {item.memory.text: item.score for item in kept}
        half_life = retriever.half_life_days
        return {
            item.memory.text: aged_from(age_from, item, clock.now, half_life)
            for item in kept
        }

    steps = [scores()]
    for _ in range(3):
        steps.append(scores())
    store.remember("Prefers the  dark theme.", embedding=DARK[0])  # restated
    steps.append(scores())
    store.close()
    return steps


def table_holds(steps: list[dict[str, float]]) -> bool:
    """Whether the scores are the seed's table, to three decimals."""
    light, dark = "switched the editor to the light theme", "prefers the dark theme"
    first, *recalled, restated = steps

    def table(step: dict[str, float]) -> tuple[float, float]:
        return round(step[light], 3), round(step[dark], 3)

    return (
        table(first) == (0.765, 0.102)
        and all(table(step) == (0.765, 0.102) for step in recalled)
        and table(restated) == (0.765, 0.817)
        and restated[dark] > restated[light]  # the order flips
    )


def test_the_seed_table(new_memory_store: NewStore) -> None:
    steps = seed_scores(new_memory_store())
    light, dark = "switched the editor to the light theme", "prefers the dark theme"
    assert round(steps[0][light], 3) == 0.765
    assert round(steps[0][dark], 3) == 0.102
    assert steps[1:4] == [steps[0]] * 3  # three recalls of both change nothing
    assert round(steps[4][light], 3) == 0.765
    assert round(steps[4][dark], 3) == 0.817
    assert table_holds(steps)


def test_the_retriever_s_scores_are_the_age_from_said_at(
    new_memory_store: NewStore,
) -> None:
    # the wrong clocks below differ from the retriever's scores in the clock alone
    ours = seed_scores(new_memory_store())
    recomputed = seed_scores(new_memory_store(), said)
    for step, again in zip(ours, recomputed, strict=True):
        assert step.keys() == again.keys()
        assert all(step[k] == pytest.approx(again[k], abs=1e-6) for k in step)


@pytest.mark.parametrize(
    "age_from", [created, last_read], ids=["age-from-created_at", "age-from-recall"]
)
def test_the_seed_table_fails_on_a_wrong_clock(
    new_memory_store: NewStore, age_from: AgeStart
) -> None:
    assert not table_holds(seed_scores(new_memory_store(), age_from))


def test_recall_never_changes_said_at(new_memory_store: NewStore) -> None:
    clock = Clock()
    store = MemoryStore(new_memory_store(), clock=clock)
    memory = store.remember("likes tea", embedding=DARK[0])
    clock.advance(days=3)
    MemoryRetriever(store=store).recall(vector=QUERY)
    after = store.get(memory.id)
    assert after is not None
    assert after.said_at == memory.said_at == START
    assert after.last_recalled_at == START + timedelta(days=3)


def test_a_restatement_updates_said_at_times_said_and_a_given_importance(
    new_memory_store: NewStore,
) -> None:
    clock = Clock()
    store = MemoryStore(new_memory_store(), clock=clock)
    first = store.remember(
        "Prefers British English", subject="style", importance=0.7, embedding=LIGHT[0]
    )
    clock.advance(days=10)
    again = store.remember(
        "  prefers british   english!",
        subject="style",
        importance=0.1,
        embedding=DARK[0],
    )
    assert again.id == first.id and len(store) == 1
    assert again.times_said == 2 and again.said_at == START + timedelta(days=10)
    assert again.created_at == first.created_at and again.text == first.text
    assert again.importance == 0.1  # the latest word on how much it matters
    third = store.remember(
        "Prefers British English.", subject="style", embedding=[1, 0, 0]
    )
    assert (third.times_said, third.importance) == (3, 0.1)  # none given: kept
    ranked = MemoryRetriever(store=store).recall(vector=QUERY).kept
    assert [item.memory.importance for item in ranked] == [0.1]  # the cache too


def test_the_same_subject_restates_only_an_equivalent_statement(
    new_memory_store: NewStore,
) -> None:
    store = MemoryStore(new_memory_store(), clock=Clock())
    near = [0.8, 0.0, 0.6]  # cosine 0.8: below restate_similarity 0.95
    first = store.remember("prefers dark mode", subject="theme", embedding=[1, 0, 0])
    same = store.remember("likes dark mode", subject="theme", embedding=[1, 0.01, 0])
    other = store.remember("switched to light mode", subject="theme", embedding=near)
    elsewhere = store.remember("likes dark mode", subject="shell", embedding=[1, 0, 0])
    assert same.id == first.id and same.times_said == 2
    assert other.id != first.id and other.times_said == 1  # contradicts: a new one
    assert elsewhere.id != first.id  # another subject is another memory
    assert len(store) == 3


def test_the_store_persists_forgets_and_lists(new_memory_store: NewStore) -> None:
    path = new_memory_store()
    clock = Clock()
    with MemoryStore(path, clock=clock) as store:
        a = store.remember("a fact", embedding=[1, 0, 0], source_id="d.md")
        clock.advance(hours=1)
        b = store.remember("b fact", subject="s", embedding=[0, 1, 0])
    with MemoryStore(path) as store:
        assert [m.id for m in store.list()] == [b.id, a.id]  # most recently said first
        assert [m.id for m in store.list(subject="s")] == [b.id]
        assert store.get(a.id) == a
        assert store.schema_version() == 1 and store.dimension() == 3
        assert store.forget(a.id) and not store.forget(a.id)
        assert store.get(a.id) is None and len(store) == 1
        assert Memory(**{**a.__dict__}).to_dict()["created_at"] == START.isoformat()


def test_not_a_memory_store_is_refused_by_name(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(MemoryStoreError, match=r"junk\.sqlite"):
        MemoryStore(junk)
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as connection:
        connection.execute("CREATE TABLE t (x)")
    with pytest.raises(MemoryStoreError, match=r"other\.sqlite.*not a memory store"):
        MemoryStore(other)
    newer = tmp_path / "newer.sqlite"
    MemoryStore(newer).close()
    with sqlite3.connect(newer) as connection:
        connection.execute("PRAGMA user_version = 7")
    with pytest.raises(MemoryStoreError, match="schema version 7"):
        MemoryStore(newer)
    with pytest.raises(MemoryStoreError, match="is a folder"):
        MemoryStore(tmp_path)


def test_bad_input_gets_one_clear_error(new_memory_store: NewStore) -> None:
    store = MemoryStore(new_memory_store(), clock=Clock())
    store.remember("x", embedding=[1, 0, 0])
    with pytest.raises(InvalidInputError, match=r"3-dimensional.*4 dimensions"):
        store.remember("y", embedding=[1, 0, 0, 0])
    with pytest.raises(InvalidInputError, match="importance"):
        store.remember("y", importance=1.5, embedding=[1, 0, 0])
    with pytest.raises(InvalidInputError, match="visible character"):
        store.remember("  ", embedding=[1, 0, 0])
    with pytest.raises(InvalidInputError, match="finite"):
        store.remember("y", embedding=[float("nan"), 0, 0])
    with pytest.raises(InvalidInputError, match="all zeros"):
        store.remember("y", embedding=[0, 0, 0])
    with pytest.raises(InvalidInputError, match="no embeddings"):
        store.remember("y")
    with pytest.raises(InvalidInputError, match="shape"):
        MemoryRetriever(store=store).recall(vector=[1, 0])
    naive = MemoryStore(new_memory_store(), clock=lambda: datetime(2026, 1, 1))
    with pytest.raises(InvalidInputError, match="timezone-aware"):
        naive.remember("y", embedding=[1, 0, 0])


def test_supersession_keeps_the_most_recently_said(new_memory_store: NewStore) -> None:
    clock = Clock()
    store = MemoryStore(new_memory_store(), clock=clock)
    old = store.remember("prefers dark", subject="theme", embedding=DARK[0])
    clock.advance(days=1)
    new = store.remember("switched to light", subject="theme", embedding=LIGHT[0])
    loose = store.remember("uses vim", embedding=[0.5, 0.5, 0.5])
    recall = MemoryRetriever(store=store).recall(vector=QUERY)
    assert [item.memory.id for item in recall.kept] == [new.id, loose.id]
    (record,) = recall.drops
    assert (record.key, record.stage, record.reason) == (
        old.id,
        Stage.MEMORY,
        DropReason.SUPERSEDED,
    )
    assert new.id in record.detail
    off = MemoryRetriever(store=store, supersede=False).recall(vector=QUERY)
    assert len(off.kept) == 3 and not off.drops


def test_a_subject_s_newest_from_another_handle_supersedes_a_cached_ranking(
    new_memory_store: NewStore,
) -> None:
    """The newest on a subject is the ranking's, kept in step with other writers:
    a newer memory ranking below `k`, a restatement moving an older one ahead,
    and a restatement with an earlier clock moving the newest back."""
    path = new_memory_store()
    clock, other_clock = Clock(), Clock()
    reader = MemoryStore(path, clock=clock)
    writer = MemoryStore(path, clock=other_clock)
    old = reader.remember("prefers dark", subject="theme", embedding=DARK[0])
    reader.remember("uses vim", embedding=[0.6, 0.8, 0.0])
    retriever = MemoryRetriever(store=reader, k=1)
    assert [item.memory.id for item in retriever.recall(vector=QUERY).kept] == [old.id]
    other_clock.advance(days=1)  # the ranking is cached; another handle writes
    new = writer.remember("switched to light", subject="theme", embedding=[0, 0, 1])
    recall = retriever.recall(vector=QUERY)
    assert [item.memory.id for item in recall.kept] == [new.id]
    assert [(r.key, r.reason) for r in recall.drops] == [
        (old.id, DropReason.SUPERSEDED)
    ]
    other_clock.advance(days=1)
    writer.remember("prefers dark", subject="theme", embedding=DARK[0])  # restated
    assert [m.memory.id for m in retriever.recall(vector=QUERY).kept] == [old.id]
    other_clock.now = START + timedelta(hours=12)  # a clock behind: said earlier
    writer.remember("prefers dark", subject="theme", embedding=DARK[0])
    assert [m.memory.id for m in retriever.recall(vector=QUERY).kept] == [new.id]


class Counted:
    """A store's connection that notes every statement the store sends it."""

    def __init__(self, connection: Any) -> None:
        self.connection = connection
        self.sent: list[str] = []

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        self.sent.append(sql)
        return self.connection.execute(sql, parameters)

    def close(self) -> None:
        self.connection.close()


def test_a_recall_of_a_current_ranking_sends_three_statements(
    new_memory_store: NewStore,
) -> None:
    """The generation, the recalled rows with each subject's newest (ranked below
    `k` here), their `last_recalled_at`: no transaction around them, no query
    per subject (each is a round trip to a server)."""
    clock = Clock()
    store = MemoryStore(new_memory_store(), clock=clock)
    old = store.remember("prefers dark", subject="theme", embedding=DARK[0])
    clock.advance(days=1)
    new = store.remember("switched to light", subject="theme", embedding=[0, 0, 1])
    retriever = MemoryRetriever(store=store, k=1)
    retriever.recall(vector=QUERY)  # the ranking read
    counted = Counted(store._connection)
    store._connection = counted
    recall = retriever.recall(vector=QUERY)
    assert [item.memory.id for item in recall.kept] == [new.id]
    assert [record.key for record in recall.drops] == [old.id]
    assert [sql.split()[0] for sql in counted.sent] == ["SELECT", "SELECT", "UPDATE"]
    assert "generation" in counted.sent[0]
    recalled = store.get(new.id)
    assert recalled is not None and recalled.last_recalled_at == clock.now


def test_min_score_drops_on_the_record(new_memory_store: NewStore) -> None:
    store = MemoryStore(new_memory_store(), clock=Clock())
    store.remember("near", importance=1.0, embedding=[1, 0, 0])
    far = store.remember("far", importance=1.0, embedding=[0.1, 1, 0])
    recall = MemoryRetriever(store=store, min_score=0.5).recall(vector=QUERY)
    assert [item.memory.text for item in recall.kept] == ["near"]
    assert [(r.key, r.reason) for r in recall.drops] == [
        (far.id, DropReason.SCORE_FLOOR)
    ]


class Hashes:
    """Source documents' content hashes now (a `SourceHashes`, as HybridIndex is)."""

    def __init__(self, hashes: dict[str, str]) -> None:
        self.hashes = hashes

    def document_hash(self, doc_id: str) -> str | None:
        return self.hashes.get(doc_id)


def test_a_changed_or_gone_source_is_flagged_or_dropped(
    new_memory_store: NewStore,
) -> None:
    store = MemoryStore(new_memory_store(), clock=Clock())
    same = store.remember("a", source_id="a.md", source_hash="h1", embedding=[1, 0, 0])
    moved = store.remember("b", source_id="b.md", source_hash="h2", embedding=[1, 1, 0])
    gone = store.remember("c", source_id="c.md", source_hash="h3", embedding=[1, 0, 1])
    sources = Hashes({"a.md": "h1", "b.md": "h2-new"})
    kept = MemoryRetriever(store=store, sources=sources).recall(vector=QUERY)
    stale = {item.memory.id: item.stale for item in kept.kept}
    assert stale[same.id] == ""
    assert "b.md has changed" in stale[moved.id]
    assert "c.md is no longer in the index" in stale[gone.id]
    assert not kept.drops
    documents = kept.documents()
    assert "memory_stale" not in documents[0].metadata
    dropped = MemoryRetriever(store=store, sources=sources, stale="drop").recall(
        vector=QUERY
    )
    assert [item.memory.id for item in dropped.kept] == [same.id]
    assert {(r.key, r.reason) for r in dropped.drops} == {
        (moved.id, DropReason.STALE_SOURCE),
        (gone.id, DropReason.STALE_SOURCE),
    }


def test_another_writer_is_seen_by_the_next_recall(
    new_memory_store: NewStore,
) -> None:
    path = new_memory_store()
    reader = MemoryStore(path, clock=Clock())
    writer = MemoryStore(path, clock=Clock())
    retriever = MemoryRetriever(store=reader)
    writer.remember("one", embedding=[1, 0, 0])
    assert len(retriever.recall(vector=QUERY).kept) == 1
    second = writer.remember("two", embedding=[0.5, 1, 0])
    assert len(retriever.recall(vector=QUERY).kept) == 2
    writer.forget(second.id)
    assert len(retriever.recall(vector=QUERY).kept) == 1
    writer.remember("three", embedding=[0.2, 0.3, 1])
    writer.remember("one", embedding=[1, 0, 0])  # a restatement moves said_at
    cached, fresh = reader.ranking(), MemoryStore(path).ranking()  # reused vs read
    assert cached.ids == fresh.ids
    assert np.array_equal(cached.vectors, fresh.vectors)
    assert np.array_equal(cached.said_at, fresh.said_at)


@settings(max_examples=60, deadline=None)
@given(
    memories=st.lists(
        st.tuples(
            st.lists(st.floats(-1, 1), min_size=4, max_size=4).filter(
                lambda v: math.hypot(*v) > 1e-3
            ),
            st.floats(0, 1),
            st.integers(0, 400),
        ),
        min_size=1,
        max_size=12,
    ),
    half_life=st.floats(1, 100),
    k=st.integers(1, 12),
)
def test_every_factor_is_in_the_score(
    new_memory_store: NewStore,
    memories: list[tuple[list[float], float, int]],
    half_life: float,
    k: int,
) -> None:
    clock = Clock()
    store = MemoryStore(new_memory_store(), clock=clock)
    for i, (vector, importance, days) in enumerate(memories):
        clock.now = START - timedelta(days=days)
        store.remember(f"memory {i}", importance=importance, embedding=vector)
    clock.now = START
    query = np.array([0.3, -0.2, 0.9, 0.1])
    retriever = MemoryRetriever(
        store=store, k=k, half_life_days=half_life, supersede=False, min_score=-1
    )
    kept = retriever.recall(vector=query.tolist()).kept
    expected = []
    for i, (vector, importance, days) in enumerate(memories):
        v = np.array(vector, dtype=np.float32).astype(np.float64)
        cosine = float(v @ query / np.linalg.norm(v) / np.linalg.norm(query))
        expected.append(
            (f"memory {i}", cosine * importance * 0.5 ** (days / half_life))
        )
    expected.sort(key=lambda pair: -pair[1])
    assert len(kept) == min(k, len(memories))
    for item, (_, score) in zip(kept, expected, strict=False):
        assert item.score == pytest.approx(score, abs=1e-5)
        assert item.score == pytest.approx(
            item.similarity * item.memory.importance * item.recency, abs=1e-9
        )
        assert item.recency == pytest.approx(0.5 ** (item.age_days / half_life))
        document = item.document()
        factors = ("similarity", "importance", "age_days", "recency", "memory_score")
        assert all(type(document.metadata[key]) is float for key in factors)
    store.close()


def test_a_chain_without_memory_loads_no_memory_store() -> None:
    """numpy and the store load only when memory is used (the import budget)."""
    code = (
        "import sys\n"
        "from langchain_ragbudget import ContextBudget, create_budgeted_rag_chain\n"
        "heavy = {'numpy', 'langchain_ragbudget.memory._retriever',\n"
        "         'langchain_ragbudget.memory._store',\n"
        "         'langchain_ragbudget.memory._score'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


MEMORY_TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=80,
)


@pytest.mark.needs_tiktoken
@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(MEMORY_TEXT, max_size=10),
    subjects=st.lists(st.one_of(st.none(), MEMORY_TEXT), min_size=10, max_size=10),
    max_memories=st.integers(0, 6),
    memory_tokens=st.integers(0, 200),
)
def test_the_share_keeps_or_records_every_memory(
    texts: list[str],
    subjects: list[str | None],
    max_memories: int,
    memory_tokens: int,
) -> None:
    """Zero silent drops, the share kept, and the tokens counted as sent."""
    from langchain_core.documents import Document

    from langchain_ragbudget.config._tokens import count_tokens
    from langchain_ragbudget.memory._budget import fit_memories

    documents = [
        Document(
            id=f"m{i}",
            page_content=text,
            metadata={
                "memory_subject": subjects[i],
                "said_at": "2026-12-01T00:00:00+00:00",
                "times_said": i + 1,
            },
        )
        for i, text in enumerate(texts)
    ]
    fitted = fit_memories(documents, max_memories, memory_tokens, "cl100k_base")
    kept = [str(d.id) for d in fitted.documents]
    dropped = [r.key for r in fitted.drops]
    assert sorted([*kept, *dropped]) == sorted(str(d.id) for d in documents)
    assert len(kept) <= max_memories
    assert fitted.tokens_used == count_tokens(fitted.text, "cl100k_base")
    assert fitted.tokens_used <= memory_tokens
    assert all(r.stage == Stage.MEMORY for r in fitted.drops)
    lines = fitted.text.splitlines()
    assert len([line for line in lines if line.startswith("Memory")]) == len(kept)
    assert all(  # text quoted; a blank line as ">"
        line.startswith(("Memory", "> ")) or line == ">" for line in lines
    )


def test_the_restatement_check_is_an_index_search(tmp_path: Path) -> None:
    """Index searches, not scans: the restatement check (with every subject NULL
    the subject index alone would match all) and the rows changed since a read."""
    store = MemoryStore(tmp_path / "m.sqlite")
    plan = store._connection.execute(
        f"EXPLAIN QUERY PLAN {SAME_TEXT}", ("a fact", None)
    ).fetchall()
    assert any("memories_norm (norm=? AND subject=?)" in row[-1] for row in plan)
    changed = store._connection.execute(f"EXPLAIN QUERY PLAN {CHANGED_SINCE}", (1,))
    assert any("memories_changed (changed>?)" in row[-1] for row in changed.fetchall())


@settings(max_examples=15, deadline=None)
@given(
    operations=st.lists(
        st.tuples(st.sampled_from(["new", "restate", "forget"]), st.integers(0, 50)),
        min_size=1,
        max_size=25,
    )
)
def test_the_cached_arrays_equal_a_fresh_read(
    new_memory_store: NewStore, operations: list[tuple[str, int]]
) -> None:
    """After any writes by another connection, what recall ranks on is the store."""
    path = new_memory_store()
    clock = Clock()
    writer = MemoryStore(path, clock=clock)
    reader = MemoryStore(path)
    texts: list[str] = []
    for step, (operation, pick) in enumerate(operations):
        clock.advance(hours=1)
        if operation == "new" or not texts:
            texts.append(f"fact {step}")
            vector = [math.cos(step), math.sin(step), 0.5]
            writer.remember(texts[-1], importance=(step % 10) / 10, embedding=vector)
        elif operation == "restate":
            writer.remember(texts[pick % len(texts)], embedding=[1, 0, 0])
        else:
            gone = writer.list()[pick % len(writer)]
            writer.forget(gone.id)
            texts.remove(gone.text)
        cached = reader.ranking()
        fresh = MemoryStore(path).ranking()
        assert cached.ids == fresh.ids
        assert np.array_equal(cached.vectors, fresh.vectors)
        assert np.array_equal(cached.said_at, fresh.said_at)
        assert np.array_equal(cached.importance, fresh.importance)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=3000),
    st.integers(1, 20),
)
def test_best_is_the_k_best_scores_ties_in_store_order(
    values: list[int], k: int
) -> None:
    """Few distinct values, so the cut falls inside a tie (argpartition's did not
    keep store order there); lists past 64 * k take the sampled bound."""
    scores = np.asarray(values, dtype=np.float64)
    expected = sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]
    assert best(scores, k) == expected
