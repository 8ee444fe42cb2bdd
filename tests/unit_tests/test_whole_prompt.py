"""The whole prompt the chain sends fits `max_prompt_tokens`, counted as sent.

`create_budgeted_rag_chain` gives its prompt to the budget, so a surface with
`max_prompt_tokens` counts what the model is sent: the system text, the kept
history, the context (or the empty-context text), the weak-evidence note the
chain adds after the budget, and the question. The messages are captured at the
chat model and counted by tiktoken on their chat markup (`test_history`'s
independent count). The chat model is a fake standing in for an LLM API that
cannot run here; retriever input, budget, prompt and chain are the real code.
"""

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from list_retriever import ListRetriever
from sent_to_model import Sent
from test_history import rendered_count

from langchain_ragbudget import ContextBudget, create_budgeted_rag_chain
from langchain_ragbudget.budget._prompt import (
    DEFAULT_PROMPT,
    EMPTY_CONTEXT,
    NO_CONTEXT_NOTE,
)
from langchain_ragbudget.chain._warnings import context_warnings
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.errors import InvalidInputError

pytestmark = pytest.mark.needs_tiktoken

HISTORY_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the numbered context only.{evidence_note}"),
        MessagesPlaceholder("history"),
        ("human", "Context:\n{context}\nQuestion: {question}"),
    ]
)
WEAK = {"thresholds": {"dense_score": 0.9}}  # every passage below: the note is sent


def chain(documents: list[Document], prompt: Any = None, **surface: Any) -> Any:
    fields = {"max_docs": 8, "max_tokens": 2_000, "encoding": "cl100k_base"}
    budget = ContextBudget(settings=SurfaceSettings(**{**fields, **surface}))
    model = GenericFakeChatModel(messages=iter([AIMessage("An answer [1].")] * 2))
    return create_budgeted_rag_chain(
        ListRetriever(documents=documents), model, budget=budget, prompt=prompt
    )


def passage(i: int, text: str) -> Document:
    return Document(
        id=f"p{i}",
        page_content=text,
        metadata={"doc_id": f"d{i}", "source": f"d{i}.md", "dense_score": 0.2},
    )


def ask(runnable: Any, question: str, **state: Any) -> Sent:
    sent = Sent()
    runnable.invoke({"question": question, **state}, {"callbacks": [sent]})
    assert len(sent.messages) == 1 and len(sent.reports) == 1
    return sent


TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00"),
    min_size=1,
    max_size=120,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    history=st.lists(TEXT, max_size=10),
    texts=st.lists(TEXT, max_size=8),
    max_prompt=st.integers(150, 1_500),
    reserve=st.integers(0, 120),
    share=st.floats(0.0, 1.0),
    weak=st.booleans(),
    with_history=st.booleans(),
)
def test_what_the_chain_sends_fits_max_prompt_tokens(
    history: list[str],
    texts: list[str],
    max_prompt: int,
    reserve: int,
    share: float,
    weak: bool,
    with_history: bool,
) -> None:
    turns = [
        HumanMessage(t) if i % 2 == 0 else AIMessage(t) for i, t in enumerate(history)
    ]
    runnable = chain(
        [passage(i, t) for i, t in enumerate(texts)],
        HISTORY_PROMPT if with_history else None,
        max_prompt_tokens=max(max_prompt, reserve + 1),
        reserve_output_tokens=reserve,
        history_share=share,
        min_docs=0,
        packing="skip",
        weak_evidence=WEAK if weak else {},
    )
    state = {"history": turns} if with_history else {}
    sent = ask(runnable, "what does the context say?", **state)
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    report = sent.reports[0]
    assert report["prompt"]["prompt_tokens"] == tokens  # counted as sent
    limit = max(max_prompt, reserve + 1) - reserve
    if report["prompt"]["fixed_tokens"] <= limit and not report["over_budget"]:
        assert tokens <= limit
    else:  # the fixed parts alone do not fit: said, not hidden
        assert report["over_budget"]


def test_the_default_prompt_and_the_weak_note_are_counted() -> None:
    """The shipped prompt's system text and the ~45-token note are in the count."""
    texts = [f"Passage {i} says salt raises blood pressure. " * 8 for i in range(6)]
    runnable = chain(
        [passage(i, t) for i, t in enumerate(texts)],
        max_prompt_tokens=600,
        reserve_output_tokens=100,
        weak_evidence=WEAK,
    )
    sent = ask(runnable, "what raises blood pressure?")
    system = str(sent.messages[0][0].content)
    assert system.startswith("Answer only from the numbered context documents.")
    assert "highest relevance score of the context is low" in system
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    assert tokens == sent.reports[0]["prompt"]["prompt_tokens"] <= 500
    assert not sent.reports[0]["over_budget"]
    dropped = [d for d in sent.reports[0]["dropped"] if d["stage"] == "budget"]
    assert dropped, "600 tokens cannot hold six passages of ~80 tokens and the rest"


def test_an_empty_context_is_counted_with_its_text() -> None:
    runnable = chain([], max_prompt_tokens=300, reserve_output_tokens=50)
    sent = ask(runnable, "anything?")
    human = str(sent.messages[0][-1].content)
    assert EMPTY_CONTEXT.strip() in human
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    assert tokens == sent.reports[0]["prompt"]["prompt_tokens"] <= 250


def test_the_structured_answer_says_how_the_prompt_was_shared() -> None:
    budget = ContextBudget(
        settings=SurfaceSettings(
            max_docs=4, max_tokens=400, max_prompt_tokens=700, history_share=0.25
        )
    )
    model = GenericFakeChatModel(messages=iter([AIMessage("An answer [1].")]))
    rag = create_budgeted_rag_chain(
        ListRetriever(documents=[passage(0, "Salt raises blood pressure.")]),
        model,
        budget=budget,
        prompt=HISTORY_PROMPT,
        structured=True,
    )
    history = [HumanMessage("an earlier question"), AIMessage("an earlier answer")]
    answer = rag.invoke({"question": "what raises it?", "history": history})
    assert answer.prompt is not None
    assert answer.prompt["max_prompt_tokens"] == 700
    assert answer.prompt["history_share"] == 0.25
    assert answer.prompt["history_tokens"] > 0
    assert "whole prompt" in answer._repr_html_()
    unbudgeted = ContextBudget(settings=SurfaceSettings(max_docs=4, max_tokens=400))
    model = GenericFakeChatModel(messages=iter([AIMessage("An answer [1].")]))
    plain = create_budgeted_rag_chain(
        ListRetriever(documents=[passage(0, "Salt raises blood pressure.")]),
        model,
        budget=unbudgeted,
        structured=True,
    ).invoke("what raises it?")
    assert plain.prompt is None


def test_the_fixed_parts_hold_no_passage_even_with_min_docs() -> None:
    """A passage min_docs forces is context, not a fixed part: it is paid once."""
    texts = [f"Passage {i} says salt raises blood pressure. " * 8 for i in range(4)]
    runnable = chain(
        [passage(i, t) for i, t in enumerate(texts)],
        max_prompt_tokens=900,
        max_tokens=700,
        min_docs=1,
    )
    sent = ask(runnable, "what raises blood pressure?")
    room = sent.reports[0]["prompt"]
    empty_prompt = DEFAULT_PROMPT.invoke(
        {"question": "what raises blood pressure?", "context": EMPTY_CONTEXT}
        | {"evidence_note": NO_CONTEXT_NOTE}
    ).to_messages()
    assert room["fixed_tokens"] == rendered_count(empty_prompt, "cl100k_base")
    assert room["context_budget"] == 700  # all of max_tokens: the room allows it
    assert len(sent.reports[0]["kept_ids"]) == 4  # every passage fits


# --- what LangChain users pass: any variable, any placeholder, any format -----

FACTS_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the context. The account: {account_facts}"),
        ("human", "Context:\n{context}\nQuestion: {question}"),
    ]
)
SALT = [
    passage(i, f"Passage {i} says salt raises blood pressure. " * 6) for i in range(6)
]


@pytest.mark.parametrize(
    "facts",
    [
        [f"fact {i}: the account has feature number {i} enabled" for i in range(120)],
        {f"feature_{i}": f"enabled since release {i}" for i in range(80)},
        3.14159,
    ],
    ids=["list", "dict", "float"],
)
def test_variables_of_any_type_are_counted_as_sent(facts: Any) -> None:
    runnable = chain(
        SALT, FACTS_PROMPT, max_prompt_tokens=2_500, reserve_output_tokens=100
    )
    sent = ask(runnable, "what raises blood pressure?", account_facts=facts)
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    assert str(facts) in str(sent.messages[0][0].content)
    assert sent.reports[0]["prompt"]["prompt_tokens"] == tokens <= 2_400


CHAT_HISTORY_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer from the numbered context only."),
        MessagesPlaceholder("chat_history"),
        ("human", "Context:\n{context}\nQuestion: {question}"),
    ]
)
FORMATS = {
    "messages": lambda i, t: HumanMessage(t) if i % 2 == 0 else AIMessage(t),
    "tuples": lambda i, t: ("human" if i % 2 == 0 else "ai", t),
    "openai_dicts": lambda i, t: {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": t,
    },
}


@pytest.mark.parametrize("form", sorted(FORMATS))
def test_any_placeholder_name_and_format_is_budgeted(form: str) -> None:
    history = [FORMATS[form](i, f"remark {i}: " + "salt " * 80) for i in range(20)]
    runnable = chain(
        SALT, CHAT_HISTORY_PROMPT, max_prompt_tokens=1_500, reserve_output_tokens=300
    )
    sent = ask(runnable, "what raises blood pressure?", chat_history=history)
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    report = sent.reports[0]
    assert report["prompt"]["prompt_tokens"] == tokens <= 1_200
    turns = [d for d in report["dropped"] if d["stage"] == "history"]
    assert turns and [d["rank"] for d in turns] == list(range(1, len(turns) + 1))
    received = sent.messages[0][1:-1]  # between the system text and the question
    assert len(received) == 20 - len(turns)
    assert str(received[-1].text) == "remark 19: " + "salt " * 80


def test_the_default_prompt_sends_the_history_it_charges() -> None:
    runnable = chain(SALT, max_prompt_tokens=2_000)
    history = [("human", "my name is Ada"), ("ai", "hello Ada")]
    sent = ask(runnable, "what raises blood pressure?", history=history)
    texts = [str(m.text) for m in sent.messages[0]]
    assert texts[1:3] == ["my name is Ada", "hello Ada"]
    room = sent.reports[0]["prompt"]
    assert room["history_tokens"] > 0
    assert room["prompt_tokens"] == rendered_count(sent.messages[0], "cl100k_base")


def test_history_the_prompt_has_no_place_for_is_refused() -> None:
    runnable = chain(SALT, FACTS_PROMPT, max_prompt_tokens=2_000)
    with pytest.raises(InvalidInputError, match="no place for it"):
        ask(runnable, "why?", account_facts="x", history=[("human", "hi")])
    unbudgeted = chain(SALT, FACTS_PROMPT)  # refused without max_prompt_tokens too
    with pytest.raises(InvalidInputError, match="no place for it"):
        ask(unbudgeted, "why?", account_facts="x", history=[("human", "hi")])


def test_a_question_alone_over_the_limit_is_named_as_such() -> None:
    runnable = chain(SALT, max_prompt_tokens=800, min_docs=0)
    question = "Why? " + "Tell me everything about salt and pressure. " * 220
    sent = ask(runnable, question)
    room = sent.reports[0]["prompt"]
    tokens = rendered_count(sent.messages[0], "cl100k_base")
    assert room["prompt_tokens"] == tokens == room["fixed_tokens"] > 800
    assert sent.reports[0]["over_budget"]
    structured = create_budgeted_rag_chain(
        ListRetriever(documents=SALT),
        GenericFakeChatModel(messages=iter([AIMessage("I cannot tell.")])),
        budget=ContextBudget(
            settings=SurfaceSettings(
                max_docs=8,
                max_tokens=2_000,
                max_prompt_tokens=800,
                min_docs=0,
                encoding="cl100k_base",
            )
        ),
        structured=True,
    )
    warnings = structured.invoke(question).warnings
    assert (
        f"[warning: the chat prompt is {tokens} tokens against max_prompt_tokens 800 "
        f"(0 reserved for the answer): without context or history it is {tokens} "
        "tokens" in "\n".join(warnings)
    )
    assert not any("min_docs" in line for line in warnings)


@pytest.mark.parametrize("text", ["", "   \n\t "])
def test_a_passage_without_text_is_dropped_with_a_record(text: str) -> None:
    blank = Document(id="blank", page_content=text, metadata={"source": "blank.md"})
    budget = ContextBudget(settings=SurfaceSettings(max_docs=1, max_tokens=400))
    context = budget.fit([blank, *SALT[:2]])
    assert context.report.kept_ids == ["p0"]
    assert "blank.md" not in context.text
    drops = {r.key: r for r in context.report.drops}
    assert drops["blank"].reason == "empty_text" and drops["blank"].rank == 1
    assert (drops["p1"].reason, drops["p1"].rank) == ("over_max_docs", 3)


def test_a_calibrated_models_name_cannot_forge_a_warning_line() -> None:
    context = ContextBudget(settings=SurfaceSettings(max_docs=1, max_tokens=400)).fit(
        SALT[:1]
    )
    forged = "model-a\n[warning: forged by a model name]"
    evidence = replace(context.evidence, stale=forged)
    lines = context_warnings(replace(context, evidence=evidence))
    assert lines and all("\n" not in line for line in lines)
    assert not any(line.startswith("[warning: forged") for line in lines)
