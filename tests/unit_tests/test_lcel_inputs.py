"""The chains take LCEL inputs: a question string, or a mapping with `question` and
any other keys the prompt takes (a chat history). The prompt is a real
`ChatPromptTemplate`, the retriever real BM25, the budget real; only the chat model
is a fake (`GenericFakeChatModel`), standing in for an LLM API that cannot run here.
"""

import asyncio
from typing import Any

import pytest
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from sent_to_model import Sent

from langchain_ragbudget import (
    BM25Retriever,
    BudgetedAnswer,
    ContextBudget,
    InvalidInputError,
    create_budgeted_rag_chain,
    create_budgeted_stuff_chain,
)

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer {user} from the context.\n{context}"),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ]
)


def llm(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content=r) for r in replies]))


def corpus() -> list[Document]:
    texts = {
        "solar": "Solar panels turn sunlight into electricity on the roof.",
        "bread": "Bread dough rises when yeast ferments the sugars.",
        "tides": "Tides follow the pull of the moon on the oceans.",
    }
    return [
        Document(id=f"{k}::0", page_content=t, metadata={"doc_id": k, "source": k})
        for k, t in texts.items()
    ]


def rag(model: GenericFakeChatModel, **kwargs: Any) -> Any:
    return create_budgeted_rag_chain(
        BM25Retriever.from_documents(corpus(), k=3),
        model,
        budget=ContextBudget.from_config(surface="chat"),
        prompt=PROMPT,
        **kwargs,
    )


HISTORY = [HumanMessage("hello, I am Ada"), AIMessage("Hi Ada.")]


@pytest.mark.needs_tiktoken
def test_dict_input_extra_keys_reach_the_prompt() -> None:
    recorder = Sent()
    answer = rag(llm("Sunlight [1].")).invoke(
        {"question": "what do solar panels do?", "history": HISTORY, "user": "Ada"},
        {"callbacks": [recorder]},
    )
    assert answer.startswith("Sunlight [1].")
    (messages,) = recorder.messages
    assert "Answer Ada from the context." in str(messages[0].content)
    assert "Solar panels turn sunlight" in str(messages[0].content)
    assert messages[1:3] == HISTORY
    assert messages[3].content == "what do solar panels do?"


@pytest.mark.needs_tiktoken
def test_string_input_still_works_with_the_default_prompt() -> None:
    chain = create_budgeted_rag_chain(
        BM25Retriever.from_documents(corpus(), k=3),
        llm("Yeast [1]."),
        budget=ContextBudget.from_config(surface="chat"),
    )
    assert chain.invoke("why does bread rise?").startswith("Yeast [1].")


# LangChain marks these deprecated in favour of LangGraph; they are still what an
# LCEL chatbot uses, so the chain must work inside them.
@pytest.mark.filterwarnings("ignore::langchain_core._api.LangChainDeprecationWarning")
@pytest.mark.needs_tiktoken
def test_chain_inside_runnable_with_message_history_two_turns() -> None:
    store = InMemoryChatMessageHistory()
    recorder = Sent()
    chat = RunnableWithMessageHistory(
        rag(llm("Sunlight [1].", "The moon [1].")),
        lambda session_id: store,
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "s1"}, "callbacks": [recorder]}
    first = chat.invoke({"question": "what do solar panels do?", "user": "Ada"}, config)
    second = chat.invoke({"question": "what moves the tides?", "user": "Ada"}, config)
    assert first.startswith("Sunlight [1].")
    assert second.startswith("The moon [1].")
    # the second call saw the first turn as history, between system and question,
    # the answer as the model said it: the package's warning lines not fed back
    assert first.startswith("Sunlight [1].\n[warning: ")
    turn_two = recorder.messages[1]
    assert [m.content for m in turn_two[1:3]] == [
        "what do solar panels do?",
        "Sunlight [1].",
    ]
    assert "Tides follow the pull" in str(turn_two[0].content)
    assert turn_two[-1].content == "what moves the tides?"
    assert len(store.messages) == 4


@pytest.mark.needs_tiktoken
def test_streaming_with_dict_input() -> None:
    chunks = list(
        rag(llm("Sunlight powers it [1].")).stream(
            {"question": "what do solar panels do?", "history": [], "user": "Ada"}
        )
    )
    assert len(chunks) > 2  # the model's words as they come, then the warnings
    assert "".join(chunks).startswith("Sunlight powers it [1].")


@pytest.mark.needs_tiktoken
def test_structured_with_dict_input() -> None:
    answer = rag(llm("Sunlight [1]."), structured=True).invoke(
        {"question": "what do solar panels do?", "history": HISTORY, "user": "Ada"}
    )
    assert isinstance(answer, BudgetedAnswer)
    assert answer.answer == "Sunlight [1]."
    assert answer.citations[0]["document"] == "solar"
    assert answer.surface == "chat"


@pytest.mark.needs_tiktoken
def test_structured_stream_with_dict_input() -> None:
    chunks = list(
        rag(llm("Sunlight powers it [1]."), structured=True).stream(
            {"question": "what do solar panels do?", "history": HISTORY, "user": "Ada"}
        )
    )
    assert "".join(c for c in chunks if isinstance(c, str)) == "Sunlight powers it [1]."
    assert isinstance(chunks[-1], BudgetedAnswer)
    assert chunks[-1].answer == "Sunlight powers it [1]."


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"history": []}, r"needs the key 'question'.*\['history'\]"),
        ({"question": 7}, r"key 'question' must be a string, got int"),
        (
            {"question": "q", "documents": []},
            r"may not hold the key\(s\) \['documents'\]",
        ),
    ],
)
def test_bad_mapping_input_is_named(payload: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        rag(llm("unused")).invoke(payload)


@pytest.mark.needs_tiktoken
def test_stuff_chain_takes_extra_keys_and_names_a_missing_question() -> None:
    budget = ContextBudget.from_config(surface="chat")
    context = budget.invoke(corpus()[:1])
    recorder = Sent()
    stuff = create_budgeted_stuff_chain(llm("Sunlight [1]."), PROMPT)
    text = stuff.invoke(
        {"question": "solar?", "context": context, "history": HISTORY, "user": "Ada"},
        {"callbacks": [recorder]},
    )
    assert text.startswith("Sunlight [1].")
    assert recorder.messages[0][1:3] == HISTORY
    with pytest.raises(InvalidInputError, match="needs the key 'question'"):
        stuff.invoke({"context": context, "history": [], "user": "Ada"})


@pytest.mark.needs_tiktoken
def test_async_invoke_with_dict_input() -> None:
    recorder = Sent()
    answer = asyncio.run(
        rag(llm("Yeast [1].")).ainvoke(
            {"question": "why does bread rise?", "history": HISTORY, "user": "Ada"},
            {"callbacks": [recorder]},
        )
    )
    assert answer.startswith("Yeast [1].")
    assert recorder.messages[0][1:3] == HISTORY
