"""The budget middleware for `langchain.agents.create_agent`.

Like LangChain's own `ContextEditingMiddleware`, it edits the request, never the
state: the conversation keeps every message, and each model call gets what fits.
Two places carry what it did, each where LangChain puts that kind of thing:

- Each answer's `response_metadata["ragbudget"]`: the request's report (tokens
  sent, limit, drops) and its warning lines. Metadata, like a provider's token
  usage: stored with the answer by a checkpointer, shown beside it, and never
  sent back to the model as the assistant's words.
- The state key `ragbudget_drops`: every drop of the conversation once (a reducer
  merges them by id, stage and reason), so they survive a checkpointer across
  turns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
)
from langchain.agents.middleware.types import OmitFromInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import ensure_config
from langgraph.types import Command

from langchain_ragbudget.agents._fit import RequestReport, fit_request, tool_tokens
from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.errors import InvalidInputError

RECORDS_KEY = "ragbudget_drops"
REPORT_KEY = "ragbudget"


def merge_records(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None
) -> list[dict[str, Any]]:
    """`old` and the records of `new` not in it yet (same id, stage and reason)."""
    merged = list(old or [])
    seen = {(r.get("id"), r.get("stage"), r.get("reason")) for r in merged}
    for record in new or []:
        identity = (record.get("id"), record.get("stage"), record.get("reason"))
        if identity not in seen:
            seen.add(identity)
            merged.append(record)
    return merged


class AgentBudgetState(AgentState[Any]):
    """The agent's state with the conversation's drop records."""

    ragbudget_drops: NotRequired[
        Annotated[list[dict[str, Any]], merge_records, OmitFromInput]
    ]


Handler = Callable[[ModelRequest[Any]], ModelResponse[Any]]
AsyncHandler = Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]


class AgentBudgetMiddleware(AgentMiddleware[AgentBudgetState, Any, Any]):
    """Fit every model request an agent makes into a surface's prompt budget.

    The request (system message, history, tool calls and results, tool schemas)
    is measured in the surface's tiktoken encoding exactly as the model receives
    it, and fitted within `max_prompt_tokens - reserve_output_tokens`: earlier
    turns go first, oldest first and whole; then earlier tool exchanges of the
    current turn; then the lowest-ranked passages of the newest retrieval
    results (`create_retrieval_tool`). Each answer carries its request's report
    and warnings in `response_metadata["ragbudget"]`; the state's
    `ragbudget_drops` holds every drop of the conversation.

    Example:
        .. code-block:: python

            from langchain.agents import create_agent
            from langchain_ragbudget import (
                AgentBudgetMiddleware, ContextBudget, create_retrieval_tool,
            )

            budget = ContextBudget.from_config("ragbudget.yml", surface="chat")
            agent = create_agent(
                model,
                tools=[create_retrieval_tool(retriever, budget)],
                middleware=[AgentBudgetMiddleware(budget)],
            )
    """

    state_schema = AgentBudgetState

    def __init__(self, budget: ContextBudget) -> None:
        """Budget requests on `budget`'s surface (or the run's, if it names one).

        Raises:
            InvalidInputError: `budget` is not a `ContextBudget`, or its surface
                has no `max_prompt_tokens`.
        """
        super().__init__()
        if not isinstance(budget, ContextBudget):
            raise InvalidInputError(
                "AgentBudgetMiddleware: budget must be a ContextBudget "
                f"(ContextBudget.from_config(...)); got {type(budget).__name__}"
            )
        checked(budget)
        self.budget = budget

    def fit(
        self, request: ModelRequest[Any]
    ) -> tuple[ModelRequest[Any], RequestReport]:
        """The request as it will be sent, and its report."""
        budget = checked(self.budget.for_call(ensure_config()))
        cost = tool_tokens(request.tools, budget.settings.encoding_name)
        messages: list[BaseMessage] = list(request.messages)
        sent, report = fit_request(request.system_message, messages, cost, budget)
        return request.override(messages=list(sent)), report  # type: ignore[arg-type]

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Handler
    ) -> ExtendedModelResponse[Any]:
        """Send the fitted request; the answer carries the report."""
        fitted, report = self.fit(request)
        return answered(handler(fitted), report)

    async def awrap_model_call(
        self, request: ModelRequest[Any], handler: AsyncHandler
    ) -> ExtendedModelResponse[Any]:
        """Send the fitted request; the answer carries the report."""
        fitted, report = self.fit(request)
        return answered(await handler(fitted), report)


def checked(budget: ContextBudget) -> ContextBudget:
    """`budget`, if its surface budgets the whole prompt.

    Raises:
        InvalidInputError: The surface has no `max_prompt_tokens`.
    """
    if budget.settings.max_prompt_tokens is None:
        raise InvalidInputError(
            f"AgentBudgetMiddleware: surface {budget.surface!r} has no "
            "max_prompt_tokens, so an agent's request has no budget; set "
            f"surfaces.{budget.surface}.max_prompt_tokens in the YAML or pass "
            "max_prompt_tokens= to ContextBudget.from_config"
        )
    return budget


def answered(
    response: ModelResponse[Any], report: RequestReport
) -> ExtendedModelResponse[Any]:
    """`response` with the report on its answers, and the drops for the state."""
    entry = report.to_dict()
    result = [
        m.model_copy(
            update={"response_metadata": {**m.response_metadata, REPORT_KEY: entry}}
        )
        if isinstance(m, AIMessage)
        else m
        for m in response.result
    ]
    records = [record.to_dict() for record in report.drops]
    return ExtendedModelResponse(
        model_response=replace(response, result=result),
        command=Command(update={RECORDS_KEY: records}),
    )
