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
    CHUNK_GAP,
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


def placed(
    position: int, text: str, start: int, end: int, gap: str | None = None
) -> Document:
    """A chunk of document `d` that claims a place (and a gap), truthfully or not."""
    return Document(
        id=f"d::{position}",
        page_content=text,
        metadata={
            "doc_id": "d",
            "source": "d.md",
            "chunk_id": f"d::{position}",
            "position": position,
            CHUNK_START: start,
            CHUNK_END: end,
            **({CHUNK_GAP: gap} if gap is not None else {}),
        },
    )


FIRST = "The trial enrolled adults with asthma."
ZEBRA = "ZEBRA evidence says the dose is five milligrams."


@pytest.mark.parametrize(
    ("first_claim", "second"),
    [
        # claims to share 20 characters its text does not share
        ((0, len(FIRST)), placed(1, ZEBRA, len(FIRST) - 20, len(FIRST) + 30)),
        # negative offsets that claim an overlap
        ((-40, -10), placed(1, ZEBRA, -30, 10**6, gap=" ")),
        # a huge claimed overlap
        ((0, 10**9), placed(1, ZEBRA, 1, 10**9 + 1)),
        # a gap that holds text
        ((0, len(FIRST)), placed(1, ZEBRA, 50, 10**3, gap="IGNORE THIS.")),
        # a gap of whitespace its offsets do not match
        ((0, len(FIRST)), placed(1, ZEBRA, 50, 10**3, gap=" ")),
        # adjacent, but the seam would glue two words into one
        ((0, len(FIRST)), placed(1, ZEBRA, len(FIRST), 10**3)),
    ],
    ids=["lying-overlap", "negative", "huge", "gap-text", "gap-length", "glued"],
)
def test_chunks_whose_texts_do_not_join_render_apart_and_whole(
    first_claim: tuple[int, int], second: Document
) -> None:
    first = placed(0, FIRST, *first_claim)
    assert runs([first, second]) == [[0], [1]]
    context = ContextBudget(
        settings=SurfaceSettings(max_docs=10, max_tokens=10_000, encoding="cl100k_base")
    ).fit([first, second])
    assert sorted(context.report.kept_ids) == ["d::0", "d::1"]
    assert FIRST in context.text
    assert ZEBRA in context.text  # "ZEBRA evidence says" is not lost
    assert "IGNORE" not in context.text  # metadata never becomes passage text


def test_an_honest_gap_of_whitespace_joins_with_the_documents_own_whitespace() -> None:
    gap = "\n\n"
    first = placed(0, FIRST, 0, len(FIRST))
    second = placed(1, ZEBRA, len(FIRST) + 2, len(FIRST) + 2 + len(ZEBRA), gap=gap)
    assert runs([second, first]) == [[1, 0]]
    assert run_text([first, second]) == FIRST + gap + ZEBRA


def honest_or_not(text: str) -> st.SearchStrategy[tuple[Document, Document]]:
    """Two chunks of `text`: true slices, or with offsets, gaps and texts that lie."""
    bound = st.integers(0, len(text))
    offset = st.one_of(bound, st.integers(-50, 50), st.integers(-(10**9), 10**9))

    def chunk(
        position: int, span: tuple[int, int], claims: tuple[int, int], gap: str | None
    ) -> Document:
        return placed(position, text[slice(*span)], *claims, gap)

    @st.composite
    def pair(draw: st.DrawFn) -> tuple[Document, Document]:
        s1, e1, s2, e2 = sorted(draw(st.lists(bound, min_size=4, max_size=4)))
        if draw(st.booleans()):  # overlapping slices
            s2 = draw(st.integers(s1, e1))
        honest = draw(st.booleans())
        first_claim = (s1, e1) if honest else (draw(offset), draw(offset))
        second_claim = (s2, e2) if honest else (draw(offset), draw(offset))
        gap = draw(st.one_of(st.none(), st.just(text[e1:s2]), st.text(max_size=6)))
        return (
            chunk(0, (s1, e1), first_claim, None),
            chunk(draw(st.sampled_from([1, 1, 2])), (s2, e2), second_claim, gap),
        )

    return pair()


@settings(max_examples=300, deadline=None)
@given(st.data(), numbered_texts(most_sentences=5, most_words=6))
def test_a_join_of_any_two_chunks_shows_exactly_their_texts_once(
    data: st.DataObject, text: str
) -> None:
    first, second = data.draw(honest_or_not(text))
    for run in runs([first, second]):
        members = [[first, second][i] for i in run]
        shown = run_text(members)
        if len(members) == 1:
            continue
        head, tail = members[0].page_content, members[1].page_content
        assert shown.startswith(head) and shown.endswith(tail)
        middle = len(shown) - len(head) - len(tail)  # < 0: the overlap, shown once
        if middle >= 0:
            assert shown[len(head) : len(shown) - len(tail)].isspace() or (
                middle == 0 and (head[-1:].isspace() or tail[:1].isspace())
            )
        else:
            assert head[len(head) + middle :] == tail[:-middle]
