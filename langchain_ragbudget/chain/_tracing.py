"""OpenTelemetry spans for the pipeline's stages, carrying the drop ledger.

An adapter over LangChain's callbacks, so the stages hold no tracing code: the
attributes come from what they already hand to callbacks (the `CandidateList` a
stage returns, the budget's report event), and any OpenTelemetry backend shows the
ids a request dropped next to the rest of the service's trace. OpenTelemetry is
imported only when a handler is made, never with tracing off.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.runnables import Runnable

from langchain_ragbudget.budget._context_budget import REPORT_EVENT, ContextBudget
from langchain_ragbudget.budget._prompt import MEMORY_STATE
from langchain_ragbudget.budget._report import MemoryContext
from langchain_ragbudget.chain._stuff import ANSWER_RUN, BudgetedAnswer
from langchain_ragbudget.config._settings import TracingSettings
from langchain_ragbudget.errors import require
from langchain_ragbudget.ledger._identity import document_key
from langchain_ragbudget.ledger._records import DropRecord, Stage, records_of
from langchain_ragbudget.memory._budget import MEMORY_RUN
from langchain_ragbudget.retrieval._hybrid import FUSION_RUN
from langchain_ragbudget.retrieval._rerank import FlashRankRerank

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, TracerProvider
    from opentelemetry.util.types import AttributeValue

PREFIX = "ragbudget."
ROOT_SPAN = "ragbudget.pipeline"  # the call: its children are the stages
RETRIEVAL_SPAN = "ragbudget.retrieval"  # the outermost retriever
RETRIEVER_SPAN = "ragbudget.retriever"  # a retriever inside it (one fused list)
# Chain runs recognised as stages, by run name (a stage renamed with
# `with_config(run_name=...)` is not recognised).
STAGE_RUNS = {
    FUSION_RUN: str(Stage.FUSION),
    FlashRankRerank.__name__: str(Stage.RERANK),
    ContextBudget.__name__: str(Stage.BUDGET),
    ANSWER_RUN: "answer",
    MEMORY_RUN: str(Stage.MEMORY),
}
_OWN_BUDGET_STAGES = {str(Stage.BUDGET), str(Stage.EXTERNAL)}


def tracing_enabled(tracing: bool | TracingSettings) -> bool:
    return tracing.otel if isinstance(tracing, TracingSettings) else bool(tracing)


def traced(
    runnable: Runnable[Any, Any],
    tracing: bool | TracingSettings = True,
    tracer_provider: TracerProvider | None = None,
) -> Runnable[Any, Any]:
    """`runnable` with an `OtelSpans` handler bound when `tracing` is on, else itself.

    Raises:
        MissingExtraError: Tracing is on and opentelemetry-api is not installed.
    """
    if not tracing_enabled(tracing):
        return runnable
    return runnable.with_config(callbacks=[OtelSpans(tracer_provider)])


@dataclass
class _Run:
    span: Span | None  # the run's own span; None for runs that are not stages
    context: Context  # what spans of child runs nest under
    root: Span | None  # the span of the whole call, if that run is not a stage
    stage: str | None = None
    in_retrieval: bool = False
    before: frozenset[tuple[str, str, str]] = frozenset()  # records it was given
    skipped_before: frozenset[str] = frozenset()


class OtelSpans(BaseCallbackHandler):
    """A LangChain callback handler that turns our stages' runs into spans.

    Spans: `ragbudget.pipeline` for the call, nested under the span current where
    the chain was invoked; under it `ragbudget.retrieval` (inner retrievers as
    `ragbudget.retriever`), `.fusion`, `.rerank`, `.memory`, `.budget`,
    `.answer`. Other runs
    get no span; their children nest under the nearest one.

    Attributes (prefix `ragbudget.`): `stage`, `run_name`; retrieval `returned`;
    fusion, rerank and memory `kept_ids`, their own drops as parallel lists
    (`dropped_ids`, `_stages`, `_reasons`, `_details`), `dropped_count`,
    `skipped_stages`; the budget its report (`report_attributes`) with its own
    drops, the call the same with every stage's; a `BudgetedAnswer` adds
    `warnings`, `truncated`, `weak_evidence`. Passage text and the question are
    never put on a span.

    Raises:
        MissingExtraError: opentelemetry-api is not installed (the `otel` extra).
    """

    run_inline = True  # in the caller's context and in order, under ainvoke too

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        require("opentelemetry.trace", "otel", "tracing (tracing.otel)")
        from opentelemetry import context, trace

        self._trace = trace
        self._current = context.get_current
        self._tracer = trace.get_tracer(
            "langchain_ragbudget", tracer_provider=tracer_provider
        )
        self._runs: dict[UUID, _Run] = {}
        self._lock = threading.Lock()

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: dict[str, Any] | Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        name = str(kwargs.get("name") or "")
        stage = STAGE_RUNS.get(name)
        if stage is None:
            self._enter(run_id, parent_run_id, None, name)
            return
        record_ids, skipped = _record_ids(inputs)
        self._enter(
            run_id, parent_run_id, PREFIX + stage, name, stage, record_ids, skipped
        )

    def on_chain_end(
        self, outputs: dict[str, Any] | Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        run = self._exit(run_id)
        if run is None or run.span is None:
            return
        if run.stage in (Stage.FUSION, Stage.RERANK):
            run.span.set_attributes(_outcome(outputs, run))
        elif run.stage == Stage.MEMORY and isinstance(outputs, Mapping):
            run.span.set_attributes(_memory_attributes(outputs.get(MEMORY_STATE)))
        elif isinstance(outputs, BudgetedAnswer):
            run.span.set_attributes(_answer_attributes(outputs))
        run.span.end()

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._fail(run_id, error)

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        """The outermost retriever is the retrieval stage; inner ones its lists."""
        name = str(kwargs.get("name") or "")
        self._enter(run_id, parent_run_id, RETRIEVAL_SPAN, name, "retrieval")

    def on_retriever_end(
        self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any
    ) -> None:
        run = self._exit(run_id)
        if run is not None and run.span is not None:
            run.span.set_attribute(PREFIX + "returned", len(documents))
            run.span.end()

    on_retriever_error = on_chain_error

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        # Tracked for nesting only: model spans are the model integration's.
        self._enter(run_id, parent_run_id, None, "")

    def on_llm_start(
        self,
        serialized: dict[str, Any],
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._enter(run_id, parent_run_id, None, "")

    def on_llm_end(self, response: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self._exit(run_id)

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self._exit(run_id)  # the error reaches the stage that called the model

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        if name != REPORT_EVENT or not isinstance(data, Mapping):
            return
        with self._lock:
            run = self._runs.get(run_id)
        if run is None or run.span is None:
            return
        drops = list(data.get("dropped", []))
        own = [d for d in drops if d.get("stage") in _OWN_BUDGET_STAGES]
        run.span.set_attributes(report_attributes(data, own))
        if run.root is not None:
            run.root.set_attributes(report_attributes(data, drops))

    def _enter(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        span_name: str | None,
        run_name: str,
        stage: str | None = None,
        before: frozenset[tuple[str, str, str]] = frozenset(),
        skipped_before: frozenset[str] = frozenset(),
    ) -> None:
        """Track a run and open its span (the call's span, for a run with no parent).

        A parent the handler never saw (the caller's own chain) counts as none, so
        the spans nest under the OpenTelemetry span current here.
        """
        with self._lock:
            parent = self._runs.get(parent_run_id) if parent_run_id else None
        if parent is None:
            context, root, in_retrieval = self._current(), None, False
            span_name = span_name or ROOT_SPAN
        else:
            context, root = parent.context, parent.root
            in_retrieval = parent.in_retrieval
        if span_name == RETRIEVAL_SPAN and in_retrieval:
            span_name = RETRIEVER_SPAN
        span = None
        if span_name is not None:
            span = self._start(span_name, context, run_name, stage)
            context = self._trace.set_span_in_context(span, context)
            root = span if span_name == ROOT_SPAN else root
        run = _Run(
            span,
            context,
            root,
            stage,
            in_retrieval or stage == "retrieval",
            before,
            skipped_before,
        )
        with self._lock:
            self._runs[run_id] = run

    def _start(
        self, name: str, context: Context, run_name: str, stage: str | None
    ) -> Span:
        attributes: dict[str, AttributeValue] = {PREFIX + "run_name": run_name}
        if stage is not None:
            attributes[PREFIX + "stage"] = stage
        return self._tracer.start_span(name, context=context, attributes=attributes)

    def _exit(self, run_id: UUID) -> _Run | None:
        with self._lock:
            return self._runs.pop(run_id, None)

    def _fail(self, run_id: UUID, error: BaseException) -> None:
        run = self._exit(run_id)
        if run is None or run.span is None:
            return
        run.span.record_exception(error)
        run.span.set_status(
            self._trace.Status(
                self._trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"
            )
        )
        run.span.end()


def report_attributes(
    report: Mapping[str, Any], drops: Sequence[Mapping[str, Any]]
) -> dict[str, AttributeValue]:
    """Span attributes from a `BudgetReport.to_dict()` and the `drops` to name."""
    trimmed = list(report.get("trimmed", []))
    return {
        PREFIX + "surface": str(report.get("surface")),
        PREFIX + "tokens_used": int(report.get("tokens_used", 0)),
        PREFIX + "max_tokens": int(report.get("max_tokens", 0)),
        PREFIX + "max_docs": int(report.get("max_docs", 0)),
        PREFIX + "packing": str(report.get("packing")),
        PREFIX + "over_budget": bool(report.get("over_budget")),
        PREFIX + "kept_ids": [str(key) for key in report.get("kept_ids", [])],
        **drop_attributes(
            (str(d["id"]), str(d["stage"]), str(d["reason"]), str(d.get("detail")))
            for d in drops
        ),
        PREFIX + "shortened_ids": [str(t["id"]) for t in trimmed],
        **{
            PREFIX + f"shortened_{field}": [int(t[field]) for t in trimmed]
            for field in ("kept_sentences", "total_sentences", "omitted_tokens")
        },
        PREFIX + "skipped_stages": [
            str(skip["stage"]) for skip in report.get("skipped_stages", [])
        ],
    }


def drop_attributes(
    drops: Iterable[tuple[str, str, str, str]],
) -> dict[str, AttributeValue]:
    """`(id, stage, reason, detail)` records as parallel lists."""
    rows = list(drops)
    return {
        PREFIX + "dropped_ids": [row[0] for row in rows],
        PREFIX + "dropped_stages": [row[1] for row in rows],
        PREFIX + "dropped_reasons": [row[2] for row in rows],
        PREFIX + "dropped_details": [row[3] for row in rows],
        PREFIX + "dropped_count": len(rows),
    }


def _documents(value: Any) -> list[Document]:
    if isinstance(value, dict):
        value = value.get("documents")
    if not isinstance(value, list):
        return []
    return [doc for doc in value if isinstance(doc, Document)]


def _document_lists(value: Any) -> list[list[Document]]:
    """Fusion takes one list per retriever (`results`); the others one list."""
    if isinstance(value, dict) and isinstance(value.get("results"), list):
        return [_documents(docs) for docs in value["results"]]
    return [_documents(value)]


def _record_ids(inputs: Any) -> tuple[frozenset[tuple[str, str, str]], frozenset[str]]:
    """What a stage's input already recorded: drop identities, skipped stages."""
    drops: set[tuple[str, str, str]] = set()
    skipped: set[str] = set()
    for docs in _document_lists(inputs):
        found, skips, _ = records_of(docs)
        drops.update(_identity(record) for record in found)
        skipped.update(str(skip.stage) for skip in skips)
    return frozenset(drops), frozenset(skipped)


def _identity(record: DropRecord) -> tuple[str, str, str]:
    return (record.key, str(record.stage), str(record.reason))


def _outcome(outputs: Any, run: _Run) -> dict[str, AttributeValue]:
    documents = _documents(outputs)
    found, skips, _ = records_of(documents)
    new = [record for record in found if _identity(record) not in run.before]
    return {
        PREFIX + "kept_ids": [document_key(doc) for doc in documents],
        **drop_attributes((r.key, str(r.stage), str(r.reason), r.detail) for r in new),
        PREFIX + "skipped_stages": [
            str(s.stage) for s in skips if str(s.stage) not in run.skipped_before
        ],
    }


def _memory_attributes(memory: Any) -> dict[str, AttributeValue]:
    """The memories the prompt gets and every memory drop, by id."""
    if not isinstance(memory, MemoryContext):
        return {}
    return {
        PREFIX + "kept_ids": [str(doc.id) for doc in memory.documents],
        **drop_attributes(
            (r.key, str(r.stage), str(r.reason), r.detail) for r in memory.drops
        ),
    }


def _answer_attributes(answer: BudgetedAnswer) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {
        PREFIX + "surface": answer.surface,
        PREFIX + "warnings": list(answer.warnings),
        PREFIX + "truncated": answer.truncated,
    }
    if answer.weak_evidence is not None:
        attributes[PREFIX + "weak_evidence"] = answer.weak_evidence
    return attributes
