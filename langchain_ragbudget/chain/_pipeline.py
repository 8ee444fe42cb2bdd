"""The whole pipeline as one LCEL chain: retrieve, rerank, budget, answer.

    question -> {question, documents} -> FlashRankRerank -> ContextBudget -> chain

Each stage is an ordinary Runnable; the drop records ride along in the documents'
`CandidateList` and the run ledger, so nothing here wires the ledger by hand.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Literal, overload

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import BaseMessage
from langchain_core.prompts import BasePromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from langchain_ragbudget.budget._context_budget import BudgetedContext, ContextBudget
from langchain_ragbudget.budget._prompt import MEMORY_PROMPT, checked_prompt
from langchain_ragbudget.chain._stuff import (
    DEFAULT_PROMPT,
    BudgetedAnswer,
    chain_input,
    create_budgeted_stuff_chain,
    prompt_variables,
)
from langchain_ragbudget.chain._tracing import traced
from langchain_ragbudget.config._settings import ConfigLike, TracingSettings, as_config
from langchain_ragbudget.errors import MissingExtraError, require
from langchain_ragbudget.ledger._records import ledger_scope
from langchain_ragbudget.memory._budget import ATTACH, memory_step
from langchain_ragbudget.retrieval._rerank import FlashRankRerank

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

DEFAULT_CHAT_MODEL = "openai:gpt-4o-mini"  # when only OPENAI_API_KEY is set


def build_chat_model(config: ConfigLike = None) -> BaseChatModel | None:
    """The configured chat model, or None; gpt-4o-mini when only OPENAI_API_KEY is set.

    Raises:
        ConfigError: The file is invalid (before any model is made).
        MissingExtraError: The model's provider package is not installed (the
            `llm` extra holds the OpenAI one).
    """
    settings = as_config(config).llm
    name = settings.model
    if name is None and os.environ.get("OPENAI_API_KEY"):
        name = DEFAULT_CHAT_MODEL
    if name is None:
        return None
    require("langchain_classic", "llm", f"chat model {name!r}")
    from langchain_classic.chat_models import init_chat_model

    try:
        model: BaseChatModel = init_chat_model(
            name,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            timeout=settings.timeout,
        )
    except ImportError as exc:  # the provider's own package (langchain-openai...)
        raise MissingExtraError(
            f"chat model {name!r} needs its provider's package ({exc}); for OpenAI: "
            "pip install 'langchain-ragbudget[llm]'"
        ) from exc
    return model


@overload
def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: None = None,
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: bool = False,
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Runnable[Any, dict[str, Any]]: ...


@overload
def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: BaseLanguageModel[Any],
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: Literal[False] = False,
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Runnable[Any, str]: ...


@overload
def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: BaseLanguageModel[Any],
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: Literal[True],
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Runnable[Any, BudgetedAnswer]: ...


@overload
def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: BaseLanguageModel[Any] | None,
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: bool,
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Runnable[Any, Any]: ...


def create_budgeted_rag_chain(
    retriever: BaseRetriever,
    llm: BaseLanguageModel[Any] | None = None,
    *,
    budget: ContextBudget,
    reranker: FlashRankRerank | None = None,
    prompt: BasePromptTemplate | None = None,
    structured: bool = False,
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Runnable[Any, Any]:
    """A question in; an answer with warnings out (or, without `llm`, the state).

    Args:
        retriever: Any retriever; a `HybridRetriever` opens the run's ledger.
        llm: The model that answers; without one the chain ends at the budget and
            returns `{"question", "documents", "context"}`.
        budget: The surface's context budget.
        reranker: An optional rerank stage between retrieval and budget.
        prompt: The stuff chain's prompt (`DEFAULT_PROMPT` if None); the budget
            counts it as sent under `max_prompt_tokens`.
        structured: Return a `BudgetedAnswer` instead of text.
        tracing: OpenTelemetry spans per stage, carrying the drop records: a flag,
            or `config.tracing`.
        tracer_provider: Where spans go when tracing; the global provider if None.
        memory: A `MemoryRetriever`, whose memories get their own prompt section
            (`MEMORY_PROMPT` if `prompt` is None) within the surface's share.

    Returns:
        The chain, in a `ledger_scope` so that even a step that removes every
        candidate is reported. It takes the question, or a mapping with
        `question` and any other prompt variables (a chat `history`, say); it
        gives the answer text with warning lines appended (streamed), a
        `BudgetedAnswer` with `structured=True`, or, without `llm`, the state.

    Raises:
        TypeError: An argument is not of the type it takes (`retriever=None`...).
        ValueError: `llm` is given and `prompt` lacks `context` or `question`.
        InvalidInputError: At run time, a mapping without a string `question`, or
            with a key the chain writes (`documents`, `context`, `evidence_note`).
        MissingExtraError: Tracing is on and OpenTelemetry is not installed.

    Example:
        .. code-block:: python

            from langchain_ragbudget import (
                ContextBudget,
                FlashRankRerank,
                HybridRetriever,
                create_budgeted_rag_chain,
                load_config,
            )

            config = load_config("ragbudget.yml")
            chain = create_budgeted_rag_chain(
                HybridRetriever.from_config(config, documents=documents),
                llm,
                budget=ContextBudget.from_config(config, surface="chat"),
                reranker=FlashRankRerank.from_config(config),  # None when disabled
                structured=True,
                tracing=config.tracing,  # `tracing: {otel: true}` in the YAML
            )
            answer = chain.invoke("what lowers blood pressure?")
            print(answer.text())  # the answer, then its warnings
    """
    _check_parts(retriever, llm, budget, reranker, prompt, memory)
    chain: Runnable[Any, Any] = RunnableLambda(
        chain_input, name="ragbudget_input"
    ) | RunnablePassthrough.assign(documents=itemgetter("question") | retriever)
    if reranker is not None:
        chain = chain | reranker
    chain, prompt = _budgeted(chain, budget, prompt, memory, counted=llm is not None)
    if llm is not None:
        chain = chain | create_budgeted_stuff_chain(llm, prompt, structured=structured)
    return traced(ledger_scope(chain), tracing, tracer_provider)


def _check_parts(*values: object) -> None:
    """Refuse a part of the wrong type where it is given, not deep in LCEL.

    `values`: retriever, llm, budget, reranker, prompt and memory, in order.

    Raises:
        TypeError: Naming the argument, what it takes and what it got.
    """
    kinds = (Runnable, Runnable, ContextBudget, Runnable, BasePromptTemplate, Runnable)
    names = ("retriever", "llm", "budget", "reranker", "prompt", "memory")
    takes: dict[type, str] = {
        Runnable: "a LangChain Runnable (a retriever, a chat model...)",
        ContextBudget: "a ContextBudget (ContextBudget.from_config(...))",
        BasePromptTemplate: "a LangChain prompt template (ChatPromptTemplate)",
    }
    for name, value, kind in zip(names, values, kinds, strict=True):
        optional = name not in ("retriever", "budget")
        if value is None and optional:
            continue
        if not isinstance(value, kind):
            none = " or None" if optional else ""
            raise TypeError(
                f"create_budgeted_rag_chain: {name} must be {takes[kind]}{none}; "
                f"got {type(value).__name__}"
            )


def _budgeted(
    chain: Runnable[Any, Any],
    budget: ContextBudget,
    prompt: BasePromptTemplate | None,
    memory: BaseRetriever | None,
    counted: bool,
) -> tuple[Runnable[Any, Any], BasePromptTemplate | None]:
    """`chain` then the budget, given the prompt that is sent (memories around it)."""
    if memory is not None:  # before the budget, which counts the section
        chain, prompt = chain | memory_step(memory, budget), prompt or MEMORY_PROMPT
    if counted or prompt is not None:  # count the prompt that is sent
        budget = budget.model_copy(update={"prompt": checked_prompt(prompt)})
    chain = chain | budget
    return (chain if memory is None else chain | ATTACH), prompt


@dataclass(frozen=True)
class Explained:
    """One question through the pipeline: the context, the prompt, the answer.

    Attributes:
        question: The question asked.
        context: The budgeted context, with its report of every drop.
        messages: The prompt messages exactly as the stuff chain sends them.
        answer: The structured answer, or None without a model.
    """

    question: str
    context: BudgetedContext
    messages: list[BaseMessage]
    answer: BudgetedAnswer | None


def explain(
    question: str,
    retriever: BaseRetriever,
    budget: ContextBudget,
    *,
    reranker: FlashRankRerank | None = None,
    llm: BaseLanguageModel[Any] | None = None,
    prompt: BasePromptTemplate | None = None,
    tracing: bool | TracingSettings = False,
    tracer_provider: TracerProvider | None = None,
    memory: BaseRetriever | None = None,
) -> Explained:
    """Run `question` through the chain, keeping the prompt for a reader to see.

    For notebooks and the CLI's `ask`. One invocation, so a trace holds every
    stage under one span. Arguments as `create_budgeted_rag_chain`; `llm` None
    stops at the prompt.

    Raises:
        ValueError: `prompt` lacks `context` or `question`.
        MissingExtraError: Tracing is on and OpenTelemetry is not installed.
    """
    template = prompt or (DEFAULT_PROMPT if memory is None else MEMORY_PROMPT)
    chain = create_budgeted_rag_chain(
        retriever, budget=budget, reranker=reranker, prompt=template, memory=memory
    )
    if llm is not None:
        stuff = create_budgeted_stuff_chain(llm, template, structured=True)
        chain = chain | RunnablePassthrough.assign(answer=stuff)
    state = traced(chain, tracing, tracer_provider).invoke(question)
    context: BudgetedContext = state["context"]
    variables = prompt_variables(question, context, template)
    messages = template.format_prompt(**variables).to_messages()
    return Explained(question, context, messages, state.get("answer"))
