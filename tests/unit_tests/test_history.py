"""Chat history on the prompt budget, and the per-source and per-retriever caps.

Real tiktoken throughout. The whole prompt is checked the way a chat model sees
it: the prompt is rendered to messages, the messages to the chat markup (one
special token per marker, an encoding extended as tiktoken documents), and that
text is counted by tiktoken itself, independently of the package's formula.
"""

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from pydantic import ValidationError

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._history import (
    fit_history,
    message_tokens,
    prompt_tokens,
    role_of,
)
from langchain_ragbudget.chain._stuff import context_warnings, prompt_variables
from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import ConfigError, InvalidInputError
from langchain_ragbudget.ledger._records import DropReason, Stage

pytestmark = pytest.mark.needs_tiktoken

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer only from the numbered context documents. Cite them."),
        MessagesPlaceholder("history"),
        ("human", "Context:\n{context}\nQuestion: {question}"),
    ]
)


@functools.cache
def chat_markup(encoding_name: str) -> tiktoken.Encoding:
    """The encoding with the chat markers as special tokens (tiktoken's README)."""
    base = tiktoken.get_encoding(encoding_name)
    top = base.n_vocab
    return tiktoken.Encoding(
        name=f"{encoding_name}_chat",
        pat_str=base._pat_str,
        mergeable_ranks=base._mergeable_ranks,
        special_tokens={
            **base._special_tokens,
            "<|im_start|>": top,
            "<|im_sep|>": top + 1,
            "<|im_end|>": top + 2,
        },
    )


def rendered_count(messages: list[BaseMessage], encoding_name: str) -> int:
    """Tiktoken's count of the messages rendered as the chat model reads them."""
    parts = []
    for message in messages:
        role = role_of(message)
        label = (
            message.tool_call_id if isinstance(message, ToolMessage) else message.name
        )
        if label:
            role = f"{role}<|im_sep|>{label}"  # the name or call id: its own marker
        body = str(message.text)
        for call in getattr(message, "tool_calls", []):
            arguments = json.dumps(call["args"], ensure_ascii=False, sort_keys=True)
            body += (
                f'\n{{"arguments": {arguments}, "name": {json.dumps(call["name"])}}}'
            )
        parts.append(f"<|im_start|>{role}<|im_sep|>{body}<|im_end|>")
    parts.append("<|im_start|>assistant<|im_sep|>")
    encoding = chat_markup(encoding_name)
    return len(encoding.encode("".join(parts), allowed_special="all"))


def turn(i: int, text: str) -> BaseMessage:
    return HumanMessage(text) if i % 2 == 0 else AIMessage(text)


def budget(prompt: Any = PROMPT, **surface: Any) -> ContextBudget:
    fields = {"max_docs": 6, "max_tokens": 400, "encoding": "cl100k_base"}
    return ContextBudget(
        settings=SurfaceSettings(**{**fields, **surface}), prompt=prompt
    )


def passages(texts: list[str]) -> list[Document]:
    return [
        Document(page_content=t, id=f"p{i}", metadata={"doc_id": f"d{i}"})
        for i, t in enumerate(texts)
    ]


TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=80,
)


# --- counting messages as the chat model does ----------------------------------


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(TEXT, min_size=0, max_size=6),
    name=st.none() | st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
)
def test_message_count_equals_tiktoken_on_the_rendered_messages(
    encoding: str, texts: list[str], name: str | None
) -> None:
    messages: list[BaseMessage] = [SystemMessage("Be brief.")]
    messages += [turn(i, text) for i, text in enumerate(texts)]
    messages.append(HumanMessage("the question", name=name))
    assert prompt_tokens(messages, encoding) == rendered_count(messages, encoding)


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@settings(max_examples=40, deadline=None)
@given(
    arguments=st.dictionaries(
        st.from_regex(r"[a-z_]{1,10}", fullmatch=True),
        TEXT | st.integers() | st.lists(TEXT, max_size=4),
        max_size=4,
    ),
    text=st.just("") | TEXT,
    result=TEXT,
)
def test_tool_calls_and_their_results_are_counted_as_sent(
    encoding: str, arguments: dict[str, Any], text: str, result: str
) -> None:
    call = {"name": "search_docs", "args": arguments, "id": "call_1"}
    messages: list[BaseMessage] = [
        HumanMessage("look it up"),
        AIMessage(text, tool_calls=[call]),
        ToolMessage(result, tool_call_id="call_1"),
    ]
    counted = prompt_tokens(messages, encoding)
    assert counted == rendered_count(messages, encoding)
    without_call = [messages[0], AIMessage(text), ToolMessage(result, tool_call_id="")]
    assert counted > prompt_tokens(without_call, encoding)  # the call is not free


def test_a_long_tool_call_costs_what_its_arguments_cost() -> None:
    words = " ".join(f"word{i}" for i in range(3000))
    message = AIMessage(
        "", tool_calls=[{"name": "save", "args": {"notes": words}, "id": "c"}]
    )
    assert prompt_tokens([message], "cl100k_base") > count_tokens(words, "cl100k_base")


# --- fit_history: pure ---------------------------------------------------------


def test_history_is_dropped_oldest_first_whole_with_records() -> None:
    history = [turn(i, f"turn number {i} " * (i + 1)) for i in range(8)]
    costs = [message_tokens(m, "cl100k_base") for m in history]
    budget_tokens = sum(costs[-3:]) + costs[-4] - 1  # the 4th newest just misses
    kept, dropped = fit_history(
        history, budget_tokens, lambda m: message_tokens(m, "cl100k_base")
    )
    # the three newest fit, but the oldest of them answers a dropped question
    assert kept == history[-2:]
    assert isinstance(kept[0], HumanMessage)
    assert [r.rank for r in dropped] == [1, 2, 3, 4, 5, 6]  # oldest first
    assert all(r.stage == Stage.HISTORY for r in dropped)
    assert all(r.reason == DropReason.MAX_TOKENS for r in dropped)
    assert [r.document.page_content for r in dropped] == [
        str(m.text) for m in history[:6]
    ]
    assert dropped[3].tokens == costs[3]
    assert "whole turns only" in dropped[5].detail


def test_a_tool_result_never_stays_without_its_call() -> None:
    call = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}])
    history = [HumanMessage("hi"), call, ToolMessage("42 " * 30, tool_call_id="c1")]
    tool_cost = message_tokens(history[2], "cl100k_base")
    kept, dropped = fit_history(
        history, tool_cost, lambda m: message_tokens(m, "cl100k_base")
    )
    assert kept == []
    assert [r.rank for r in dropped] == [1, 2, 3]


# --- the budget: history and context on one prompt budget --------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    history=st.lists(TEXT, max_size=12),
    texts=st.lists(TEXT.map(lambda t: (t + " ") * 4), min_size=0, max_size=8),
    max_prompt=st.integers(150, 900),
    reserve=st.integers(0, 100),
    share=st.floats(0, 1),
    question=TEXT,
)
def test_the_rendered_prompt_stays_within_max_prompt_tokens(
    history: list[str],
    texts: list[str],
    max_prompt: int,
    reserve: int,
    share: float,
    question: str,
) -> None:
    turns = [turn(i, text) for i, text in enumerate(history)]
    chosen = budget(
        max_prompt_tokens=max_prompt,
        reserve_output_tokens=reserve,
        history_share=share,
        min_docs=0,
        packing="skip",
    )
    state = {"question": question, "documents": passages(texts), "history": turns}
    out = chosen.invoke(state)
    context = out["context"]
    kept = out["history"]
    # the kept history is the newest part, whole; the rest is recorded oldest first
    assert kept == turns[len(turns) - len(kept) :]
    records = [r for r in context.report.drops if r.stage == Stage.HISTORY]
    assert [r.rank for r in records] == list(range(1, len(turns) - len(kept) + 1))
    variables = prompt_variables(question, context, PROMPT, extra={"history": kept})
    sent = PROMPT.invoke(variables).to_messages()  # exactly what the chain sends
    tokens = rendered_count(sent, "cl100k_base")
    room = context.report.prompt
    assert room is not None and room.prompt_tokens == tokens
    if room.fixed_tokens + reserve <= max_prompt:
        assert tokens <= max_prompt - reserve
        assert not context.report.over_budget
    else:  # the system prompt and question alone do not fit: said, not hidden
        assert context.report.over_budget and kept == []


def test_history_share_decides_who_gets_the_room() -> None:
    turns = [turn(i, f"an old remark number {i} " * 6) for i in range(10)]
    docs = passages([f"passage {i} on salt and blood pressure. " * 6 for i in range(6)])
    question = "what lowers blood pressure?"
    kept_turns = []
    kept_docs = []
    for share in (0.1, 0.9):
        context = budget(max_prompt_tokens=700, history_share=share).fit(
            docs, question=question, history=turns
        )
        assert context.report.prompt is not None
        assert context.report.prompt.history_share == share
        assert context.report.to_dict()["prompt"]["history_share"] == share
        kept_turns.append(len(context.history))
        kept_docs.append(len(context.report.kept_ids))
    assert kept_turns[0] < kept_turns[1]
    assert kept_docs[0] > kept_docs[1]


def test_dropped_turns_are_counted_in_the_warning() -> None:
    turns = [turn(i, f"an old remark number {i} " * 10) for i in range(6)]
    context = budget(max_prompt_tokens=300, history_share=0.3).fit(
        passages(["salt raises blood pressure."]), question="why?", history=turns
    )
    dropped = [r for r in context.report.drops if r.stage == Stage.HISTORY]
    assert dropped
    line = next(w for w in context_warnings(context) if "history" in w)
    assert f"{len(dropped)} history turn(s) dropped" in line


def test_without_max_prompt_tokens_history_passes_unchanged() -> None:
    turns = [turn(i, "a long remark " * 200) for i in range(6)]
    docs = passages(["salt raises blood pressure. " * 3, "potassium lowers it. " * 3])
    plain = budget()
    before = plain.fit(docs, question="why?")
    state = {"question": "why?", "documents": docs, "history": turns}
    out = plain.invoke(state)
    assert out["history"] == turns
    after = out["context"]
    assert after.report.prompt is None
    assert after.report.to_dict() == {**before.report.to_dict(), "prompt": None}
    assert after.text == before.text


def test_history_that_is_not_messages_is_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"input\['history'\].*int"):
        budget(max_prompt_tokens=500).invoke(
            {"question": "q", "documents": [], "history": [42]}
        )


def test_a_reservation_that_leaves_no_room_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="reserve_output_tokens"):
        SurfaceSettings(
            max_docs=1, max_tokens=10, max_prompt_tokens=100, reserve_output_tokens=100
        )
    path = tmp_path / "r.yml"
    path.write_text(
        "surfaces:\n  chat:\n    max_prompt_tokens: 50\n    reserve_output_tokens: 60\n"
    )
    with pytest.raises(ConfigError, match="reserve_output_tokens"):
        load_config(path)


# --- per-source and per-retriever caps ---------------------------------------


def test_max_per_source_drops_with_its_own_reason() -> None:
    docs = [
        Document(page_content=f"passage {i}.", id=f"a{i}", metadata={"doc_id": "A"})
        for i in range(3)
    ] + [Document(page_content="other.", id="b0", metadata={"doc_id": "B"})]
    context = budget(prompt=None, max_per_source=1, max_docs=2).fit(docs)
    assert context.report.kept_ids == ["a0", "b0"]
    drops = {r.key: r for r in context.report.drops}
    assert {drops["a1"].reason, drops["a2"].reason} == {DropReason.MAX_PER_SOURCE}
    assert "max_per_source=1" in drops["a1"].detail


def test_max_per_retriever_counts_the_best_ranking_retriever() -> None:
    def doc(i: int, ranks: dict[str, int]) -> Document:
        meta = {"doc_id": f"d{i}", **{f"{k}_rank": v for k, v in ranks.items()}}
        return Document(page_content=f"passage {i}.", id=f"p{i}", metadata=meta)

    docs = [
        doc(0, {"bm25": 1, "dense": 3}),
        doc(1, {"bm25": 2}),
        doc(2, {"dense": 1, "bm25": 5}),
        doc(3, {"bm25": 3, "fused": 1}),
    ]
    context = budget(prompt=None, max_per_retriever=1).fit(docs)
    assert context.report.kept_ids == ["p0", "p2"]
    drops = {r.key: r for r in context.report.drops}
    assert drops["p1"].reason == DropReason.MAX_PER_RETRIEVER
    assert drops["p3"].reason == DropReason.MAX_PER_RETRIEVER
    assert "'bm25'" in drops["p1"].detail


def test_caps_unset_keep_todays_packing() -> None:
    docs = [
        Document(page_content=f"passage {i}.", id=f"a{i}", metadata={"doc_id": "A"})
        for i in range(4)
    ]
    context = budget(prompt=None).fit(docs)
    assert context.report.kept_ids == ["a0", "a1", "a2", "a3"]
    assert context.report.drops == []


# --- the catalogue of bad input (RELIABILITY.md, "History on the same budget") --


def _surface(**fields: Any) -> SurfaceSettings:
    return SurfaceSettings(max_docs=1, max_tokens=10, **fields)


def _with_history(history: Any) -> Any:
    state = {"question": "q", "documents": [], "history": history}
    return budget(max_prompt_tokens=500).invoke(state)


HISTORY_CASES: list[tuple[str, Any, type[Exception], str]] = [
    (
        "history-not-messages",
        lambda: _with_history([42]),
        InvalidInputError,
        r"input\['history'\] must be a list of messages, \(role, text\) tuples",
    ),
    ("history-a-string", lambda: _with_history("hello"), InvalidInputError, "got str"),
    (
        "reserve-leaves-no-room",
        lambda: _surface(max_prompt_tokens=100, reserve_output_tokens=100),
        ValidationError,
        r"reserve_output_tokens \(100\) leaves no room in max_prompt_tokens \(100\)",
    ),
    (
        "history-share-over-one",
        lambda: _surface(history_share=1.5),
        ValidationError,
        r"history_share\n\s+Input should be less than or equal to 1",
    ),
    (
        "max-per-source-zero",
        lambda: _surface(max_per_source=0),
        ValidationError,
        r"max_per_source\n\s+Input should be greater than or equal to 1",
    ),
    (
        "max-per-retriever-bool",
        lambda: _surface(max_per_retriever=True),
        ValidationError,
        r"max_per_retriever\n\s+Input should be a valid integer",
    ),
]


@pytest.mark.parametrize(
    ("case", "run", "raises", "match"), HISTORY_CASES, ids=[c[0] for c in HISTORY_CASES]
)
def test_history_catalogue(
    case: str, run: Any, raises: type[Exception], match: str
) -> None:
    with pytest.raises(raises, match=match):
        run()


def test_history_catalogue_is_listed_in_reliability_md() -> None:
    text = (Path(__file__).resolve().parents[2] / "RELIABILITY.md").read_text()
    section = text.split("### History on the same budget", 1)[1]
    listed = [
        line.split("`")[1]
        for line in section.splitlines()
        if line.startswith("| `") and line.count("|") == 3
    ]
    assert listed == [case[0] for case in HISTORY_CASES]


def test_each_dropped_turn_says_why() -> None:
    words = [5, 5, 40, 5, 5]
    turns = [turn(i, f"remark {i} " + "word " * n) for i, n in enumerate(words)]
    count = functools.partial(message_tokens, encoding="cl100k_base")
    newest_two = count(turns[3]) + count(turns[4])
    kept, dropped = fit_history(turns, newest_two + 5, count)
    assert kept == turns[4:]  # turn 4's answer fitted, but its question did not
    assert "needs" in dropped[2].detail and f"took {newest_two} of" in dropped[2].detail
    assert "question was dropped" in dropped[3].detail
    for record in dropped[:2]:  # fit alone, but older than the turn that did not
        assert "older than turn 3, which did not fit" in record.detail
