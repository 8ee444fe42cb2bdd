"""The chains' return types as a type checker sees them (checked by mypy).

`assert_type` does nothing at run time; mypy, run on the tests, fails when a
chain built with `structured=True` is not typed to return a `BudgetedAnswer`.
The chat model is a fake standing in for an LLM API.
"""

from typing import Any, assert_type

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable
from list_retriever import ListRetriever

from langchain_ragbudget import (
    BudgetedAnswer,
    ContextBudget,
    SurfaceSettings,
    create_budgeted_rag_chain,
    create_budgeted_stuff_chain,
)


def test_structured_chains_are_typed_to_return_a_budgeted_answer() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("An answer.")] * 4))
    budget = ContextBudget(settings=SurfaceSettings(max_docs=2, max_tokens=100))
    retriever = ListRetriever(documents=[])
    structured = create_budgeted_rag_chain(
        retriever, model, budget=budget, structured=True
    )
    assert_type(structured, Runnable[Any, BudgetedAnswer])
    text = create_budgeted_rag_chain(retriever, model, budget=budget)
    assert_type(text, Runnable[Any, str])
    state = create_budgeted_rag_chain(retriever, budget=budget)
    assert_type(state, Runnable[Any, dict[str, Any]])
    stuff = create_budgeted_stuff_chain(model, structured=True)
    assert_type(stuff, Runnable[dict[str, Any], BudgetedAnswer])
    assert_type(create_budgeted_stuff_chain(model), Runnable[dict[str, Any], str])
    answer = structured.invoke("what is in the documents?")
    assert isinstance(answer, BudgetedAnswer)
    assert answer.answer == "An answer."
