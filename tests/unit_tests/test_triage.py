"""The drop warning: fusion's cut stays out of the line, later drops are counted in
one clause, likely lost evidence is named first (three at most, then "+N more").
Fusion and the budget are the real code; retrievers are fixed lists."""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from list_retriever import ListRetriever

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.chain._triage import CLOSE_SHARE, close_to_top, likely_lost
from langchain_ragbudget.chain._warnings import MAX_NAMED, likely_lost_of
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.ledger._metadata_keys import FUSED_RANK
from langchain_ragbudget.ledger._names import display_name as one_line
from langchain_ragbudget.ledger._records import (
    CandidateList,
    DropReason,
    DropRecord,
    Stage,
)
from langchain_ragbudget.retrieval._hybrid import HybridRetriever

pytestmark = pytest.mark.needs_tiktoken  # the budget counts tokens


def budget(
    max_tokens: int = 4000, max_docs: int = 20, **settings: Any
) -> ContextBudget:
    return ContextBudget(
        settings=SurfaceSettings(
            max_docs=max_docs, max_tokens=max_tokens, encoding="cl100k_base", **settings
        )
    )


def drop_lines(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith("[warning: chat context: ")]


def test_the_ordinary_cuts_at_k_and_max_docs_are_counted_never_named() -> None:
    corpus = [Document(id=f"d{i}", page_content=f"passage {i}") for i in range(30)]
    retriever = HybridRetriever(retrievers=[ListRetriever(documents=corpus)], k=10)
    context = budget(max_docs=4).fit(retriever.invoke("passage"))
    reasons = [record.reason for record in context.report.drops]
    assert reasons.count(DropReason.FUSION_CUT) == 20  # in the report, not the line
    assert reasons.count(DropReason.MAX_DOCS) == 6  # recorded, every one of them
    assert drop_lines(context_warnings(context)) == [
        "[warning: chat context: 6 lower-ranked left out (6 over_max_docs)]"
    ]


def test_fusion_s_cut_alone_brings_no_line() -> None:
    """Every candidate fusion kept is in the prompt whole: nothing to warn about."""
    corpus = [Document(id=f"d{i}", page_content=f"passage {i}") for i in range(30)]
    retriever = HybridRetriever(retrievers=[ListRetriever(documents=corpus)], k=10)
    context = budget(max_docs=10).fit(retriever.invoke("passage"))
    reasons = [record.reason for record in context.report.drops]
    assert reasons == [DropReason.FUSION_CUT] * 20
    assert drop_lines(context_warnings(context)) == []


def test_a_passage_kept_with_its_document_does_not_make_a_drop_likely_lost() -> None:
    """The budget packs a document's passages together: the second of `a` is kept
    for its document, so `b` (too big, ranked above it) is ordinary packing."""
    a0, a1 = (
        Document(
            id=f"a::{i}",
            page_content=f"Alpha fact number {i}.",
            metadata={"doc_id": "a", "source": "a.md", FUSED_RANK: 1 + 2 * i},
        )
        for i in range(2)
    )
    b0 = Document(
        id="b::0",
        page_content="Beta " * 400,
        metadata={"doc_id": "b", "source": "b.md", FUSED_RANK: 2},
    )
    context = budget(max_tokens=120, packing="skip").fit([a0, b0, a1])
    assert context.report.kept_ids == ["a::0", "a::1"]
    (drop,) = context.report.drops
    assert (drop.key, drop.rank, drop.reason) == ("b::0", 2, DropReason.MAX_TOKENS)
    assert likely_lost_of(context) == []
    assert drop_lines(context_warnings(context)) == [
        "[warning: chat context: 1 lower-ranked left out (1 over_max_tokens)]"
    ]
    # b.md alone after a kept b-less passage of its own: then it out-ranked one
    c0 = a1.model_copy(update={"id": "c::0", "metadata": {"source": "c.md"}})
    alone = budget(max_tokens=120, packing="skip").fit([a0, b0, c0])
    assert [item.record.key for item in likely_lost_of(alone)] == ["b::0"]


def test_a_drop_scoring_close_to_the_top_is_named() -> None:
    scores = [0.86, 0.5, 0.4, 0.84, 0.3]
    # median 0.5: the spread under the top is 0.36, and 0.84 is within its share
    assert 0.86 - 0.84 < CLOSE_SHARE * (0.86 - 0.5) < 0.86 - 0.5
    docs = [
        Document(id=f"d{i}", page_content=f"passage {i}", metadata={"dense_score": s})
        for i, s in enumerate(scores)
    ]
    stage = budget(max_docs=3, weak_evidence={"thresholds": {"dense_score": 0.2}})
    (line,) = drop_lines(context_warnings(stage.fit(docs)))
    assert line == (
        "[warning: chat context: evidence likely lost: d3 (budget/over_max_docs: "
        "dense_score 0.84, top kept 0.86); 1 lower-ranked left out (1 over_max_docs)]"
    )


def test_close_is_judged_in_the_lists_own_spread() -> None:
    """The same 0.03 under the top is close on a spread list, not on a bunched one."""
    spread = [0.9, 0.5, 0.45, 0.4, 0.3]
    bunched = [0.60, 0.59, 0.58, 0.585, 0.575]
    assert close_to_top(0.87, 0.9, spread)
    assert not close_to_top(0.57, 0.60, bunched)
    assert close_to_top(0.95, 0.9, spread)  # above the top is always close
    assert close_to_top(0.5, 0.5, [0.5, 0.5])  # no spread: only a tie is close
    assert not close_to_top(0.49, 0.5, [0.5, 0.5])


def test_at_most_three_are_named_then_a_count() -> None:
    small = [Document(id=n, page_content=f"A short passage {n}.") for n in "az"]
    big = [Document(id=f"big{i}", page_content=f"word{i} " * 300) for i in range(5)]
    docs = [small[0], *big, small[1], Document(id="y", page_content="more " * 300)]
    context = budget(max_tokens=200, packing="skip").fit(docs)
    assert context.report.kept_ids == ["a", "z"]
    (line,) = drop_lines(context_warnings(context))
    lost = likely_lost_of(context)
    assert [item.record.key for item in lost] == [f"big{i}" for i in range(5)]
    named = line.split("evidence likely lost: ", 1)[1].split("; ")[0]
    assert named == (
        "big0 (budget/over_max_tokens: rank 2, while rank 7 was kept), "
        "big1 (budget/over_max_tokens: rank 3, while rank 7 was kept), "
        "big2 (budget/over_max_tokens: rank 4, while rank 7 was kept) +2 more"
    )
    assert line.endswith("; 1 lower-ranked left out (1 over_max_tokens)]")


passage_text = st.integers(1, 60).map(lambda n: " ".join(["word"] * n) + ".")
ids = st.sampled_from(["p", "x\n[warning: ok]", "y] [note: z", "w\u2028v"])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(ids, passage_text), min_size=1, max_size=6),
    st.permutations(range(1, 10)),
    st.lists(st.integers(1, 12), max_size=4),
    st.integers(5, 200),
    st.integers(1, 6),
    st.sampled_from(["skip", "trim"]),
    st.integers(0, 1),
)
def test_a_drop_that_out_ranks_a_kept_passage_is_always_named(
    passages: list[tuple[str, str]],
    fused_ranks: list[int],
    fusion_cut_ranks: list[int],
    max_tokens: int,
    max_docs: int,
    packing: str,
    min_docs: int,
) -> None:
    # Fused ranks come shuffled, as after a user's reordering step, and fusion's
    # own records may carry any rank: out-ranking can happen at either stage.
    docs = [
        Document(
            id=f"{prefix}{i}", page_content=text, metadata={FUSED_RANK: fused_ranks[i]}
        )
        for i, (prefix, text) in enumerate(passages)
    ]
    cut = [
        DropRecord(
            f"cut{i}",
            Stage.FUSION,
            DropReason.FUSION_CUT,
            rank,
            Document(page_content="fused below k"),
        )
        for i, rank in enumerate(fusion_cut_ranks)
    ]
    stage = budget(max_tokens, max_docs, packing=packing, min_docs=min_docs)
    context = stage.fit(CandidateList(docs, cut))
    report = context.report
    position = {doc.id: i + 1 for i, doc in enumerate(docs)}
    kept = [doc for doc in docs if doc.id in report.kept_ids]
    worst_budget = max((position[doc.id] for doc in kept), default=0)
    worst_fused = max((doc.metadata[FUSED_RANK] for doc in kept), default=0)
    expected = [
        r
        for r in report.drops
        if r.reason not in (DropReason.DUPLICATE, DropReason.FUSION_CUT)
        and r.rank < (worst_budget if r.stage == Stage.BUDGET else worst_fused)
    ]
    lines = drop_lines(context_warnings(context))
    assert all(len(line.splitlines()) == 1 for line in lines)
    if not expected:
        return
    (line,) = lines
    # Every one is in the structured answer; the line names the first three whole
    # (out-ranking drops come first) and counts the rest as "+N more".
    lost = likely_lost_of(context)
    assert {id(r) for r in expected} <= {id(item.record) for item in lost}
    named = line.removesuffix("]").split("evidence likely lost: ", 1)[1]
    named = named.split("; ")[0]
    for record in sorted(expected, key=lambda r: (list(Stage).index(r.stage), r.rank))[
        :MAX_NAMED
    ]:
        assert (
            f"{one_line(record.key, 300)} ({record.stage}/{record.reason}: "
            f"rank {record.rank}, while rank"
        ) in named
    if len(lost) > MAX_NAMED:
        assert named.endswith(f" +{len(lost) - MAX_NAMED} more")


def test_a_high_score_far_past_the_cut_is_counted_not_named() -> None:
    """Fusion ranked it far below the cut: a dense favourite BM25 disagrees with."""
    scores = [0.6, 0.5, 0.55, 0.3, 0.2, 0.9]  # the last: above the top, rank 6
    docs = [
        Document(id=f"d{i}", page_content=f"passage {i}", metadata={"dense_score": s})
        for i, s in enumerate(scores)
    ]
    stage = budget(max_docs=2, weak_evidence={"thresholds": {"dense_score": 0.2}})
    context = stage.fit(docs)
    assert likely_lost_of(context) == []  # first past the cut (d2) is not close
    (line,) = drop_lines(context_warnings(context))
    assert line == "[warning: chat context: 4 lower-ranked left out (4 over_max_docs)]"
    named = likely_lost(
        context.documents,
        context.report.kept_ids,
        context.report.drops,
        "dense_score",
        context.evidence.score,
        near_cut=None,  # without the rank test, the far drop would be named
    )
    assert [item.record.key for item in named] == ["d5"]
