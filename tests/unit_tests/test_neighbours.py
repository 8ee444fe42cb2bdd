"""Neighbouring chunks of one document render as one run and are paid once.

Real nupunkt (the sentence chunker) and tiktoken; no fakes.
"""

from __future__ import annotations

import re

import pytest
import tiktoken
from chunk_texts import WORDS, numbered_texts
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import ContextFormat, quote
from langchain_ragbudget.config._settings import IndexSettings, SurfaceSettings
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.index._chunking import SentenceChunker
from langchain_ragbudget.ledger._metadata_keys import (
    CHUNK_END,
    CHUNK_START,
    CONTEXT_TOKENS,
)
from langchain_ragbudget.retrieval._neighbours import run_text, runs

pytestmark = pytest.mark.needs_tiktoken


def chunks_of(text: str, size: int, overlap: int) -> list[Document]:
    settings = IndexSettings(chunk_size=size, chunk_overlap=overlap)
    chunks = SentenceChunker(settings).split(
        Document(page_content=text, metadata={"source": "doc.md"}), "doc"
    )
    for chunk in chunks:  # as they come back from an index
        chunk.metadata["dense_score"] = 0.5
    return chunks


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    numbered_texts(),
    st.sampled_from([24, 40, 64]),
    st.sampled_from([0, 12]),
    st.randoms(use_true_random=False),
    st.sampled_from([40, 90, 100_000]),
)
def test_joined_runs_are_the_documents_text_and_counted_exactly(
    text: str, size: int, overlap: int, rng: object, max_tokens: int
) -> None:
    chunks = chunks_of(text, size, overlap)
    shuffled = list(chunks)
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    kept = shuffled[: max(1, len(shuffled) * 2 // 3)]
    for run in runs(kept):
        members = [kept[i] for i in run]
        start, end = members[0].metadata[CHUNK_START], members[-1].metadata[CHUNK_END]
        assert run_text(members) == text[start:end]
        starts = [m.metadata[CHUNK_START] for m in members]
        assert starts == sorted(starts)
    budget = ContextBudget(
        settings=SurfaceSettings(
            max_docs=100,
            max_tokens=max_tokens,
            encoding="cl100k_base",
            min_docs=0,
            packing="trim",
        )
    )
    context = budget.fit(kept, question="alpha river")
    assert context.report.tokens_used == len(
        tiktoken.get_encoding("cl100k_base").encode(context.text)
    )
    assert context.report.tokens_used <= max_tokens
    if max_tokens == 100_000:
        assert sorted(context.report.kept_ids) == sorted(str(c.id) for c in kept)
    paid = sum(d.metadata[CONTEXT_TOKENS] for d in context.documents)
    headers = sum(d.metadata["header_tokens"] for d in context.documents)
    assert paid + headers == context.report.tokens_used


def test_adjacent_chunks_render_as_one_quoted_run_with_the_overlap_once() -> None:
    text = " ".join(f"Sentence {w} is number {i}." for i, w in enumerate(WORDS))
    chunks = chunks_of(text, 24, 8)
    assert len(chunks) >= 3
    context = ContextBudget(
        settings=SurfaceSettings(max_docs=10, max_tokens=10_000, encoding="cl100k_base")
    ).fit([chunks[2], chunks[0], chunks[1]])
    start, end = chunks[0].metadata[CHUNK_START], chunks[2].metadata[CHUNK_END]
    body = quote(text[start:end]) + "\n\n"
    assert context.text.endswith(body)
    assert len(re.findall(r"^\[1\]", context.text, re.M)) == 1
    assert context.text.count("Sentence beta") == 1  # the overlap printed once
    assert [d.id for d in context.documents] == ["doc::2", "doc::0", "doc::1"]


def test_a_budget_fits_more_when_the_overlap_is_not_paid_twice() -> None:
    text = " ".join(f"Sentence {w} is number {i}." for i, w in enumerate(WORDS * 2))
    chunks = chunks_of(text, 40, 24)
    joined = ContextFormat()
    apart = ContextFormat(join_neighbours=False)
    costs = []
    for fmt in (joined, apart):
        settings = SurfaceSettings(
            max_docs=50, max_tokens=100_000, encoding="cl100k_base"
        )
        context = ContextBudget(settings=settings, format=fmt).fit(chunks)
        assert context.report.tokens_used == len(
            tiktoken.get_encoding("cl100k_base").encode(context.text)
        )
        costs.append(context.report.tokens_used)
    assert costs[0] < costs[1]


def test_chunks_without_a_place_or_of_two_documents_never_join() -> None:
    plain = [
        Document(id="a::0", page_content="One.", metadata={"doc_id": "a"}),
        Document(id="a::1", page_content="Two.", metadata={"doc_id": "a"}),
    ]
    assert runs(plain) == [[0], [1]]
    text = "The first sentence is here, for all to read. The second one is there, too."
    other = chunks_of(text, 16, 0)
    assert len(other) == 2
    moved = [
        other[0],
        other[1].model_copy(
            update={
                "id": "b::1",
                "metadata": {**other[1].metadata, "doc_id": "b", "source": "b.md"},
            }
        ),
    ]
    context = ContextBudget(
        settings=SurfaceSettings(max_docs=10, max_tokens=10_000, encoding="cl100k_base")
    ).fit(moved)
    assert len(context.citations) == 2
    assert context.text.count(">") == 2  # two passages, one under each citation


def test_the_report_tells_passage_text_from_overhead() -> None:
    text = " ".join(f"Sentence {w} is number {i}." for i, w in enumerate(WORDS))
    chunks = chunks_of(text, 24, 8)
    context = ContextBudget(
        settings=SurfaceSettings(max_docs=10, max_tokens=10_000, encoding="cl100k_base")
    ).fit(chunks)
    report = context.report
    whole = text[chunks[0].metadata[CHUNK_START] : chunks[-1].metadata[CHUNK_END]]
    assert report.passage_tokens == count_tokens(whole, "cl100k_base")
    header = context.text.split("\n", 1)[0] + "\n"
    assert report.overhead_tokens == report.tokens_used - report.passage_tokens
    assert report.overhead_tokens >= count_tokens(header, "cl100k_base")
    assert report.to_dict()["overhead_tokens"] == report.overhead_tokens
