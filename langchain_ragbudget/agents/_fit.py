"""One agent model request fitted into a surface's prompt budget, on the record.

Pure functions over messages, so the middleware stays a thin shell. What goes
first is what the pending answer needs least:

1. Turns before the current question, oldest first as whole turns (`fit_history`:
   never a gap, never a tool result without its call).
2. Earlier tool exchanges of the current turn (a call with all its results),
   oldest first.
3. The lowest-ranked passages of the newest retrieval results, refitted by the
   context budget down to its `min_docs`. The newest exchange itself is never
   dropped: the model would only call the tool again for what it just got.

What still does not fit is sent over the limit with a record naming its cause, as
the context budget keeps its `min_docs`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from langchain_ragbudget.agents._tool import context_only, passages_of, tool_result
from langchain_ragbudget.budget import ContextBudget
from langchain_ragbudget.budget._history import (
    fit_history,
    history_drop_record,
    message_tokens,
    prompt_tokens,
)
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import (
    DropRecord,
    Stage,
    TrimRecord,
)

_NAME_LIMIT = 300  # characters of one id in a warning line
_MAX_NAMED = 3  # passages named in the warning line; the records carry them all


@dataclass(frozen=True)
class RequestReport:
    """What one model request held, what was dropped from it, and why.

    Attributes:
        surface: The surface whose budget was applied.
        encoding: The tiktoken encoding tokens were counted in.
        max_prompt_tokens: The surface's whole-prompt limit.
        reserve_output_tokens: Kept free for the answer.
        message_tokens: `prompt_tokens` of the messages sent, system included.
        tool_tokens: The tools' schemas as JSON, sent beside the messages.
        drops: Messages and passages left out of this request.
        trimmed: Passages of tool results shortened to fit this request.
        over_budget: Why the request is over its limit even so; None if within.
        tool_warnings: The warning lines of the retrieval results sent in the
            current turn (what the retrieval itself dropped).
    """

    surface: str
    encoding: str
    max_prompt_tokens: int
    reserve_output_tokens: int
    message_tokens: int
    tool_tokens: int
    drops: list[DropRecord] = field(default_factory=list)
    trimmed: list[TrimRecord] = field(default_factory=list)
    over_budget: str | None = None
    tool_warnings: list[str] = field(default_factory=list)

    @property
    def prompt_tokens(self) -> int:
        """Everything the model reads: messages and tool schemas."""
        return self.message_tokens + self.tool_tokens

    @property
    def limit(self) -> int:
        """The most tokens the request may take."""
        return self.max_prompt_tokens - self.reserve_output_tokens

    def warnings(self) -> list[str]:
        """The lines shown with the answer: the retrieval's, then this request's."""
        lines = list(self.tool_warnings)
        surface = display_name(self.surface)
        messages = [r for r in self.drops if r.stage == Stage.HISTORY]
        passages = [r for r in self.drops if r.stage == Stage.BUDGET]
        parts = []
        if messages:
            parts.append(
                f"{len(messages)} earlier message(s) left out of the request (oldest "
                "first; a tool call with all its results, over_max_tokens)"
            )
        if passages:
            named = [display_name(r.key, _NAME_LIMIT) for r in passages]
            more = (
                f" +{len(named) - _MAX_NAMED} more" if len(named) > _MAX_NAMED else ""
            )
            parts.append(
                f"{len(passages)} lowest-ranked passage(s) of tool results left out "
                f"(over_max_tokens): {', '.join(named[:_MAX_NAMED])}{more}"
            )
        if self.trimmed:
            named = [
                f"{display_name(r.key, _NAME_LIMIT)} ({r.kept_sentences} of "
                f"{r.total_sentences} sentences)"
                for r in self.trimmed
            ]
            parts.append(f"shortened to fit: {_names(named)}")
        if parts:
            lines.append(f"[warning: {surface} agent request: {'; '.join(parts)}]")
        if self.over_budget is not None:
            lines.append(
                f"[warning: the {surface} agent request is over its budget "
                f"({self.prompt_tokens} > {self.limit} tokens): {self.over_budget}]"
            )
        return lines

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view, with the warning lines."""
        return {
            "surface": self.surface,
            "encoding": self.encoding,
            "max_prompt_tokens": self.max_prompt_tokens,
            "reserve_output_tokens": self.reserve_output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "message_tokens": self.message_tokens,
            "tool_tokens": self.tool_tokens,
            "over_budget": self.over_budget,
            "dropped": [record.to_dict() for record in self.drops],
            "trimmed": [record.to_dict() for record in self.trimmed],
            "warnings": self.warnings(),
        }


def _names(named: Sequence[str]) -> str:
    """The first few names, then `+N more`: the records carry them all."""
    more = f" +{len(named) - _MAX_NAMED} more" if len(named) > _MAX_NAMED else ""
    return ", ".join(named[:_MAX_NAMED]) + more


def tool_tokens(tools: Sequence[BaseTool | dict[str, Any]], encoding: str) -> int:
    """Tokens of the tools' schemas, as the JSON a chat API receives them in."""
    if not tools:
        return 0
    schemas = [convert_to_openai_tool(tool) for tool in tools]
    return count_tokens(
        json.dumps(schemas, ensure_ascii=False, sort_keys=True), encoding
    )


def fit_request(
    system: SystemMessage | None,
    messages: Sequence[BaseMessage],
    tools_cost: int,
    budget: ContextBudget,
) -> tuple[list[BaseMessage], RequestReport]:
    """The messages to send (system message apart) and the request's report.

    `budget.settings.max_prompt_tokens` must be set.
    """
    settings = budget.settings
    assert settings.max_prompt_tokens is not None
    encoding = settings.encoding_name
    limit = settings.max_prompt_tokens - settings.reserve_output_tokens
    fixed = [system] if system is not None else []

    def cost(sent: Sequence[BaseMessage]) -> int:
        return prompt_tokens([*fixed, *sent], encoding) + tools_cost

    start = current_turn_start(messages)
    history, turn = list(messages[:start]), list(messages[start:])
    room = limit - cost(turn)
    kept, drops = fit_history(
        history, max(0, room), lambda m: message_tokens(m, encoding)
    )
    trimmed: list[TrimRecord] = []
    if room < 0:
        turn, refit = fit_turn(turn, -room, budget, start)
        drops, trimmed = drops + refit.drops, refit.trimmed
    sent = [*kept, *turn]
    total = cost(sent)
    report = RequestReport(
        surface=budget.surface,
        encoding=encoding,
        max_prompt_tokens=settings.max_prompt_tokens,
        reserve_output_tokens=settings.reserve_output_tokens,
        message_tokens=total - tools_cost,
        tool_tokens=tools_cost,
        drops=drops,
        trimmed=trimmed,
        over_budget=None
        if total <= limit
        else over_cause(fixed, turn, tools_cost, encoding),
        tool_warnings=retrieval_warnings(turn),
    )
    return sent, report


def current_turn_start(messages: Sequence[BaseMessage]) -> int:
    """Where the current turn starts: the last human message (0 if none)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage):
            return index
    return 0


def exchanges(turn: Sequence[BaseMessage]) -> list[list[int]]:
    """Positions in `turn` of each tool call with its results, oldest first."""
    groups: list[list[int]] = []
    calls: dict[str, int] = {}  # tool call id -> its group
    for index, message in enumerate(turn):
        if isinstance(message, AIMessage) and message.tool_calls:
            groups.append([index])
            calls.update(
                {str(c.get("id")): len(groups) - 1 for c in message.tool_calls}
            )
        elif isinstance(message, ToolMessage) and message.tool_call_id in calls:
            groups[calls[message.tool_call_id]].append(index)
    return groups


def fit_turn(
    turn: list[BaseMessage], excess: int, budget: ContextBudget, offset: int
) -> tuple[list[BaseMessage], Refit]:
    """Steps 2 and 3: shed `excess` tokens from the current turn, on the record.

    `offset` is the turn's place in the request, so records number messages as
    `fit_history` does.
    """
    encoding = budget.settings.encoding_name
    groups = exchanges(turn)
    gone: set[int] = set()
    drops: list[DropRecord] = []
    for group in groups[:-1]:
        if excess <= 0:
            break
        for index in group:
            tokens = message_tokens(turn[index], encoding)
            why = (
                "an earlier tool exchange of the current turn, over the request budget"
            )
            drops.append(
                history_drop_record(turn[index], offset + index + 1, tokens, why)
            )
            excess -= tokens
        gone.update(group)
    fitted = list(turn)
    trimmed: list[TrimRecord] = []
    for index in groups[-1][1:] if groups else []:
        if excess <= 0:
            break
        message = fitted[index]
        assert isinstance(message, ToolMessage)
        fitted[index], refit, saved = shorten_result(message, excess, budget)
        drops += refit.drops
        trimmed += refit.trimmed
        excess -= saved
    kept = [m for i, m in enumerate(fitted) if i not in gone]
    return kept, Refit(drops, trimmed)


def shorten_result(
    message: ToolMessage, excess: int, budget: ContextBudget
) -> tuple[ToolMessage, Refit, int]:
    """`message` refitted by the context budget into `excess` fewer tokens.

    Its passages are packed again, in rank order, into a smaller `max_tokens`, so
    the lowest-ranked go first (or, with `packing: trim`, the last kept one is
    shortened to whole sentences), down to the surface's `min_docs`. The artifact
    then describes what is sent. A result of another tool stays as it is.
    Returns the message, what the refit dropped and shortened, and the tokens saved.
    """
    parsed = passages_of(message.artifact)
    if parsed is None:
        return message, Refit(), 0
    query, passages = parsed
    encoding = budget.settings.encoding_name
    before = message_tokens(message, encoding)
    cap = max(1, count_tokens(message.text, encoding) - excess)
    while True:
        context = context_only(budget, max_tokens=cap).fit(passages, question=query)
        content, artifact = tool_result(query, context)
        artifact["warnings"] = retrieval_lines(message)  # the retrieval's own
        shorter = message.model_copy(update={"content": content, "artifact": artifact})
        saved = before - message_tokens(shorter, encoding)
        if saved >= excess or cap == 1:
            break
        cap = max(1, cap - (excess - saved))
    if saved <= 0:
        return message, Refit(), 0
    where = f"left out of tool result {message.tool_call_id}"
    drops = [replace(r, detail=f"{where}: {r.detail}") for r in context.report.drops]
    return shorter, Refit(drops, list(context.report.trimmed)), saved


@dataclass(frozen=True)
class Refit:
    """What refitting tool results dropped and shortened."""

    drops: list[DropRecord] = field(default_factory=list)
    trimmed: list[TrimRecord] = field(default_factory=list)


def over_cause(
    fixed: Sequence[BaseMessage],
    turn: Sequence[BaseMessage],
    tools_cost: int,
    encoding: str,
) -> str:
    """Why a request that dropped all it could is still over: what it must keep."""
    system = sum(message_tokens(m, encoding) for m in fixed)
    current = sum(message_tokens(m, encoding) for m in turn)
    return (
        f"what is never dropped takes it all: the system prompt {system} tokens, the "
        f"tools' schemas {tools_cost}, the current turn {current} (the question and "
        "the newest tool call with its results, each down to the surface's min_docs)"
    )


def retrieval_warnings(turn: Sequence[BaseMessage]) -> list[str]:
    """The warning lines of the retrieval results in the current turn."""
    return [
        line for m in turn if isinstance(m, ToolMessage) for line in retrieval_lines(m)
    ]


def retrieval_lines(message: ToolMessage) -> list[str]:
    """The warning lines a retrieval result carries (none for another tool's)."""
    artifact = message.artifact
    if passages_of(artifact) is None:
        return []
    assert isinstance(artifact, dict)
    return [line for line in artifact.get("warnings", []) if isinstance(line, str)]
