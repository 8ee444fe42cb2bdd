"""What the budget reads from an LCEL state, and what it puts back.

Documents in, a `BudgetedContext` out; or a dict with `documents` in, the same
dict with `context` added out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.budget._report import BudgetedContext
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._validation import check_documents


def documents_of(input: Any) -> Sequence[Document]:
    """The candidates: the input itself, or its `documents`, checked."""
    if isinstance(input, dict):
        if "documents" not in input:
            raise InvalidInputError(
                "ContextBudget takes a list of Documents or a dict with a "
                f"'documents' list; got a dict with keys {sorted(map(str, input))}"
            )
        return check_documents(input["documents"], "input['documents']")
    return check_documents(input)


def budget_output(
    input: Any, context: BudgetedContext, history_key: str | None = None
) -> Any:
    """The context, or the input dict with it as `context` (and the kept history).

    The history goes back under `history_key`, as the messages the prompt gets.
    """
    if not isinstance(input, dict):
        return context
    if history_key is not None:
        return {**input, "context": context, history_key: context.history}
    return {**input, "context": context}


def question_of(input: Any) -> str | None:
    """The question, when the budget runs in a `{question, documents}` chain."""
    question = input.get("question") if isinstance(input, dict) else None
    return question if isinstance(question, str) and question.strip() else None
