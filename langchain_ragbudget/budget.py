"""The context budget: passages into a per-surface token and count budget.

`ContextBudget` is a Runnable. Given documents (or a dict holding `documents`, and
the `question`, as in an LCEL chain) it returns a `BudgetedContext`: the kept
passages (whole, or shortened to whole sentences with `packing: trim`) grouped into
citations, the exact text the chain will send, and a report naming every candidate
that any stage dropped and every passage this stage shortened. The report also
reaches callbacks, as the custom event `ragbudget_context_report` and as the
metadata of a child run, so a tracer such as LangSmith shows the dropped ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.runnables import (
    RunnableConfig,
    RunnableLambda,
    RunnableSerializable,
)
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict

from langchain_ragbudget._evidence_rows import (
    TEXT,
    citations_table,
    document_entry,
    drop_counts,
    evidence_table,
    issues_table,
    skipped_table,
)
from langchain_ragbudget._html import Markup, display, element, folded, key_values
from langchain_ragbudget._identity import document_key, with_metadata
from langchain_ragbudget._metadata_keys import CONTEXT_TOKENS, FUSED_RANK, HEADER_TOKENS
from langchain_ragbudget._sentence_scoring import fitted_relevance, overlap_relevance
from langchain_ragbudget._sentences import sentence_spans
from langchain_ragbudget._tokens import count_tokens
from langchain_ragbudget._validation import check_documents
from langchain_ragbudget.config import (
    RagBudgetConfig,
    RetrievalSettings,
    SurfaceSettings,
    as_config,
    default_of,
)
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.evidence import Evidence, assess_evidence
from langchain_ragbudget.ledger import (
    DropReason,
    DropRecord,
    RunLedger,
    ScoreIssue,
    Stage,
    StageSkip,
    TrimRecord,
    ledgers_of,
    records_of,
    scope_ledgers,
)
from langchain_ragbudget.packing import (
    PackItem,
    PackResult,
    Sentences,
    omission_points,
    pack,
)
from langchain_ragbudget.render import Citation, ContextFormat, group_citations

REPORT_EVENT = "ragbudget_context_report"


@dataclass(frozen=True)
class BudgetReport:
    """What the budget kept and what every stage dropped, and why.

    Attributes:
        surface: The surface whose budget was applied.
        encoding: The tiktoken encoding tokens were counted in.
        max_tokens: The surface's token budget.
        tokens_used: Tokens of the rendered context (headers and passages).
        max_docs: The surface's passage cap.
        min_docs: Passages kept even over the token budget.
        packing: The packing policy (`skip` or `stop`).
        order: The citation order (`rank` or `edges`).
        over_budget: True when the context is over `max_tokens` (which only
            `min_docs` can cause).
        kept_ids: Keys of the kept passages, in the budget's input (rank) order.
        drops: Every drop record: earlier stages', the budget's own, and one
            `external_step / unaccounted` record per candidate that vanished.
        skipped: Stages that did not run.
        issues: Scores that were not finite numbers.
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

    @property
    def budget_drops(self) -> list[DropRecord]:
        """The drops this stage made (over max_docs, over max_tokens, duplicate)."""
        return [record for record in self.drops if record.stage == Stage.BUDGET]

    @property
    def unaccounted(self) -> list[DropRecord]:
        """Candidates that vanished between stages without any stage's record."""
        return [r for r in self.drops if r.reason == DropReason.UNACCOUNTED]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view, for tracers, logs and the structured answer."""
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
        }

    def summary(self) -> str:
        """One line: tokens of the budget, passages kept and shortened, drops."""
        over = ", over budget" if self.over_budget else ""
        return (
            f"surface {self.surface!r}, {self.tokens_used} of {self.max_tokens} "
            f"tokens{over}, {len(self.kept_ids)} kept ({len(self.trimmed)} shortened), "
            + drop_counts((record.stage, record.reason) for record in self.drops)
        )

    def __repr__(self) -> str:
        return f"BudgetReport({self.summary()})"

    def _repr_html_(self) -> str:
        """Jupyter's view: the settings, then every candidate kept or dropped."""
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
    """

    documents: list[Document]
    citations: list[Citation]
    text: str
    report: BudgetReport
    evidence: Evidence

    def kept_entries(self) -> list[dict[str, Any]]:
        """Per kept passage, in prompt order: id, source, tokens, ranks and scores."""
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
        """Jupyter's view: the report's tables, the citations, the text sent."""
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
    """The summary, the evidence table, skipped stages and score issues."""
    summary: list[tuple[str, object]] = [
        ("surface", report.surface),
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


class ContextBudget(RunnableSerializable[Any, Any]):
    """Pack passages, in rank order, into one surface's budget.

    Whole passages while they fit; with `packing: trim`, a passage that does not
    fit is shortened to its most relevant whole sentences (recorded), the others
    are dropped (recorded). Tokens are counted in the surface's tiktoken encoding
    on each passage exactly as `format` renders it (citation header included),
    once per text per process.

    A Runnable: documents in, a `BudgetedContext` out; or, in an LCEL chain, a dict
    with `documents` in and the same dict with `context` added out. Every run also
    sends its report to callbacks, as the custom event `ragbudget_context_report`
    and as the metadata of a child run named `ragbudget_budget_report`.

    Attributes:
        surface: The surface's name, for reports and warnings.
        settings: The surface's budget (`max_docs`, `max_tokens`, encoding...).
        format: How passages and citation headers are rendered.
        id_key: The metadata key that identifies a passage when `Document.id` is
            unset.

    Example:
        .. code-block:: python

            from langchain_ragbudget import ContextBudget

            budget = ContextBudget.from_config("ragbudget.yml", surface="chat")
            context = budget.fit(retriever.invoke("what lowers blood pressure?"))
            print(context.report.tokens_used, context.report.max_tokens)
            for record in context.report.drops:
                print(record.key, record.stage, record.reason, record.detail)
    """

    surface: str = "chat"
    settings: SurfaceSettings
    format: ContextFormat = ContextFormat()
    id_key: str | None = default_of(RetrievalSettings, "id_key")

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def from_config(
        cls,
        config: RagBudgetConfig | str | Path | None = None,
        *,
        surface: str = "chat",
        **kwargs: Any,
    ) -> ContextBudget:
        """The budget of `surface`, as the configuration describes it.

        Args:
            config: A loaded configuration, a YAML file, or None for the shipped
                defaults.
            surface: A key of the config's `surfaces`.
            **kwargs: Further fields, e.g. `format`.

        Returns:
            The budget, with the config's `retrieval.id_key`.

        Raises:
            ConfigError: The file is invalid, or it has no such surface.
        """
        config = as_config(config)
        return cls(
            surface=surface,
            settings=config.surface(surface),
            id_key=config.retrieval.id_key,
            **kwargs,
        )

    def fit(
        self,
        documents: Sequence[Document],
        scoped: Sequence[RunLedger] = (),
        question: str | None = None,
    ) -> BudgetedContext:
        """Pack `documents` (best first); pure apart from the token cache.

        Args:
            documents: The candidates, best first (a `CandidateList` carries the
                records of earlier stages; a plain list works too).
            scoped: Ledgers of the enclosing `ledger_scope`, reconciled with those
                the documents carry.
            question: What the sentences of a passage shortened by `trim` are
                chosen for; without it the leading sentences are kept.

        Returns:
            The kept passages (a shortened one holds its kept sentences), their
            citations, the rendered text, the report of every drop (earlier
            stages', this stage's, and the unaccounted) and every shortening, and
            the evidence check.

        Raises:
            InvalidInputError: `documents` is not a list of Documents, or a text
                cannot be encoded.
            ModelUnavailableError: The tiktoken encoding cannot be loaded.
        """
        documents = check_documents(documents)
        settings = self.settings
        items = self._measure(documents)
        shorten = _Shortener(
            self.format,
            settings.encoding_name,
            documents,
            question,
            overlap_relevance if settings.relevance == "overlap" else fitted_relevance,
        )
        result = pack(
            items,
            max_tokens=settings.max_tokens,
            max_docs=settings.max_docs,
            policy=settings.packing,
            min_docs=settings.min_docs,
            sentences_of=shorten.shape,
            max_sentences=settings.max_sentences,
        )
        trims = dict(result.trimmed)
        headers = header_costs(items, result.kept)
        kept: list[Document] = []
        shortened: dict[str, list[str | None]] = {}
        trimmed: list[TrimRecord] = []
        for i in result.kept:
            if i not in trims:
                metadata = {
                    **documents[i].metadata,
                    CONTEXT_TOKENS: items[i].tokens,
                    HEADER_TOKENS: headers[i],
                }
                kept.append(with_metadata(documents[i], metadata))
                continue
            key = document_key(documents[i], self.id_key)
            document, segments, record = shorten.apply(i, key, trims[i], items[i])
            metadata = {**document.metadata, HEADER_TOKENS: headers[i]}
            kept.append(with_metadata(document, metadata))
            shortened[key] = segments
            trimmed.append(record)
        citations = group_citations(
            kept, self.format, self.id_key, edges=settings.order == "edges"
        )
        blocks = self.format.blocks(citations, shortened)
        encoding = settings.encoding_name
        tokens_used = sum(count_tokens(block, encoding) for block in blocks)
        upstream, skipped, issues = records_of(documents, scoped)
        budget_drops = [
            self._drop_record(
                documents[i],
                i + 1,
                reason,
                (items[i].counted_tokens, headers[i]),
                result,
            )
            for i, reason in result.dropped
        ]
        report = BudgetReport(
            surface=self.surface,
            encoding=encoding,
            max_tokens=settings.max_tokens,
            tokens_used=tokens_used,
            max_docs=settings.max_docs,
            min_docs=settings.min_docs,
            packing=settings.packing,
            order=settings.order,
            # exact by construction (see render.py); the check keeps it honest anyway
            over_budget=result.over_budget or tokens_used > settings.max_tokens,
            kept_ids=[document_key(doc, self.id_key) for doc in kept],
            drops=[
                *upstream,
                *budget_drops,
                *self._unaccounted(documents, upstream, scoped),
            ],
            skipped=skipped,
            issues=issues,
            trimmed=trimmed,
        )
        return BudgetedContext(
            documents=[doc for citation in citations for doc in citation.documents],
            citations=citations,
            text="".join(blocks),
            report=report,
            evidence=assess_evidence(
                kept, settings.weak_evidence, candidates=documents, question=question
            ),
        )

    def _measure(self, documents: Sequence[Document]) -> list[PackItem]:
        """Each passage as the packer sees it; tokens are counted when it is weighed."""
        fmt, encoding = self.format, self.settings.encoding_name
        first_seen: dict[str, int] = {}
        items = []
        for document in documents:
            group = fmt.group_of(document, self.id_key)
            number = first_seen.setdefault(group, len(first_seen) + 1)
            items.append(
                PackItem(
                    tokens=partial(_rendered_tokens, fmt, document, encoding),
                    group=group,
                    group_tokens=partial(
                        _header_tokens, fmt, number, document, encoding
                    ),
                    content_key=document.page_content,
                )
            )
        return items

    def _unaccounted(
        self,
        documents: Sequence[Document],
        upstream: Sequence[DropRecord],
        scoped: Sequence[RunLedger],
    ) -> list[DropRecord]:
        """Records for candidates that entered the run and vanished with no record.

        Only a step this package did not write can do that (a slice, a filter).
        """
        ledgers = {id(ledger): ledger for ledger in [*ledgers_of(documents), *scoped]}
        present = {document_key(doc, self.id_key) for doc in documents}
        present.update(record.key for record in upstream)
        missing = {
            key: document
            for ledger in ledgers.values()
            for key, document in ledger.entered.items()
            if key not in present
        }
        return [
            DropRecord(
                key=key,
                stage=Stage.EXTERNAL,
                reason=DropReason.UNACCOUNTED,
                rank=int(document.metadata.get(FUSED_RANK) or 0),
                document=document,
                detail="entered at fusion, missing at the budget, and no stage "
                "recorded removing it",
            )
            for key, document in missing.items()
        ]

    def _drop_record(
        self,
        document: Document,
        rank: int,
        reason: DropReason,
        cost: tuple[int | None, int | None],
        result: PackResult,
    ) -> DropRecord:
        """The record of one budget drop; `cost` is (passage, citation header).

        Either is `None` for a passage the packer never weighed (a duplicate,
        one past `max_docs`, one after `stop`): it was never counted.

        The header is counted once per source document, by its first kept
        passage; a passage whose document has none kept yet needs it too, so a
        passage that looks small enough can still miss the room left.
        """
        settings = self.settings
        tokens, header = cost
        if reason == DropReason.MAX_DOCS:
            detail = f"max_docs={settings.max_docs} already kept"
        elif reason == DropReason.DUPLICATE:
            detail = "same text as a kept passage"
        elif settings.packing == "stop":
            detail = f"packing stopped at the first overflow of {settings.max_tokens}"
        else:
            left = settings.max_tokens - result.tokens_used
            needs = f"{tokens} tokens" + (
                f" + a {header}-token citation header" if header else ""
            )
            detail = f"needs {needs}; {left} left of {settings.max_tokens}"
        return DropRecord(
            key=document_key(document, self.id_key),
            stage=Stage.BUDGET,
            reason=reason,
            rank=rank,
            document=document,
            tokens=tokens,
            detail=detail,
            header_tokens=header,
        )

    def invoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Documents -> BudgetedContext; a dict with `documents` -> dict + `context`.

        Args:
            input: A list of Documents, or a dict holding one under `documents`.
            config: The Runnable config; inside `ledger_scope`, its ledgers are
                reconciled too.
            **kwargs: Passed on to the Runnable machinery.

        Returns:
            The `BudgetedContext`, or the input dict with it under `context`.

        Raises:
            InvalidInputError: A dict without `documents`, or not Documents.
            ModelUnavailableError: The tiktoken encoding cannot be loaded.
        """
        return self._call_with_config(self._invoke, input, config, **kwargs)

    async def ainvoke(
        self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        """Async `invoke`; packing itself is CPU-only and quick."""
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    def _invoke(
        self,
        input: Any,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        context = self.fit(
            _documents_of(input), scope_ledgers(config) or (), _question_of(input)
        )
        report = context.report.to_dict()
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        _REPORT_RUN.invoke(report, _report_config(config, run_manager, context))
        return {**input, "context": context} if isinstance(input, dict) else context

    async def _ainvoke(
        self,
        input: Any,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        context = self.fit(
            _documents_of(input), scope_ledgers(config) or (), _question_of(input)
        )
        report = context.report.to_dict()
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        await _REPORT_RUN.ainvoke(report, _report_config(config, run_manager, context))
        return {**input, "context": context} if isinstance(input, dict) else context


_REPORT_RUN = RunnableLambda(lambda report: report, name="ragbudget_budget_report")


def _report_config(
    config: RunnableConfig,
    run_manager: CallbackManagerForChainRun | AsyncCallbackManagerForChainRun,
    context: BudgetedContext,
) -> RunnableConfig:
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


def _documents_of(input: Any) -> Sequence[Document]:
    if isinstance(input, dict):
        if "documents" not in input:
            raise InvalidInputError(
                "ContextBudget takes a list of Documents or a dict with a "
                f"'documents' list; got a dict with keys {sorted(map(str, input))}"
            )
        return check_documents(input["documents"], "input['documents']")
    return check_documents(input)


def _question_of(input: Any) -> str | None:
    """The question, when the budget runs in a `{question, documents}` chain."""
    question = input.get("question") if isinstance(input, dict) else None
    return question if isinstance(question, str) and question.strip() else None


def _rendered_tokens(fmt: ContextFormat, document: Document, encoding: str) -> int:
    return count_tokens(fmt.render_passage(document), encoding)


def _header_tokens(
    fmt: ContextFormat, number: int, document: Document, encoding: str
) -> int:
    return count_tokens(fmt.render_header(number, document), encoding)


class _Shortener:
    """Sentences of the passages that do not fit whole, made on demand.

    Only a passage the packer asks about is split and scored; splits and token
    counts are cached per text, so a warm call is lookups.
    """

    def __init__(
        self,
        fmt: ContextFormat,
        encoding: str,
        documents: Sequence[Document],
        question: str | None,
        relevance: Callable[[str | None, Sequence[str]], list[float]],
    ) -> None:
        self.format = fmt
        self.encoding = encoding
        self.documents = documents
        self.question = question
        self.relevance = relevance
        self.spans: dict[int, tuple[tuple[int, int], ...]] = {}

    def shape(self, index: int) -> Sentences:
        """The packer's view of passage `index`: relevance and exact costs."""
        text = self.documents[index].page_content
        spans = sentence_spans(text)
        self.spans[index] = spans
        texts = [text[start:end] for start, end in spans]

        def cost(chosen: tuple[int, ...]) -> int:
            block = self.format.render_shortened(self.segments(index, chosen))
            return count_tokens(block, self.encoding)

        return Sentences(tuple(self.relevance(self.question, texts)), cost)

    def segments(self, index: int, chosen: tuple[int, ...]) -> list[str | None]:
        """Runs of adjacent kept sentences, and `None` where sentences are left out.

        A run is the passage's own text from its first sentence to its last.
        """
        text = self.documents[index].page_content
        spans = self.spans[index]
        points = omission_points(chosen, len(spans))
        out: list[str | None] = []
        for position, sentence in enumerate(chosen):
            starts_run = position == 0 or position in points
            if position in points:
                out.append(None)
            if starts_run:
                out.append(text[spans[sentence][0] : spans[sentence][1]])
            else:
                run = out.pop()
                assert run is not None
                start = spans[chosen[position - 1]][1]
                out.append(run + text[start : spans[sentence][1]])
        if len(chosen) in points:
            out.append(None)
        return out

    def apply(
        self, index: int, key: str, chosen: tuple[int, ...], item: PackItem
    ) -> tuple[Document, list[str | None], TrimRecord]:
        """The shortened passage: its document, its segments, and its record."""
        segments = self.segments(index, chosen)
        total = len(self.spans[index])
        tokens = count_tokens(self.format.render_shortened(segments), self.encoding)
        original = self.documents[index]
        document = original.model_copy(
            update={
                "id": key,
                "page_content": " ".join(run for run in segments if run is not None),
                "metadata": {**original.metadata, CONTEXT_TOKENS: tokens},
            }
        )
        how = (
            "the most relevant to the question"
            if self.question
            else "from the start (no question reached the budget)"
        )
        record = TrimRecord(
            key=key,
            stage=Stage.BUDGET,
            rank=index + 1,
            document=original,
            kept_sentences=len(chosen),
            total_sentences=total,
            omitted_tokens=max(item.tokens - tokens, 0),
            detail=f"kept {len(chosen)} of {total} sentences, {how}",
        )
        return document, segments, record


def header_costs(items: Sequence[PackItem], kept: Sequence[int]) -> list[int | None]:
    """Citation-header tokens each passage paid (kept) or needed (dropped).

    As `packing.pack` counts them: a header is paid by the first kept passage of
    its source document; later passages of that document pay none. `None` for a
    passage the packer never weighed.
    """
    kept_set: set[int] = set(kept)
    paid: set[str] = set()
    out: list[int | None] = []
    for index, item in enumerate(items):
        out.append(0 if item.group in paid else item.counted_group_tokens)
        if index in kept_set:
            paid.add(item.group)
    return out
