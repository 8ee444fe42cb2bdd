"""Chat history on the prompt budget: counting messages and fitting history.

A message costs its role and body plus a fixed wrapper, and the reply is primed
with a few more: OpenAI's documented overhead for cl100k_base and o200k_base (3
per message, 1 more for a `name` or a tool result's call id, 3 to prime the reply),
which equals tiktoken's count of the rendered chat markup (tested). The body is
everything the model reads of the message: its text, any other content part as
JSON, and each tool call's name and arguments as JSON (chat APIs send calls as
JSON; a cheaper guess would let a long call through uncounted).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.prompts import (
    BasePromptTemplate,
    ChatPromptTemplate,
    MessagesPlaceholder,
)

from langchain_ragbudget.budget._prompt import prompt_variables
from langchain_ragbudget.budget._report import BudgetedContext, PromptRoom
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage

if TYPE_CHECKING:
    from langchain_ragbudget.config._settings import SurfaceSettings

TOKENS_PER_MESSAGE = 3  # <|start|>{role}<|message|>{content}<|end|>
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3  # <|start|>assistant<|message|>
_ROLES = {"human": "user", "ai": "assistant", "system": "system"}
_CONTINUATIONS = (AIMessage, ToolMessage)  # a turn's messages after its question
HISTORY = "history"  # the key of a chat history the prompt does not name
WARNING_START = "[warning: "  # how each warning line the package writes begins


def role_of(message: BaseMessage) -> str:
    """The role a chat API sends for `message` (`user`, `assistant`...)."""
    if isinstance(message, ChatMessage):
        return message.role
    return _ROLES.get(message.type, message.type)


def message_body(message: BaseMessage) -> str:
    """What the model reads of `message` besides its role: text, parts, tool calls."""
    parts: list[str] = []
    content = message.content
    for part in [content] if isinstance(content, str) else content:
        if isinstance(part, str):
            parts.append(part)
        elif part.get("type") == "text" and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(_as_json(part))
    if isinstance(message, AIMessage):
        calls = [*message.tool_calls, *message.invalid_tool_calls]
        parts += [
            "\n" + _as_json({"name": c.get("name"), "arguments": c.get("args")})
            for c in calls
        ]
    return "".join(parts)


def _as_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def message_label(message: BaseMessage) -> str | None:
    """The label a chat API sends beside the role: a name, or a tool call's id."""
    if isinstance(message, ToolMessage):
        return message.tool_call_id or None
    return message.name or None


def message_tokens(message: BaseMessage, encoding: str) -> int:
    """Tokens one message costs in a chat prompt, wrapper included."""
    tokens = TOKENS_PER_MESSAGE + count_tokens(role_of(message), encoding)
    tokens += count_tokens(message_body(message), encoding)
    label = message_label(message)
    if label:
        tokens += TOKENS_PER_NAME + count_tokens(label, encoding)
    return tokens


def prompt_tokens(messages: Sequence[BaseMessage], encoding: str) -> int:
    """Tokens of a whole chat prompt, the reply's priming included."""
    return REPLY_PRIMING + sum(message_tokens(m, encoding) for m in messages)


def fit_history(
    messages: Sequence[BaseMessage],
    budget_tokens: int,
    count: Callable[[BaseMessage], int],
) -> tuple[list[BaseMessage], list[DropRecord]]:
    """The newest turns that fit `budget_tokens` together, and records of the rest.

    The first message that does not fit is dropped with every older one, so the
    kept history is the recent part: never a message cut short, never a gap. The
    rest of a turn whose question was dropped goes too (an answer without its
    question misleads, and a chat API refuses a tool result without its call), so
    the kept history starts at a question. Both lists are oldest first.
    """
    used = 0
    start = len(messages)
    while start > 0 and used + count(messages[start - 1]) <= budget_tokens:
        used += count(messages[start - 1])
        start -= 1
    misfit = start  # the newest message that did not fit (1-based), 0 if all fit
    while start < len(messages) and isinstance(messages[start], _CONTINUATIONS):
        start += 1
    dropped = []
    for position, message in enumerate(messages[:start], start=1):
        tokens = count(message)
        if position == misfit:
            why = (
                f"needs {tokens} tokens; newer turns took {used} of the {budget_tokens}"
            )
        elif position < misfit:
            why = f"older than turn {misfit}, which did not fit (history keeps no gap)"
        elif isinstance(message, ToolMessage):
            why = "a tool result whose call was dropped (a chat API refuses it alone)"
        else:
            why = "the answer of a turn whose question was dropped (whole turns only)"
        dropped.append(history_drop_record(message, position, tokens, why))
    return list(messages[start:]), dropped


def history_drop_record(
    message: BaseMessage, position: int, tokens: int, why: str
) -> DropRecord:
    """The record of a dropped turn; its rank is its place in the history."""
    key = message.id or f"history-{position}"
    document = Document(
        id=key,
        page_content=message_body(message),
        metadata={"role": role_of(message), "history_turn": position},
    )
    return DropRecord(
        key=key,
        stage=Stage.HISTORY,
        reason=DropReason.MAX_TOKENS,
        rank=position,
        document=document,
        tokens=tokens,
        detail=f"turn {position} ({role_of(message)}) {why}",
    )


def history_budget(
    max_prompt_tokens: int, reserve: int, fixed: int, share: float
) -> int:
    """History's share of what the fixed parts leave."""
    return max(0, int((max_prompt_tokens - reserve - fixed) * share))


def render_prompt(
    prompt: BasePromptTemplate, variables: Mapping[str, Any]
) -> list[BaseMessage]:
    """The messages `prompt` sends for `variables`; a missing variable is empty.

    A missing message placeholder is an empty list, any other variable ''.
    """
    places = set(history_keys(prompt))
    values = dict(variables)
    for name in prompt.input_variables:
        if name not in values:
            values[name] = [] if name in places else ""
    return list(prompt.invoke(values).to_messages())


def history_keys(prompt: BasePromptTemplate | None) -> list[str]:
    """The variables `prompt` sends as messages (its `MessagesPlaceholder`s), in order.

    Without a template the budget counts a chat history under `history`.
    """
    if prompt is None:
        return [HISTORY]
    if not isinstance(prompt, ChatPromptTemplate):
        return []
    return [
        message.variable_name
        for message in prompt.messages
        if isinstance(message, MessagesPlaceholder)
    ]


Measure = Callable[[Sequence[BaseMessage], "BudgetedContext"], int]


def fit_with_history(
    fit_context: Callable[[int], BudgetedContext],
    empty: BudgetedContext,
    history: Sequence[BaseMessage],
    measure: Measure,
    settings: SurfaceSettings,
) -> BudgetedContext:
    """Fit history and context together into the surface's `max_prompt_tokens`.

    History first, within its `history_share` of the room the fixed parts
    (measured on `empty`) leave; the context gets the rest, at most `max_tokens`.
    The whole prompt is then measured as sent, with what the chain adds once the
    context is known (empty-context text, weak-evidence note); any excess shrinks
    the context's budget and it is fitted again, and once the context is empty,
    older history turns go too. The returned context holds the kept history, its
    drop records and how the room was shared (`report.prompt`).
    """
    assert settings.max_prompt_tokens is not None
    encoding = settings.encoding_name
    limit = settings.max_prompt_tokens - settings.reserve_output_tokens
    fixed = measure([], empty)  # no history, no passage: the empty-context text
    share = history_budget(
        settings.max_prompt_tokens,
        settings.reserve_output_tokens,
        fixed,
        settings.history_share,
    )
    kept, dropped, used = _history_within(history, share, encoding)
    budget = max(0, min(settings.max_tokens, limit - fixed - used))
    context = fit_context(budget)
    total = measure(kept, context)
    while total > limit and budget > 0:
        budget = max(0, budget - (total - limit))
        context = fit_context(budget)
        total = measure(kept, context)
    while total > limit and kept:  # an empty context's text and note still to fit
        kept, dropped, used = _history_within(history, used - (total - limit), encoding)
        total = measure(kept, context)
    room = PromptRoom(
        max_prompt_tokens=settings.max_prompt_tokens,
        reserve_output_tokens=settings.reserve_output_tokens,
        fixed_tokens=fixed,
        history_share=settings.history_share,
        history_budget=share,
        history_tokens=used,
        context_budget=budget,
        prompt_tokens=total,
    )
    report = replace(
        context.report,
        drops=[*context.report.drops, *dropped],
        over_budget=context.report.over_budget or total > limit,
        prompt=room,
    )
    return replace(context, history=kept, report=report)


def _history_within(
    history: Sequence[BaseMessage], budget: int, encoding: str
) -> tuple[list[BaseMessage], list[DropRecord], int]:
    """`fit_history`, and the tokens the kept turns take."""
    kept, dropped = fit_history(history, budget, lambda m: message_tokens(m, encoding))
    return kept, dropped, sum(message_tokens(message, encoding) for message in kept)


def prompt_measure(
    prompt: BasePromptTemplate | None,
    question: str,
    variables: Mapping[str, Any],
    encoding: str,
    history_key: str = HISTORY,
) -> Measure:
    """Tokens of the whole prompt for a history and a context.

    `prompt` is rendered with the variables the stuff chain fills it with
    (`prompt_variables`), every one of them whatever its type, the history under
    `history_key`; without a prompt, history, context and question are counted as
    the messages they would be.
    """
    question = variables.get("question", question)  # as asked, blanks included

    def measure(history: Sequence[BaseMessage], context: BudgetedContext) -> int:
        if prompt is None:
            parts = [*history, HumanMessage(context.text), HumanMessage(question)]
            return prompt_tokens(parts, encoding)
        state = {**variables, history_key: list(history)}
        values = prompt_variables(question, context, prompt, extra=state)
        return prompt_tokens(render_prompt(prompt, values), encoding)

    return measure


def history_of(
    input: Any, prompt: BasePromptTemplate | None = None
) -> tuple[str, list[BaseMessage]] | None:
    """The chat history of a budget's input dict: its key and its messages, or None.

    The history is the first of `prompt`'s message placeholders the input fills,
    whatever its name, in any format `MessagesPlaceholder` accepts (messages,
    `(role, text)` tuples, OpenAI-style dicts, strings), as messages.

    Raises:
        InvalidInputError: The history is not a list of messages, or the input
            holds a `history` that `prompt` has no place for (it would not be sent).
    """
    if not isinstance(input, dict):
        return None
    key = next((k for k in history_keys(prompt) if input.get(k) is not None), None)
    if key is not None:
        return key, [without_warnings(m) for m in as_messages(input[key], key)]
    if input.get(HISTORY) is not None and prompt is not None:
        takes = {*prompt.input_variables, *prompt.optional_variables}
        if HISTORY not in takes:
            raise InvalidInputError(
                f"input['{HISTORY}'] holds a chat history, but the prompt has no place "
                f"for it, so it would not be sent: add MessagesPlaceholder("
                f"'{HISTORY}') to the prompt (the package's prompts have one), or "
                "leave the history out"
            )
    return None


def without_warnings(message: BaseMessage) -> BaseMessage:
    """`message` without the warning lines the package appended to an answer.

    A text answer ends with the package's `[warning: …]` lines; a chat history
    that stored it whole (`RunnableWithMessageHistory` stores the chain's text)
    would feed them back as the assistant's words on every later turn.
    """
    if not isinstance(message, AIMessage) or not isinstance(message.content, str):
        return message
    lines = message.content.split("\n")
    end = len(lines)
    while (
        end > 1
        and lines[end - 1].startswith(WARNING_START)
        and lines[end - 1].endswith("]")
    ):
        end -= 1
    if end == len(lines):
        return message
    return message.model_copy(update={"content": "\n".join(lines[:end])})


def as_messages(value: Any, key: str = HISTORY) -> list[BaseMessage]:
    """`value` as LangChain messages, converted as `MessagesPlaceholder` does.

    Raises:
        InvalidInputError: `value` is not a list, or an item is not a message.
    """
    formats = (
        "messages, (role, text) tuples, OpenAI-style dicts or strings, as "
        "MessagesPlaceholder takes"
    )
    if not isinstance(value, list | tuple):
        raise InvalidInputError(
            f"input[{key!r}] must be a list of {formats}; got {type(value).__name__}"
        )
    try:
        return convert_to_messages(list(value))
    except (NotImplementedError, ValueError, TypeError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InvalidInputError(
            f"input[{key!r}] must be a list of {formats}; {first}"
        ) from exc


def prompt_values(input: Any) -> dict[str, Any]:
    """The input's prompt variables, of any type (the question as asked among them)."""
    if not isinstance(input, dict):
        return {}
    return {k: v for k, v in input.items() if k not in _NOT_VARIABLES}


_NOT_VARIABLES = frozenset({"documents", "context"})  # the budget's own
