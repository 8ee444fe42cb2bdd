"""The report is what the model got: random prompts, histories and budgets.

Through the real chain (`create_budgeted_rag_chain`: retriever, memory step,
budget, stuff chain), with the user's own template: system text with variables
of any type, the history under any placeholder name and in every format
`MessagesPlaceholder` accepts (tool calls included), memories or none, random
surfaces and budgets. The messages are captured at the chat model and counted by
tiktoken on their chat markup (`test_history.rendered_count`, independent of the
package's formula). The chat model is a fake standing in for an LLM API that
cannot run here; everything else is the package's code.
"""

import json
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from list_retriever import ListRetriever
from sent_to_model import Sent
from test_history import rendered_count

from langchain_ragbudget import ContextBudget, create_budgeted_rag_chain
from langchain_ragbudget.ledger._records import Stage
from langchain_ragbudget.memory._budget import render_memory

pytestmark = pytest.mark.needs_tiktoken

TEXT = st.text(
    st.characters(exclude_categories=["Cs"], exclude_characters="\x00{}"),
    min_size=1,
    max_size=60,
)
NAME = st.sampled_from(["history", "chat_history", "messages", "conversation"])
VALUE = (
    TEXT
    | st.integers(-(10**9), 10**9)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.lists(TEXT, max_size=40)
    | st.dictionaries(st.text(string.ascii_lowercase, min_size=1), TEXT, max_size=8)
)


@st.composite
def exchange(draw: st.DrawFn, i: int) -> list[Any]:
    """One turn in a random format; some are a tool call and its result."""
    text = draw(TEXT)
    kind = draw(st.sampled_from(["message", "tuple", "dict", "string", "tool"]))
    if kind == "tool":
        call_id = f"call_{i}"
        arguments = draw(st.dictionaries(st.sampled_from("abcq"), VALUE, max_size=3))
        call = {"name": "lookup", "args": arguments, "id": call_id}
        if draw(st.booleans()):
            return [
                AIMessage(text, tool_calls=[call]),
                ToolMessage(draw(TEXT), tool_call_id=call_id),
            ]
        return [
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {
                            "name": "lookup",
                            "arguments": json.dumps(arguments),
                        },
                    }
                ],
            },
            {"role": "tool", "content": draw(TEXT), "tool_call_id": call_id},
        ]
    role = "human" if i % 2 == 0 else "ai"
    if kind == "message":
        return [HumanMessage(text) if role == "human" else AIMessage(text)]
    if kind == "tuple":
        return [(role, text)]
    if kind == "dict":
        return [{"role": "user" if role == "human" else "assistant", "content": text}]
    return [text]  # a string is a human turn


@st.composite
def histories(draw: st.DrawFn) -> list[Any]:
    turns: list[Any] = []
    for i in range(draw(st.integers(0, 8))):
        turns += draw(exchange(i))
    return turns


@st.composite
def templates(draw: st.DrawFn) -> tuple[ChatPromptTemplate, dict[str, Any], str]:
    """A user's template, its variables' values, and its history's name."""
    names = draw(
        st.lists(
            st.sampled_from(["account_facts", "user", "plan", "limits", "today"]),
            unique=True,
            max_size=4,
        )
    )
    values = {name: draw(VALUE) for name in names}
    system = "You answer support questions. " + " ".join(
        f"{name}: {{{name}}}." for name in names
    )
    memories = "Memories:\n{memories}\n" if draw(st.booleans()) else ""
    history = draw(NAME)
    messages: list[Any] = [("system", system)]
    if draw(st.booleans()):
        messages.append(MessagesPlaceholder(history, optional=draw(st.booleans())))
    messages.append(("human", memories + "Context:\n{context}\nQuestion: {question}"))
    return ChatPromptTemplate.from_messages(messages), values, history


def passages(texts: list[str]) -> list[Document]:
    return [
        Document(id=f"p{i}", page_content=text, metadata={"source": f"d{i}.md"})
        for i, text in enumerate(texts)
    ]


def remembered(texts: list[str]) -> list[Document]:
    return [Document(id=f"m{i}", page_content=text) for i, text in enumerate(texts)]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    template=templates(),
    history=histories(),
    texts=st.lists(TEXT.map(lambda t: (t + ". ") * 3), max_size=6),
    memories=st.none() | st.lists(TEXT, max_size=4),
    surface=st.sampled_from(["chat", "search"]),
    max_prompt=st.integers(200, 3_000),
    reserve=st.integers(0, 150),
    share=st.floats(0.0, 1.0),
    packing=st.sampled_from(["skip", "trim"]),
)
def test_the_report_is_what_the_model_got(
    template: tuple[ChatPromptTemplate, dict[str, Any], str],
    history: list[Any],
    texts: list[str],
    memories: list[str] | None,
    surface: str,
    max_prompt: int,
    reserve: int,
    share: float,
    packing: str,
) -> None:
    prompt, values, key = template
    if "memories" in prompt.input_variables and memories is None:
        memories = []  # a template with a memory section gets a memory retriever
    places = [m for m in prompt.messages if isinstance(m, MessagesPlaceholder)]
    state: dict[str, Any] = {"question": "what does my plan cover?", **values}
    if places:
        state[key] = history
    budget = ContextBudget.from_config(
        surface=surface,
        max_prompt_tokens=max_prompt + reserve + 1,
        reserve_output_tokens=reserve,
        history_share=share,
        min_docs=0,
        packing=packing,
    )
    model = GenericFakeChatModel(messages=iter([AIMessage("An answer [1].")]))
    chain = create_budgeted_rag_chain(
        ListRetriever(documents=passages(texts)),
        model,
        budget=budget,
        prompt=prompt,
        memory=None
        if memories is None
        else ListRetriever(documents=remembered(memories)),
        structured=True,
    )
    sent = Sent()
    answer = chain.invoke(state, {"callbacks": [sent]})

    report = sent.reports[0]
    received = sent.messages[0]
    tokens = rendered_count(received, report["encoding"])
    room = report["prompt"]
    assert room["prompt_tokens"] == tokens  # nothing charged unsent, nothing unpaid
    if tokens > max_prompt + 1:  # over: only when the prompt without context is,
        assert report["over_budget"] and room["fixed_tokens"] > max_prompt + 1
        assert not answer.memories  # and then memories gave way first
    dropped = report["dropped"]
    # every passage is sent or recorded
    passage_drops = {d["id"] for d in dropped if d["stage"] != Stage.HISTORY}
    keys = set(report["kept_ids"]) | passage_drops
    assert keys == {f"p{i}" for i in range(len(texts))}
    # every turn is sent (the newest, whole, as given) or recorded (the oldest)
    turns = convert_to_messages(history) if places else []
    gone = [d for d in dropped if d["stage"] == Stage.HISTORY]
    assert [d["rank"] for d in gone] == list(range(1, len(gone) + 1))
    kept = turns[len(gone) :]
    assert _bodies(received[1 : 1 + len(kept)]) == _bodies(kept)
    assert len(received) == 2 + len(kept)
    # every memory is sent or recorded
    if memories is not None:
        text = str(received[-1].content)
        shown = {m["id"] for m in answer.memories}
        assert all(
            render_memory(m) in text for m in remembered(memories) if m.id in shown
        )
        recorded = {d["id"] for d in answer.dropped if d["stage"] == Stage.MEMORY}
        assert shown | recorded == {f"m{i}" for i in range(len(memories))}


def _bodies(messages: list[BaseMessage]) -> list[tuple[str, str, Any]]:
    return [(m.type, str(m.text), getattr(m, "tool_calls", None)) for m in messages]


def test_memories_give_way_when_the_whole_prompt_is_full() -> None:
    """The memory share is narrowed to what the rest of the prompt leaves."""
    notes = [f"Remembered fact number {i}: " + "detail " * 40 for i in range(4)]

    def run(max_prompt: int) -> tuple[Any, Sent]:
        budget = ContextBudget.from_config(
            surface="chat",
            max_prompt_tokens=max_prompt,
            reserve_output_tokens=0,
            memory_tokens=2_000,
            max_memories=4,
            min_docs=0,
        )
        chain = create_budgeted_rag_chain(
            ListRetriever(documents=passages(["A passage. " * 5])),
            GenericFakeChatModel(messages=iter([AIMessage("An answer [1].")])),
            budget=budget,
            memory=ListRetriever(documents=remembered(notes)),
            structured=True,
        )
        sent = Sent()
        return chain.invoke(
            {"question": "what do you remember?"}, {"callbacks": [sent]}
        ), sent

    roomy, _ = run(4_000)
    assert len(roomy.memories) == 4
    assert roomy.prompt is not None
    tight_limit = roomy.prompt["fixed_tokens"] - 100  # about two memories less
    answer, sent = run(tight_limit)
    tokens = rendered_count(sent.messages[0], sent.reports[0]["encoding"])
    assert tokens <= tight_limit
    assert [m["id"] for m in answer.memories] == ["m0", "m1"]  # the best ones stay
    gone = [d for d in answer.dropped if d["stage"] == Stage.MEMORY]
    assert [d["id"] for d in gone] == ["m2", "m3"]
    assert all("max_prompt_tokens" in d["detail"] for d in gone)
