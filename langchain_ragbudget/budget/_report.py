"""What a budget run returns: the kept context and the report of every drop."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
)
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config

from langchain_ragbudget.budget._render import Citation
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evidence._assess import Evidence
from langchain_ragbudget.ledger._evidence_rows import (
    TEXT,
    citations_table,
    document_entry,
    drop_counts,
    evidence_table,
    issues_table,
    skipped_table,
)
from langchain_ragbudget.ledger._html import (
    Markup,
    display,
    element,
    folded,
    key_values,
)
from langchain_ragbudget.ledger._metadata_keys import (
    CONTEXT_TOKENS,
    MEMORY_AGE_DAYS,
    MEMORY_IMPORTANCE,
    MEMORY_RECENCY,
    MEMORY_SAID_AT,
    MEMORY_SCORE,
    MEMORY_SIMILARITY,
    MEMORY_SOURCE_ID,
    MEMORY_STALE,
    MEMORY_SUBJECT,
    MEMORY_TIMES_SAID,
)
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import (
    DropReason,
    DropRecord,
    ScoreIssue,
    Stage,
    StageSkip,
    TrimRecord,
)


@dataclass(frozen=True)
class PromptRoom:
    """How one prompt's tokens were shared between fixed parts, history and context.

    Attributes:
        fixed_tokens: The least prompt the chain can send: no history, an empty
            context (system prompt, question, empty-context text and its note,
            message wrappers, reply priming).
        prompt_tokens: The whole prompt as sent (else the sum of the parts when
            the budget has no prompt to render).
    """

    max_prompt_tokens: int
    reserve_output_tokens: int
    fixed_tokens: int
    history_share: float
    history_budget: int
    history_tokens: int
    context_budget: int
    prompt_tokens: int

    @property
    def over_tokens(self) -> int:
        """Tokens over `max_prompt_tokens - reserve_output_tokens` (0: within).

        Only the fixed parts can put a prompt over: history and context give way.
        """
        limit = self.max_prompt_tokens - self.reserve_output_tokens
        return max(0, self.prompt_tokens - limit)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def describe(self) -> str:
        over = f", {self.over_tokens} over" if self.over_tokens else ""
        return (
            f"{self.prompt_tokens} of {self.max_prompt_tokens}{over} "
            f"({self.reserve_output_tokens} reserved for the answer; history "
            f"{self.history_tokens} of {self.history_budget}, share "
            f"{self.history_share})"
        )


@dataclass(frozen=True)
class StaleFlag:
    """A memory kept in the prompt although the document it came from changed."""

    key: str
    source: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.key, "source": self.source, "detail": self.detail}


@dataclass(frozen=True)
class MemoryContext:
    """The memories the prompt gets, their section's text, and the records.

    Attributes:
        documents: The kept memories, best first (metadata: every score factor).
        text: The memory section exactly as sent ('' when none was kept).
        drops: Every `memory / ...` record, the recall's and the share's.
        stale: The kept memories whose source changed.
        tokens_used: Tokens of `text`.
        below_k: Memories the recall ranked below its `k` (counted, not named).
    """

    documents: list[Document] = field(default_factory=list)
    text: str = ""
    drops: list[DropRecord] = field(default_factory=list)
    stale: list[StaleFlag] = field(default_factory=list)
    tokens_used: int = 0
    max_memories: int = 0
    memory_tokens: int = 0
    below_k: int = 0

    def entries(self) -> list[dict[str, Any]]:
        keys = (
            MEMORY_SUBJECT,
            MEMORY_SIMILARITY,
            MEMORY_IMPORTANCE,
            MEMORY_AGE_DAYS,
            MEMORY_RECENCY,
            MEMORY_SCORE,
            MEMORY_SAID_AT,
        )
        return [
            {
                "id": document.id,
                "text": document.page_content,
                **{key: document.metadata.get(key) for key in keys},
                MEMORY_TIMES_SAID: document.metadata.get(MEMORY_TIMES_SAID),
                MEMORY_SOURCE_ID: document.metadata.get(MEMORY_SOURCE_ID),
                "stale": document.metadata.get(MEMORY_STALE),
            }
            for document in self.documents
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kept": self.entries(),
            "dropped": [record.to_dict() for record in self.drops],
            "stale": [flag.to_dict() for flag in self.stale],
            "tokens_used": self.tokens_used,
            "max_memories": self.max_memories,
            "memory_tokens": self.memory_tokens,
        }


@dataclass(frozen=True)
class BudgetReport:
    """What the budget kept and what every stage dropped, and why.

    Attributes:
        surface: The surface whose budget was applied.
        encoding: The tiktoken encoding tokens were counted in.
        tokens_used: Tokens of the rendered context (headers and passages).
        packing: The packing policy (`skip` or `trim`).
        order: The citation order (`rank` or `edges`).
        over_budget: The context is over `max_tokens` (only `min_docs` can cause
            it), or the whole prompt over `max_prompt_tokens`.
        kept_ids: Keys of the kept passages, in the budget's input (rank) order.
        drops: Every drop record: earlier stages', the budget's own, and one
            `external_step / unaccounted` record per candidate that vanished.
        skipped: Stages that did not run.
        issues: Scores that were not finite numbers.
        trimmed: The passages kept shortened.
        prompt: With `max_prompt_tokens`, how the whole prompt was shared (None
            without); `max_tokens` is then the context's share.
        passage_text: The passage text the context shows, without headers,
            quote marks or markers (None when not known).
    """

    surface: str
    encoding: str
    max_tokens: int
    tokens_used: int
    max_docs: int
    min_docs: int
    packing: str
    order: str
    over_budget: bool
    kept_ids: list[str]
    drops: list[DropRecord]
    skipped: list[StageSkip] = field(default_factory=list)
    issues: list[ScoreIssue] = field(default_factory=list)
    trimmed: list[TrimRecord] = field(default_factory=list)
    prompt: PromptRoom | None = None
    passage_text: tuple[str, ...] | None = field(default=None, repr=False)

    @property
    def passage_tokens(self) -> int | None:
        """Tokens of `passage_text`; the rest of `tokens_used` is `overhead_tokens`.

        Counted when asked: fitting a context does not pay for it.
        """
        if self.passage_text is None:
            return None
        return sum(count_tokens(text, self.encoding) for text in self.passage_text)

    @property
    def overhead_tokens(self) -> int | None:
        """Tokens of citation headers, quote marks and omission markers."""
        if self.passage_tokens is None:
            return None
        return max(self.tokens_used - self.passage_tokens, 0)

    @property
    def budget_drops(self) -> list[DropRecord]:
        """The drops the budget itself made."""
        return [record for record in self.drops if record.stage == Stage.BUDGET]

    @property
    def unaccounted(self) -> list[DropRecord]:
        """Candidates that vanished between stages without any stage's record."""
        return [r for r in self.drops if r.reason == DropReason.UNACCOUNTED]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return {
            "surface": self.surface,
            "encoding": self.encoding,
            "max_tokens": self.max_tokens,
            "tokens_used": self.tokens_used,
            "max_docs": self.max_docs,
            "min_docs": self.min_docs,
            "packing": self.packing,
            "order": self.order,
            "over_budget": self.over_budget,
            "kept_ids": list(self.kept_ids),
            "dropped": [record.to_dict() for record in self.drops],
            "skipped_stages": [skip.to_dict() for skip in self.skipped],
            "score_issues": [issue.to_dict() for issue in self.issues],
            "trimmed": [record.to_dict() for record in self.trimmed],
            "prompt": None if self.prompt is None else self.prompt.to_dict(),
            "passage_tokens": self.passage_tokens,
            "overhead_tokens": self.overhead_tokens,
        }

    def summary(self) -> str:
        """One line: tokens, passages kept and shortened, drops."""
        over = ", over budget" if self.over_budget else ""
        return (
            f"surface {self.surface!r}, {self.tokens_used} of {self.max_tokens} "
            f"tokens{over}, {len(self.kept_ids)} kept ({len(self.trimmed)} shortened), "
            + drop_counts((record.stage, record.reason) for record in self.drops)
        )

    def __repr__(self) -> str:
        return f"BudgetReport({self.summary()})"

    def _repr_html_(self) -> str:
        kept = [{"id": key} for key in self.kept_ids]
        return display("BudgetReport", _report_parts(self, kept))


@dataclass(frozen=True)
class BudgetedContext:
    """The kept passages, their citations, the rendered text, and the report.

    Attributes:
        documents: The kept passages in prompt order (grouped by citation), each
            with `context_tokens` in metadata.
        citations: One citation per source document, numbered in prompt order.
        text: The context exactly as the chain sends it; tokens are counted on it.
        report: What was kept and dropped, and why.
        evidence: Whether the best kept score clears the surface's threshold.
        history: The chat history the prompt gets: the kept turns when the
            surface budgets the whole prompt, else the history as given.
        memory: The recalled memories and their records, when the chain
            recalls memories; else None.
    """

    documents: list[Document]
    citations: list[Citation]
    text: str
    report: BudgetReport
    evidence: Evidence
    history: list[BaseMessage] = field(default_factory=list)
    memory: MemoryContext | None = None

    def kept_entries(self) -> list[dict[str, Any]]:
        """Per kept passage, in prompt order: id, source, tokens, ranks, scores."""
        return [
            document_entry(d, tokens=d.metadata.get(CONTEXT_TOKENS))
            for d in self.documents
        ]

    def __repr__(self) -> str:
        return (
            f"BudgetedContext({len(self.documents)} passages in "
            f"{len(self.citations)} citations, {self.report.summary()})"
        )

    def _repr_html_(self) -> str:
        kept = [
            {**entry, TEXT: document.page_content}
            for entry, document in zip(self.kept_entries(), self.documents, strict=True)
        ]
        sent = folded(
            f"the context as sent ({self.report.tokens_used} tokens)",
            element("div", self.text, "rb-text"),
        )
        return display(
            "BudgetedContext",
            [
                *_report_parts(self.report, kept, self.evidence),
                citations_table([c.to_dict() for c in self.citations]),
                sent,
            ],
        )


def _report_parts(
    report: BudgetReport,
    kept: list[dict[str, Any]],
    evidence: Evidence | None = None,
) -> list[Markup]:
    summary: list[tuple[str, object]] = [
        ("surface", display_name(report.surface)),
        ("tokens", f"{report.tokens_used} of {report.max_tokens} ({report.encoding})"),
        ("passages", f"{len(report.kept_ids)} kept of max_docs={report.max_docs}"),
        ("shortened", len(report.trimmed)),
        ("packing / order", f"{report.packing} / {report.order}"),
        (
            "over budget",
            f"yes (min_docs={report.min_docs})" if report.over_budget else "no",
        ),
        ("drops", drop_counts((r.stage, r.reason) for r in report.drops)),
    ]
    if report.prompt is not None:
        summary.append(("whole prompt", report.prompt.describe()))
    if evidence is not None:
        summary.append(("evidence", evidence.describe()))
    dropped = [
        {**record.to_entry(), TEXT: record.document.page_content}
        for record in report.drops
    ]
    parts = [
        key_values(summary, caption="budget"),
        evidence_table(
            kept,
            dropped,
            [record.to_dict() for record in report.trimmed],
            fold_stage=Stage.FUSION,
        ),
    ]
    if report.skipped:
        parts.append(skipped_table([skip.to_dict() for skip in report.skipped]))
    if report.issues:
        parts.append(issues_table([issue.to_dict() for issue in report.issues]))
    return parts


REPORT_RUN = RunnableLambda(lambda report: report, name="ragbudget_budget_report")


def report_config(
    config: RunnableConfig,
    run_manager: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun,
    context: BudgetedContext,
) -> RunnableConfig:
    """The config of the child run that shows the report to tracers."""
    report = context.report
    return patch_config(
        config,
        callbacks=run_manager.get_child(),
        run_name="ragbudget_budget_report",
    ) | {
        "metadata": {
            **(config.get("metadata") or {}),
            "ragbudget_surface": report.surface,
            "ragbudget_tokens_used": report.tokens_used,
            "ragbudget_max_tokens": report.max_tokens,
            "ragbudget_dropped_ids": [record.key for record in report.drops],
            "ragbudget_unaccounted_ids": [record.key for record in report.unaccounted],
            "ragbudget_skipped_stages": [str(skip.stage) for skip in report.skipped],
        }
    }
