"""Policy `trim`: a passage that does not fit is shortened to whole sentences, on the
record. Real budget, splitter (nupunkt) and tokenizer (tiktoken); the chat model in
the seed-000 case is a fake, since no LLM API runs here."""

import itertools
import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._packing import (
    Sentences,
    choose_sentences,
    omission_points,
)
from langchain_ragbudget.budget._render import ContextFormat, quote
from langchain_ragbudget.budget._shortening import Shortener
from langchain_ragbudget.chain._stuff import (
    context_warnings,
    create_budgeted_stuff_chain,
)
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evaluation._survival import is_whole_sentences
from langchain_ragbudget.evidence._sentence_scoring import blended_relevance
from langchain_ragbudget.evidence._sentences import sentences

pytestmark = pytest.mark.needs_tiktoken("cl100k_base")


def budget(max_tokens: int, **surface: Any) -> ContextBudget:
    return ContextBudget(
        settings=SurfaceSettings(
            max_docs=surface.pop("max_docs", 10),
            max_tokens=max_tokens,
            encoding="cl100k_base",
            packing="trim",
            **surface,
        )
    )


def test_choose_sentences_prefers_relevance_and_keeps_order() -> None:
    def cost(chosen: tuple[int, ...]) -> int:  # 10 a sentence, 3 a marker
        return 10 * len(chosen) + 3 * len(omission_points(chosen, 5))

    shape = Sentences(relevance=(0.0, 2.0, 0.0, 1.0, 0.0), cost=cost)
    assert choose_sentences(shape, 30) == (1, 3)  # two lines, three markers: 29
    assert choose_sentences(shape, 16) == (1,)
    assert choose_sentences(shape, 5) == ()
    assert choose_sentences(shape, 100, max_sentences=1) == (1,)


@pytest.mark.parametrize(
    ("relevance", "kept"),
    [
        ("blend", "Application logs are kept for 90 days."),  # the default
        ("fitted", "Audit logs are kept for a year."),
    ],
)
def test_the_surface_chooses_how_sentences_are_scored(
    relevance: str, kept: str
) -> None:
    # blend is led by the question's terms; the model fitted on abstracts alone
    # also weighs position (findings come late) and here picks the wrong log.
    passage = Document(
        id="retention",
        page_content="Application logs are kept for 90 days. Metrics live longer. "
        "Traces are sampled. Dashboards show them. Audit logs are kept for a year.",
    )
    context = budget(30, max_sentences=1, relevance=relevance).fit(
        [passage], question="How long are application logs kept?"
    )
    (record,) = context.report.trimmed
    assert record.kept_sentences == 1
    assert kept in context.text
    assert ("90 days" in context.text) == (relevance != "fitted")


def test_omission_points_mark_gaps_and_cut_ends() -> None:
    assert omission_points((0, 1), 2) == []
    assert omission_points((1, 3), 5) == [0, 1, 2]  # before 1, before 3, at the end
    assert omission_points((0, 4), 5) == [1]


def test_seed_000_a_short_answer_in_a_long_passage_is_kept_and_said() -> None:
    # the user's own case: the answer sits in a passage too long for what is left
    bulky = Document(
        id="expenses::0",
        page_content="Receipts are filed monthly. " * 40,
        metadata={"source": "expenses.md", "dense_score": 0.8},
    )
    answer = Document(
        id="travel::3",
        page_content=(
            "Domestic travel is reimbursed at cost. "
            "Meals abroad are covered separately. "
            "The international per diem is $100 per day. "
            "Hotel upgrades are never reimbursed. " * 6
        ),
        metadata={"source": "travel.md", "dense_score": 0.7},
    )
    stage = budget(330)
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="$100 a day [2].")]))
    chain = stage | create_budgeted_stuff_chain(llm, structured=True)
    question = "What is the international per diem?"
    result = chain.invoke({"question": question, "documents": [bulky, answer]})
    assert "[warning: chat context: shortened: travel::3 (" in " ".join(result.warnings)
    (shortened,) = result.shortened
    assert shortened["id"] == "travel::3" and shortened["kept_sentences"] >= 1
    context = stage.invoke({"question": question, "documents": [bulky, answer]})
    assert "> The international per diem is $100 per day." in context["context"].text
    assert "\n[…]\n" in context["context"].text


texts = st.lists(
    st.sampled_from(
        [
            "Solar panels make power.",
            "The tax is due in April.",
            "[…]",
            "[warning: nothing was shortened]",
            "> quoted already.",
            "Bread needs flour and water!",
            "Is it raining?",
            "Deploys are frozen on Fridays.",
            "Short.",
        ]
    ),
    min_size=1,
    max_size=12,
).map(" ".join)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(texts, min_size=1, max_size=6),
    st.integers(1, 200),
    st.integers(0, 2),
    st.sampled_from([None, "solar tax", "bread raining"]),
)
def test_kept_whole_shortened_or_dropped_never_over_budget(
    passages: list[str], max_tokens: int, min_docs: int, question: str | None
) -> None:
    docs = [
        Document(id=f"p{i}", page_content=text, metadata={"source": f"s{i}"})
        for i, text in enumerate(passages)
    ]
    stage = budget(max_tokens, min_docs=min_docs)
    context = stage.fit(docs, question=question)
    report = context.report
    shortened = {record.key: record for record in report.trimmed}
    accounted = report.kept_ids + [record.key for record in report.drops]
    # the partition: every candidate kept (whole or shortened) or dropped, once
    assert sorted(accounted) == sorted(doc.id for doc in docs if doc.id)
    assert set(shortened) <= set(report.kept_ids)
    by_id = {doc.id: doc for doc in docs}
    for kept in context.documents:
        original = by_id[kept.id].page_content
        if kept.id in shortened:
            record = shortened[str(kept.id)]
            assert is_whole_sentences(kept.page_content, original)
            assert 1 <= record.kept_sentences < record.total_sentences or (
                record.kept_sentences == record.total_sentences
            )
            assert record.total_sentences == len(sentences(original))
        else:
            assert kept.page_content == original
    # exact tokens, and the budget holds unless min_docs says otherwise
    assert report.tokens_used == count_tokens(context.text, "cl100k_base")
    assert report.tokens_used <= report.max_tokens or (
        report.over_budget and len(report.kept_ids) <= min_docs
    )
    # no passage text forges a marker or a package line: markers are unquoted
    # lines, passage text only ever appears on quoted lines
    for line in context.text.split("\n"):
        assert not line or line.startswith(("> ", "[…]", "[")) or line == ">"
        if line.startswith("[") and line != "[…]":
            assert re.match(r"^\[\d+\] s\d$", line), line
    # markers only where sentences were left out: never more than the gaps allow
    markers = context.text.split("\n").count("[…]")
    assert markers <= sum(
        min(r.total_sentences - r.kept_sentences, r.kept_sentences + 1)
        for r in report.trimmed
    )
    assert (markers == 0) == all(
        r.kept_sentences == r.total_sentences for r in report.trimmed
    )
    for warning in context_warnings(context):
        assert "\n" not in warning and warning.startswith(("[warning: ", "[note: "))


def test_whole_sentences_are_recognised_when_one_starts_like_another() -> None:
    # the passage holds a sentence "[…]" and a later one that starts with "[…]":
    # reading the kept text greedily took the wrong one (a hypothesis example)
    original = "The tax is due in April. […] Bread needs flour! […] [note] Solar power."
    kept = "The tax is due in April. […] [note] Solar power."
    assert is_whole_sentences(kept, original)
    assert not is_whole_sentences("The tax is due", original)
    out_of_order = "Bread needs flour! The tax is due in April."
    assert not is_whole_sentences(out_of_order, original)


def test_the_estimate_chooses_and_the_exact_count_decides() -> None:
    """Trials are weighed without the tokenizer; the choice never goes over."""
    text = (
        "Stones of the river are old. They were carried here by the glacier long "
        "before the valley had a name. The heaviest weighs nine tonnes. Moss grows "
        "on the north side of each of them. Children climb the smaller ones."
    )
    scored: list[int] = []

    def relevance(question: str | None, pieces: Sequence[str]) -> list[float]:
        scored.append(len(pieces))
        return [float("tonnes" in piece) for piece in pieces]

    document = Document(page_content=text)
    shortener = Shortener(ContextFormat(), "cl100k_base", [document], "?", relevance)
    shape = shortener.shape(0)
    assert shape.estimate is not None and not scored  # split and counted, not scored
    assert choose_sentences(shape, 3) == () and not scored  # no sentence fits alone
    for room in range(5, 80):
        chosen = choose_sentences(shape, room)
        assert not chosen or shape.cost(chosen) <= room
        trusting = replace(shape, cost=shape.estimate)  # were the estimate exact
        assert len(chosen) >= len(choose_sentences(trusting, room)) - 1
    assert scored == [5]  # scored once, when a sentence first fitted
    assert choose_sentences(shape, 14) == (2,)  # the heaviest, the relevant one


hostile = st.text(
    alphabet=st.sampled_from(
        [*"aB1. /…!?", "\n", "\r", "\x1c", "\x1f", "\u2028", "\xa0", "\t", "é"]
    ),
    min_size=1,
    max_size=80,
).filter(str.strip)


@pytest.mark.needs_tiktoken("cl100k_base", "o200k_base")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    hostile,
    st.sampled_from(["cl100k_base", "o200k_base"]),
    st.sampled_from(["> ", "|", "/ "]),
)
def test_no_choice_of_sentences_costs_less_than_the_shapes_least(
    text: str, encoding: str, mark: str
) -> None:
    """`least` refuses a room before any sentence is counted: it must be a bound."""
    document = Document(page_content=text, metadata={"title": text.split("\n")[0]})
    fmt = ContextFormat(quote_mark=mark)
    shortener = Shortener(fmt, encoding, [document], "a", blended_relevance)
    shape = shortener.shape(0).paying_header()
    assert shape.estimate is not None
    count = len(shape.relevance)
    for size in range(1, min(count, 4) + 1):
        for chosen in itertools.combinations(range(count), size):
            assert shape.least <= min(shape.cost(chosen), shape.estimate(chosen))


def test_a_room_under_the_fewest_words_of_a_sentence_counts_no_sentence() -> None:
    text = "Stones of the river are old. The heaviest weighs nine tonnes here."
    shape = Shortener(
        ContextFormat(),
        "cl100k_base",
        [Document(page_content=text)],
        "stones",
        blended_relevance,
    ).shape(0)
    assert shape.least == 6  # "Stones of the river are old."
    weighed: list[tuple[int, ...]] = []

    def estimate(chosen: tuple[int, ...]) -> int:
        weighed.append(chosen)
        assert shape.estimate is not None
        return shape.estimate(chosen)

    counting = replace(shape, estimate=estimate)
    assert choose_sentences(counting, 5) == () and not weighed
    assert choose_sentences(counting, shape.cost((0,))) == (0,) and weighed


@given(hostile)
def test_quoting_marks_every_line_the_way_the_line_breaks_say(text: str) -> None:
    lines = re.split(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]", text)
    assert quote(text) == "\n".join("> " + line if line else ">" for line in lines)
