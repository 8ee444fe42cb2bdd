"""The budgeted stuff chain: prompt, model, and an answer that says what it left out.

Like LangChain's `create_stuff_documents_chain`, but fed by a `BudgetedContext`; the
answer comes with visible warnings for drops, skipped stages, weak evidence and an
answer cut at the model's output limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, Literal, overload

from langchain_core.language_models import BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import (
    Runnable,
    RunnableConfig,
    RunnableGenerator,
    RunnableLambda,
    RunnablePassthrough,
)
from pydantic import BaseModel

from langchain_ragbudget.budget._context_budget import BudgetedContext
from langchain_ragbudget.budget._history import history_of
from langchain_ragbudget.budget._prompt import DEFAULT_PROMPT as DEFAULT_PROMPT
from langchain_ragbudget.budget._prompt import PACKAGE_KEYS, checked_prompt
from langchain_ragbudget.budget._prompt import prompt_inputs as prompt_inputs
from langchain_ragbudget.budget._prompt import prompt_variables as prompt_variables
from langchain_ragbudget.budget._report import PromptRoom
from langchain_ragbudget.chain._warnings import context_warnings as context_warnings
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.evidence._assess import Evidence
from langchain_ragbudget.ledger._evidence_rows import (
    citations_table,
    drop_counts,
    evidence_table,
    skipped_table,
)
from langchain_ragbudget.ledger._html import display, element, key_values
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import Stage
from langchain_ragbudget.memory._budget import memories_table

_TRUNCATED_REASONS = {"length", "max_tokens", "MAX_TOKENS"}
ANSWER_RUN = "budgeted_stuff_chain"  # the stuff chain's run name, for tracers
ANSWER_METADATA = "ragbudget"  # the key of an answer's report in a message


class BudgetedAnswer(BaseModel):
    """The structured result: the answer and everything needed to trust it.

    Plain data, so `model_dump()` gives what to log or return from an API.

    Attributes:
        answer: The model's reply, as text.
        warnings: The lines to show next to the answer.
        citations: Per citation: `number`, `document`, `source`, `passages` (ids).
        kept: Per kept passage: `id`, `source`, `tokens`, ranks and scores.
        dropped: Per drop record (`DropRecord.to_entry`), memories' included.
        shortened: Per passage kept shortened (`TrimRecord.to_dict`).
        skipped_stages: Per skipped stage: `stage` and `reason`.
        weak_evidence: True, False, or None when no score could tell.
        evidence: The evidence check: `weak`, `score_key`, `score`, `threshold`.
        truncated: Whether the model stopped at its output limit.
        surface: The surface whose budget was applied.
        tokens_used: Tokens of the context sent.
        max_tokens: The surface's token budget.
        prompt: With `max_prompt_tokens`, `PromptRoom.to_dict()`; else None.
        memories: Per memory in the prompt (a chain given `memory=`): its text,
            every factor of its score, and `stale` (why, or None).
    """

    answer: str
    warnings: list[str]
    citations: list[dict[str, Any]]
    kept: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    shortened: list[dict[str, Any]]
    skipped_stages: list[dict[str, str]]
    weak_evidence: bool | None
    evidence: dict[str, Any]
    truncated: bool
    surface: str
    tokens_used: int
    max_tokens: int
    prompt: dict[str, Any] | None = None
    memories: list[dict[str, Any]] = []

    def text(self) -> str:
        """The answer followed by its warnings, one per line."""
        return "\n".join([self.answer, *self.warnings])

    def to_message(self) -> AIMessage:
        """The answer as an `AIMessage` a chat history or a checkpointer stores.

        Its content is the model's answer alone, so a later turn feeds back what
        the assistant said, never the package's warnings. The rest of the answer
        (warnings, citations, every record) is in `response_metadata` under
        `ragbudget`: LangChain keeps it through serialisation, and chat models,
        unlike with `additional_kwargs`, never send it back to the provider.
        `from_message` reads it back.
        """
        report = self.model_dump(mode="json", exclude={"answer"})
        return AIMessage(self.answer, response_metadata={ANSWER_METADATA: report})

    @classmethod
    def from_message(cls, message: BaseMessage) -> BudgetedAnswer:
        """The answer `to_message` stored, read back from its message.

        Raises:
            InvalidInputError: The message holds no ragbudget answer.
        """
        report = message.response_metadata.get(ANSWER_METADATA)
        if not isinstance(report, dict):
            raise InvalidInputError(
                f"the {message.type} message holds no {ANSWER_METADATA!r} entry in "
                "its response_metadata; make it with BudgetedAnswer.to_message()"
            )
        return cls(answer=str(message.text), **report)

    def __repr__(self) -> str:
        drops = drop_counts((d.get("stage"), d.get("reason")) for d in self.dropped)
        return (
            f"BudgetedAnswer({display_name(self.answer, 60)!r}, "
            f"{len(self.warnings)} warning(s), {len(self.citations)} citation(s), "
            f"{len(self.kept)} kept ({len(self.shortened)} shortened), {drops}, "
            f"{self.tokens_used} of {self.max_tokens} tokens ({self.surface!r}))"
        )

    def _repr_html_(self) -> str:
        evidence = Evidence(**self.evidence).describe()
        summary: list[tuple[str, object]] = [
            ("surface", display_name(self.surface)),
            ("tokens", f"{self.tokens_used} of {self.max_tokens}"),
            ("evidence", evidence),
            ("answer cut at the output limit", "yes" if self.truncated else "no"),
        ]
        if self.prompt is not None:
            summary.append(("whole prompt", PromptRoom(**self.prompt).describe()))
        parts = [
            element("div", self.answer, "rb-text"),
            *(element("div", line, "rb-warning") for line in self.warnings),
            key_values(summary, caption="answer"),
            citations_table(self.citations),
            evidence_table(
                self.kept, self.dropped, self.shortened, fold_stage=Stage.FUSION
            ),
        ]
        if self.memories:
            parts.append(memories_table(self.memories))
        if self.skipped_stages:
            parts.append(skipped_table(self.skipped_stages))
        return display("BudgetedAnswer", parts)


def was_truncated(message: BaseMessage | str) -> bool:
    """Whether the model stopped at its output limit (OpenAI, Anthropic, Gemini)."""
    if isinstance(message, str):
        return False
    meta = message.response_metadata or {}
    reason = meta.get("finish_reason") or meta.get("stop_reason")
    return reason in _TRUNCATED_REASONS


def build_answer(
    context: BudgetedContext, message: BaseMessage | str
) -> BudgetedAnswer:
    answer = message if isinstance(message, str) else str(message.text)
    truncated = was_truncated(message)
    warnings = context_warnings(context)
    if truncated:
        warnings.insert(0, "[warning: answer truncated at the model's output limit]")
    report = context.report
    return BudgetedAnswer(
        answer=answer,
        warnings=warnings,
        citations=[citation.to_dict() for citation in context.citations],
        kept=context.kept_entries(),
        dropped=[record.to_entry() for record in report.drops],
        shortened=[r.to_dict() for r in report.trimmed],
        skipped_stages=[s.to_dict() for s in report.skipped],
        weak_evidence=context.evidence.weak,
        evidence=context.evidence.to_dict(),
        truncated=truncated,
        surface=report.surface,
        tokens_used=report.tokens_used,
        max_tokens=report.max_tokens,
        prompt=None if report.prompt is None else report.prompt.to_dict(),
        memories=[] if context.memory is None else context.memory.entries(),
    )


@overload
def create_budgeted_stuff_chain(
    llm: BaseLanguageModel[Any],
    prompt: BasePromptTemplate | None = None,
    *,
    structured: Literal[False] = False,
) -> Runnable[dict[str, Any], str]: ...


@overload
def create_budgeted_stuff_chain(
    llm: BaseLanguageModel[Any],
    prompt: BasePromptTemplate | None = None,
    *,
    structured: Literal[True],
) -> Runnable[dict[str, Any], BudgetedAnswer]: ...


@overload
def create_budgeted_stuff_chain(
    llm: BaseLanguageModel[Any],
    prompt: BasePromptTemplate | None = None,
    *,
    structured: bool,
) -> Runnable[dict[str, Any], str | BudgetedAnswer]: ...


def create_budgeted_stuff_chain(
    llm: BaseLanguageModel[Any],
    prompt: BasePromptTemplate | None = None,
    *,
    structured: bool = False,
) -> Runnable[dict[str, Any], Any]:
    """Chain `{"question", "context": BudgetedContext}` to an answer with warnings.

    Put it after a `ContextBudget`. The package writes the warnings, every id
    escaped to one line, so nothing in a passage can forge one.

    Args:
        llm: The chat model (or LLM) that answers.
        prompt: A template taking `context` and `question`, and optionally
            `evidence_note` (without it the weak-evidence note goes in front of
            the context, so the model is told either way). `DEFAULT_PROMPT` if None.
        structured: Return a `BudgetedAnswer` instead of text.

    Returns:
        A Runnable giving the answer text with warning lines appended; `stream`
        yields the model's tokens, then the warnings. With `structured=True`,
        `invoke` returns a `BudgetedAnswer`, and `stream` yields the tokens
        (`str`), then the `BudgetedAnswer` as the last chunk.

    Raises:
        TypeError: `llm` or `prompt` is not of the type it takes; at run time,
            the input holds no `BudgetedContext` under `context`.
        ValueError: `prompt` lacks `context` or `question`.
    """
    if not isinstance(llm, Runnable):
        raise TypeError(
            "create_budgeted_stuff_chain: llm must be a chat model (a LangChain "
            f"Runnable); got {type(llm).__name__}"
        )
    if prompt is not None and not isinstance(prompt, BasePromptTemplate):
        raise TypeError(
            "create_budgeted_stuff_chain: prompt must be a LangChain prompt "
            f"template (ChatPromptTemplate) or None; got {type(prompt).__name__}"
        )
    template = checked_prompt(prompt)

    def variables(state: dict[str, Any]) -> dict[str, Any]:
        history_of(state, template)  # a history the prompt would not send: refused
        return prompt_variables(
            question_of(state), _context_of(state), template, extra=state
        )

    generate: Runnable[dict[str, Any], Any] = (
        RunnableLambda(variables, name="ragbudget_prompt_inputs") | template | llm
    )
    if structured:
        whole = (
            RunnablePassthrough.assign(message=generate)
            | RunnableLambda(
                lambda state: build_answer(_context_of(state), state["message"]),
                name="ragbudget_answer",
            )
        ).with_config(run_name=ANSWER_RUN)
        return _StreamedAnswer(generate, whole)
    return _text_chain(generate)


def chain_input(input: Any) -> dict[str, Any]:
    """An input as the chain's state: a question, or a mapping with `question`.

    A mapping's other keys (a chat `history`...) travel with it to the prompt.

    Raises:
        InvalidInputError: A mapping without a string `question`, or one holding a
            key the chain writes itself (`documents`, `context`, `evidence_note`).
    """
    if not isinstance(input, Mapping):
        return {"question": input}
    state = dict(input)
    question_of(state)
    taken = sorted(PACKAGE_KEYS & set(state))
    if taken:
        raise InvalidInputError(
            f"the chain's input may not hold the key(s) {taken}: the chain writes "
            "them itself; rename them in the input and the prompt"
        )
    return state


def question_of(state: Mapping[str, Any]) -> str:
    if "question" not in state:
        raise InvalidInputError(
            "the chain's input needs the key 'question' (a string); got a mapping "
            f"with keys {sorted(map(str, state))}"
        )
    question = state["question"]
    if not isinstance(question, str):
        raise InvalidInputError(
            "the chain's input key 'question' must be a string, got "
            f"{type(question).__name__}"
        )
    return question


Finish = Callable[[dict[str, Any], Any], Any]


def _token_streams(
    generate: Runnable[dict[str, Any], Any], finish: Finish
) -> tuple[
    Callable[..., Iterator[Any]],
    Callable[..., AsyncIterator[Any]],
]:
    """The model's tokens (`str`) as they come, then `finish(state, reply)`.

    LangChain passes `config` (the child callbacks) to generators that take it.
    """

    def stream(
        states: Iterator[dict[str, Any]], config: RunnableConfig | None = None
    ) -> Iterator[Any]:
        state = _merged(states)
        reply: Any = None
        for chunk in generate.stream(state, config):
            reply = chunk if reply is None else reply + chunk
            yield _text_of(chunk)
        yield finish(state, reply)

    async def astream(
        states: AsyncIterator[dict[str, Any]], config: RunnableConfig | None = None
    ) -> AsyncIterator[Any]:
        state: dict[str, Any] = {}
        async for part in states:
            state.update(part)
        reply: Any = None
        async for chunk in generate.astream(state, config):
            reply = chunk if reply is None else reply + chunk
            yield _text_of(chunk)
        yield finish(state, reply)

    return stream, astream


def _text_chain(generate: Runnable[dict[str, Any], Any]) -> Runnable[Any, str]:
    stream, astream = _token_streams(
        generate, lambda state, reply: _warning_tail(_context_of(state), reply)
    )
    return RunnableGenerator(stream, astream, name=ANSWER_RUN)


class _StreamedAnswer(RunnableGenerator):
    """Streams the answer's tokens (`str`), then the `BudgetedAnswer` (last chunk).

    A generator's `invoke` would add the chunks together, which cannot include a
    `BudgetedAnswer`, so `invoke` runs `whole`: the same chain without streaming.
    """

    def __init__(
        self,
        generate: Runnable[dict[str, Any], Any],
        whole: Runnable[dict[str, Any], BudgetedAnswer],
    ) -> None:
        stream, astream = _token_streams(
            generate,
            lambda state, reply: build_answer(_context_of(state), _reply(reply)),
        )
        super().__init__(stream, astream, name=ANSWER_RUN)
        self._whole = whole

    def invoke(
        self,
        input: dict[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> BudgetedAnswer:
        return self._whole.invoke(input, config, **kwargs)

    async def ainvoke(
        self,
        input: dict[str, Any],
        config: RunnableConfig | None = None,
        **kwargs: Any,
    ) -> BudgetedAnswer:
        return await self._whole.ainvoke(input, config, **kwargs)


def _reply(reply: BaseMessage | str | None) -> BaseMessage | str:
    """A model that streamed nothing said ''."""
    return "" if reply is None else reply


def _merged(states: Iterator[dict[str, Any]]) -> dict[str, Any]:
    state: dict[str, Any] = {}
    for part in states:
        state.update(part)
    return state


def _text_of(chunk: Any) -> str:
    return chunk if isinstance(chunk, str) else str(chunk.text)


def _warning_tail(context: BudgetedContext, reply: BaseMessage | str | None) -> str:
    lines = context_warnings(context)
    if reply is not None and was_truncated(reply):
        lines.insert(0, "[warning: answer truncated at the model's output limit]")
    return "".join(f"\n{line}" for line in lines)


def _context_of(state: dict[str, Any]) -> BudgetedContext:
    context = state.get("context")
    if not isinstance(context, BudgetedContext):
        raise TypeError(
            "the chain needs a BudgetedContext under 'context' (put a ContextBudget "
            f"before it); got {type(context).__name__}"
        )
    return context
