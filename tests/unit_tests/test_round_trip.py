"""Answers that round-trip through a chat history and a checkpointer.

A conversation stores each answer and feeds it back on later turns: the stored
assistant turn must be what the model said, with the package's warnings shown to
the user but never fed back as the assistant's words. The chat model is a fake
standing in for an LLM API; the chain, the budget and LangChain's message
history are real.
"""

from typing import Any

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from list_retriever import ListRetriever
from sent_to_model import Sent

from langchain_ragbudget import (
    BudgetedAnswer,
    ContextBudget,
    InvalidInputError,
    SurfaceSettings,
    create_budgeted_rag_chain,
)

pytestmark = [
    pytest.mark.needs_tiktoken,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings(
        "ignore::langchain_core._api.LangChainDeprecationWarning"
    ),
]

DOCS = [
    Document(id=f"p{i}", page_content=f"Passage {i}: salt raises blood pressure.")
    for i in range(3)
]
TURNS = 10


def conversation(structured: bool) -> tuple[Any, InMemoryChatMessageHistory, Sent]:
    """Ten-turn-ready chain in `RunnableWithMessageHistory`; one budget drop a turn."""
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=1, max_tokens=500, max_prompt_tokens=4_000)
    )
    replies = iter([AIMessage(f"Answer {i} [1].") for i in range(TURNS)])
    rag = create_budgeted_rag_chain(
        ListRetriever(documents=DOCS),
        GenericFakeChatModel(messages=replies),
        budget=budget,
        structured=structured,
    )
    if structured:
        rag = rag | RunnableLambda(BudgetedAnswer.to_message)
    store = InMemoryChatMessageHistory()
    chat = RunnableWithMessageHistory(
        rag,
        lambda session_id: store,
        input_messages_key="question",
        history_messages_key="history",
    )
    return chat, store, Sent()


@pytest.mark.parametrize("structured", [True, False], ids=["structured", "text"])
def test_ten_turns_store_twenty_messages_without_warnings_fed_back(
    structured: bool,
) -> None:
    chat, store, sent = conversation(structured)
    config: Any = {"configurable": {"session_id": "s"}, "callbacks": [sent]}
    for i in range(TURNS):
        output = chat.invoke({"question": f"question {i}?"}, config)
        if structured:  # the warnings reach the user in the message's report
            answer = BudgetedAnswer.from_message(output)
            assert answer.answer == f"Answer {i} [1]."
            assert any("2 lower-ranked left out" in w for w in answer.warnings)
        else:  # the warnings reach the user under the answer
            assert output.startswith(f"Answer {i} [1].\n[warning: ")
    assert len(store.messages) == 2 * TURNS
    assert [m.type for m in store.messages] == ["human", "ai"] * TURNS
    if structured:  # stored as the assistant said it
        assert [m.content for m in store.messages[1::2]] == [
            f"Answer {i} [1]." for i in range(TURNS)
        ]
    last = sent.messages[-1]  # what the model read on the tenth turn
    fed_back = [m for m in last if isinstance(m, AIMessage)]
    assert [m.content for m in fed_back] == [f"Answer {i} [1]." for i in range(9)]
    assert not any("[warning:" in str(m.content) for m in last)


def test_an_answer_round_trips_through_serialisation_and_a_checkpointer() -> None:
    chat, _, _ = conversation(structured=True)
    message = chat.invoke(
        {"question": "what raises it?"}, {"configurable": {"session_id": "s"}}
    )
    answer = BudgetedAnswer.from_message(message)
    restored_once = load(dumpd(message), allowed_objects="messages")
    assert BudgetedAnswer.from_message(restored_once) == answer
    serde = JsonPlusSerializer()
    restored = serde.loads_typed(serde.dumps_typed(message))
    assert BudgetedAnswer.from_message(restored) == answer
    assert restored.content == answer.answer
    assert answer.dropped and answer.citations


def test_a_message_without_an_answer_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="to_message"):
        BudgetedAnswer.from_message(HumanMessage("hi"))


def test_a_models_own_line_is_kept_only_the_package_tail_goes() -> None:
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=3, max_tokens=500, max_prompt_tokens=4_000)
    )
    history = [
        HumanMessage("q"),
        AIMessage("[warning: the model's own words]"),  # no answer above: kept
        AIMessage("An answer.\n[warning: 2 lower-ranked left out]"),
    ]
    out = budget.invoke({"question": "q2", "documents": DOCS, "history": history})
    assert [m.content for m in out["history"]] == [
        "q",
        "[warning: the model's own words]",
        "An answer.",
    ]
