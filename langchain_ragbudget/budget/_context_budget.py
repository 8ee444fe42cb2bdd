"""The context budget: passages into a per-surface token and count budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    CallbackManagerForChainRun,
    adispatch_custom_event,
    dispatch_custom_event,
)
from langchain_core.documents import Document
from langchain_core.messages import BaseMessage
from langchain_core.prompts import BasePromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, Field, model_validator

from langchain_ragbudget.budget._history import (
    HISTORY,
    fit_with_history,
    history_of,
    prompt_measure,
    prompt_values,
)
from langchain_ragbudget.budget._io import budget_output, documents_of, question_of
from langchain_ragbudget.budget._packing import (
    CAP_REASONS,
    PackItem,
    PackResult,
    cap_detail,
    header_costs,
    pack,
)
from langchain_ragbudget.budget._prompt import EMPTY_MEMORIES, MEMORY_TEXT
from langchain_ragbudget.budget._render import ContextFormat, group_citations
from langchain_ragbudget.budget._report import (
    REPORT_RUN,
    BudgetedContext,
    BudgetReport,
    report_config,
)
from langchain_ragbudget.budget._shortening import Shortener
from langchain_ragbudget.budget._surface_switch import (
    requested_surface,
    surface_settings,
)
from langchain_ragbudget.config._overrides import (
    field_names,
    known_keywords,
    refuse_unknown,
)
from langchain_ragbudget.config._settings import (
    DEFAULT_SURFACE,
    ConfigLike,
    RetrievalSettings,
    SurfaceSettings,
    as_config,
    default_of,
)
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.config._weak_model import CalibratedWith
from langchain_ragbudget.evidence._assess import assess_evidence, models_in_use
from langchain_ragbudget.evidence._sentence_scoring import (
    blended_relevance,
    fitted_relevance,
)
from langchain_ragbudget.ledger._identity import (
    document_key,
    unique_documents,
    with_metadata,
)
from langchain_ragbudget.ledger._metadata_keys import (
    CONTEXT_TOKENS,
    FUSED_RANK,
    HEADER_TOKENS,
    NEIGHBOUR_OF,
    best_retriever,
)
from langchain_ragbudget.ledger._records import (
    DropReason,
    DropRecord,
    Records,
    RunLedger,
    Stage,
    TrimRecord,
    ledgers_of,
    records_of,
    scope_ledgers,
)
from langchain_ragbudget.ledger._validation import check_documents
from langchain_ragbudget.retrieval._neighbours import neighbour_costs

REPORT_EVENT = "ragbudget_context_report"


class ContextBudget(RunnableSerializable[Any, Any]):
    """Pack passages, in rank order, into one surface's budget.

    Whole passages while they fit; with `packing: trim`, one that does not fit
    is shortened to its most relevant whole sentences; every shortening and drop
    is recorded. Tokens are counted in the surface's encoding on each passage as
    `format` renders it, citation header included.

    Documents in, a `BudgetedContext` out; or a dict with `documents` in and the
    same dict with `context` added. Every run also sends its report to callbacks,
    as the custom event `ragbudget_context_report` and as the metadata of a child
    run `ragbudget_budget_report`, so a tracer shows the dropped ids.

    Attributes:
        surface: The surface's name, for reports and warnings.
        settings: The surface's budget (`max_docs`, `max_tokens`, encoding...).
        format: How passages and citation headers are rendered.
        id_key: The metadata key that identifies a passage without `Document.id`.
        prompt: The chain's prompt, rendered to count the whole prompt under
            `max_prompt_tokens` (None: plain messages).
        surfaces: The config's surfaces, for `with_config(configurable={"surface":
            name})`; None: the budget refuses to switch.
        overrides: `from_config`'s keyword settings, by the surface they were
            given for; a call switched to another surface runs its own.
        models: The models the scores come from, to call a calibration stale.

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
    prompt: BasePromptTemplate | None = None
    surfaces: dict[str, SurfaceSettings] | None = None
    overrides: dict[str, dict[str, Any]] = Field(default_factory=dict)
    models: CalibratedWith | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @classmethod
    def from_config(
        cls,
        config: ConfigLike = None,
        *,
        surface: str = DEFAULT_SURFACE,
        **overrides: Any,
    ) -> ContextBudget:
        """The budget of `surface`, able to switch to any other configured surface.

        Args:
            config: A configuration, a YAML file, or None for the defaults.
            surface: A key of the config's `surfaces`.
            **overrides: Surface settings (`max_tokens`, `packing`...) to use
                instead on `surface` (a call switched to another surface runs
                that surface's own), and the budget's own fields (`format`,
                `id_key`).

        Raises:
            ConfigError: The file is invalid, or it has no such surface.
            TypeError: A keyword is neither a surface setting nor a field.
            ValidationError: An override's value is not valid for its setting.
        """
        config = as_config(config)
        own = field_names(cls) - {"surface", "settings", "surfaces", "overrides"}
        refuse_unknown(
            "ContextBudget.from_config()",
            overrides,
            own | field_names(SurfaceSettings),
        )
        settings = config.surface(surface)
        changed = {k: v for k, v in overrides.items() if k not in own}
        if changed:  # validated as the file's values are, not copied unchecked
            settings = SurfaceSettings.model_validate(
                {**settings.model_dump(), **changed}
            )
        fields = {k: v for k, v in overrides.items() if k in own}
        in_use = models_in_use(config)
        return cls(
            surface=surface,
            settings=settings,
            surfaces=dict(config.surfaces),
            overrides={surface: changed} if changed else {},
            **{"id_key": config.retrieval.id_key, "models": in_use, **fields},
        )

    @model_validator(mode="before")
    @classmethod
    def _known_keywords(cls, data: Any) -> Any:
        return known_keywords(cls, data)

    def settings_of(self, surface: str) -> SurfaceSettings:
        """The settings this budget runs with on `surface`."""
        own = (self.surface, self.settings)
        return surface_settings(self.surfaces, self.overrides, own, surface)

    def for_call(self, config: RunnableConfig | None) -> ContextBudget:
        """The budget for one call: on the surface its config names, if any."""
        surface = requested_surface(config)
        if surface is None or surface == self.surface:
            return self
        return self.model_copy(
            update={"surface": surface, "settings": self.settings_of(surface)}
        )

    @model_validator(mode="after")
    def _settings_follow_surface(self) -> ContextBudget:
        """`settings` is `surface`'s own (`configurable_fields` sets only `surface`)."""
        if self.surfaces is not None:
            self.__dict__["settings"] = self.settings_of(self.surface)
        return self

    def fit(
        self,
        documents: Sequence[Document],
        scoped: Sequence[RunLedger] = (),
        question: str | None = None,
        history: Sequence[BaseMessage] | None = None,
        variables: dict[str, Any] | None = None,
        history_key: str = HISTORY,
    ) -> BudgetedContext:
        """Pack `documents` (best first); pure apart from the token cache.

        With `max_prompt_tokens`, history and context share what the rest of the
        prompt leaves.

        Args:
            documents: The candidates, best first (a `CandidateList` carries the
                records of earlier stages; a plain list works too).
            scoped: Ledgers of the enclosing `ledger_scope`, reconciled too.
            question: What `trim` chooses sentences for; without it the leading
                sentences are kept.
            history: The chat history (oldest first), without the question.
            variables: The prompt's other variables, of any type, for rendering it.
            history_key: The prompt variable the history is sent under.

        Raises:
            InvalidInputError: `documents` is not a list of Documents, or a text
                cannot be encoded.
            ModelUnavailableError: The tiktoken encoding cannot be loaded.
        """
        settings = self.settings
        if settings.max_prompt_tokens is None:
            context = self._fit(documents, scoped, question)
            return replace(context, history=list(history or []))
        within = partial(_fit_within, self, documents, scoped, question)
        empty = _fit_within(self, [], (), question, 0)  # for the fixed parts
        measure = prompt_measure(
            self.prompt,
            question or "",
            variables or {},
            settings.encoding_name,
            history_key,
        )
        fits = (within, empty, history or [], measure, settings)
        return fit_with_history(*fits)

    def _fit(
        self,
        documents: Sequence[Document],
        scoped: Sequence[RunLedger],
        question: str | None,
    ) -> BudgetedContext:
        """`fit` on the context alone, in the surface's `max_tokens`."""
        given = check_documents(documents)
        records = records_of(given, scoped)
        # one distinct key per candidate, as its Document.id, from here on
        documents = unique_documents(
            given, self.id_key, (record.key for record in records[0])
        )
        blank = self._blank(documents)
        ranks = [i + 1 for i, doc in enumerate(documents) if doc.id not in blank]
        documents = [doc for doc in documents if doc.id not in blank]
        records = ([*records[0], *blank.values()], records[1], records[2])
        shorten = self._shortener(documents, question)
        packed = self._pack(documents, shorten, ranks)
        kept, shortened, trimmed = self._keep(packed, shorten)
        citations = group_citations(
            kept, self.format, self.id_key, edges=self.settings.order == "edges"
        )
        blocks, texts = self.format.blocks(citations, shortened)
        report = self._report(packed, (records, scoped), blocks, kept, trimmed)
        return BudgetedContext(
            documents=[doc for citation in citations for doc in citation.documents],
            citations=citations,
            text="".join(blocks),
            report=replace(report, passage_text=tuple(texts)),
            evidence=assess_evidence(
                kept,
                self.settings.weak_evidence,
                candidates=documents,
                question=question,
                in_use=self.models,
            ),
        )

    def _shortener(
        self, documents: Sequence[Document], question: str | None
    ) -> Shortener:
        """What `trim` shortens with: the surface's sentence relevance."""
        settings = self.settings
        fitted = settings.relevance == "fitted"
        return Shortener(
            self.format,
            settings.encoding_name,
            documents,
            question,
            fitted_relevance if fitted else blended_relevance,
        )

    def _blank(self, documents: Sequence[Document]) -> dict[str | None, DropRecord]:
        """Records of the passages without text: a citation of nothing misleads."""
        return {
            doc.id: DropRecord(
                key=document_key(doc, self.id_key),
                stage=Stage.BUDGET,
                reason=DropReason.EMPTY,
                rank=rank,
                document=doc,
                tokens=0,
                detail="the passage has no text (empty or blanks only)",
            )
            for rank, doc in enumerate(documents, start=1)
            if not doc.page_content.strip()
        }

    def _pack(
        self, documents: Sequence[Document], shorten: Shortener, ranks: list[int]
    ) -> _Packed:
        """The packer's decisions on the candidates, in the surface's budget."""
        settings = self.settings
        items = self._measure(documents)
        result = pack(
            items,
            max_tokens=settings.max_tokens,
            max_docs=settings.max_docs,
            policy=settings.packing,
            min_docs=settings.min_docs,
            sentences_of=shorten.shape,
            max_sentences=settings.max_sentences,
            max_per_source=settings.max_per_source,
            max_per_retriever=settings.max_per_retriever,
            joined_cost=neighbour_costs(self.format, documents, settings.encoding_name),
        )
        return _Packed(documents, items, result, header_costs(items, result), ranks)

    def _keep(
        self, packed: _Packed, shorten: Shortener
    ) -> tuple[list[Document], dict[str, list[str | None]], list[TrimRecord]]:
        """The kept passages with their token costs, shortened segments and records."""
        documents, items, headers = packed.documents, packed.items, packed.headers
        trims, joined = dict(packed.result.trimmed), dict(packed.result.joined)
        kept: list[Document] = []
        shortened: dict[str, list[str | None]] = {}
        trimmed: list[TrimRecord] = []
        for i in packed.result.kept:
            if i not in trims:
                metadata = {
                    **documents[i].metadata,
                    CONTEXT_TOKENS: joined.get(i, items[i].tokens),
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
        return kept, shortened, trimmed

    def _report(
        self,
        packed: _Packed,
        earlier: tuple[Records, Sequence[RunLedger]],
        blocks: Sequence[str],
        kept: Sequence[Document],
        trimmed: list[TrimRecord],
    ) -> BudgetReport:
        """The report: the context's tokens, and every drop, skip and shortening.

        `earlier`'s records were read from the input as given, before its
        candidates got their entry keys.
        """
        settings, encoding = self.settings, self.settings.encoding_name
        tokens_used = sum(count_tokens(block, encoding) for block in blocks)
        (upstream, skipped, issues), scoped = earlier
        budget_drops = [
            self._drop_record(packed, i, reason) for i, reason in packed.result.dropped
        ]
        return BudgetReport(
            surface=self.surface,
            encoding=encoding,
            tokens_used=tokens_used,
            # exact by construction; the check keeps it honest anyway
            over_budget=packed.result.over_budget or tokens_used > settings.max_tokens,
            max_tokens=settings.max_tokens,
            max_docs=settings.max_docs,
            min_docs=settings.min_docs,
            packing=settings.packing,
            order=settings.order,
            kept_ids=[document_key(doc, self.id_key) for doc in kept],
            drops=[
                *upstream,
                *budget_drops,
                *self._unaccounted(packed.documents, upstream, scoped),
            ],
            skipped=skipped,
            issues=issues,
            trimmed=trimmed,
        )

    def _measure(self, documents: Sequence[Document]) -> list[PackItem]:
        """Each passage as the packer sees it; tokens are counted when it is weighed."""
        fmt, encoding = self.format, self.settings.encoding_name
        by_retriever = self.settings.max_per_retriever is not None  # else not counted
        first_seen: dict[tuple[str, str | None], int] = {}
        items = []
        for document in documents:
            group = fmt.cited_together(document, self.id_key)
            number = first_seen.setdefault(group, len(first_seen) + 1)
            items.append(
                PackItem(
                    tokens=partial(_rendered_tokens, fmt, document, encoding),
                    group=f"{number}",
                    group_tokens=partial(
                        _header_tokens, fmt, number, document, encoding
                    ),
                    content_key=document.page_content,
                    retriever=best_retriever(document) if by_retriever else None,
                    neighbour=NEIGHBOUR_OF in document.metadata,
                )
            )
        return items

    def _unaccounted(
        self,
        documents: Sequence[Document],
        upstream: Sequence[DropRecord],
        scoped: Sequence[RunLedger],
    ) -> list[DropRecord]:
        """Records for candidates that vanished unrecorded: a user's slice, a filter."""
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
        self, packed: _Packed, index: int, reason: DropReason
    ) -> DropRecord:
        """The record of the budget's drop of candidate `index`.

        A cost is None for a passage the packer never weighed. The citation
        header is paid once per source document, so a passage whose document
        has none kept yet needs it too and can miss room it seems to fit.
        """
        settings = self.settings
        document, rank = packed.documents[index], packed.ranks[index]
        item, header = packed.items[index], packed.headers[index]
        weighed = reason == DropReason.MAX_TOKENS
        tokens = item.tokens if weighed else item.counted_tokens  # joined: not yet
        if reason == DropReason.MAX_DOCS:
            detail = f"max_docs={settings.max_docs} already kept"
        elif reason in CAP_REASONS:
            detail = cap_detail(reason, settings, item)
        elif reason == DropReason.DUPLICATE:
            detail = "same text as a kept passage"
        else:
            left = settings.max_tokens - packed.result.tokens_used
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

    def memory_room(
        self, input: dict[str, Any], config: RunnableConfig | None = None
    ) -> int | None:
        """Tokens a memory section may take before the least prompt is over.

        The least prompt is the call's prompt with no history, no context and no
        memories; None when the surface does not budget the whole prompt.
        """
        budget = self.for_call(config)
        settings = budget.settings
        if settings.max_prompt_tokens is None:
            return None
        key, _ = history_of(input, self.prompt) or (HISTORY, None)
        least = budget.fit(
            [],
            (),
            question_of(input),
            [],
            {**prompt_values(input), MEMORY_TEXT: ""},
            key,
        ).report.prompt
        fixed = least.fixed_tokens if least is not None else 0
        free = settings.max_prompt_tokens - settings.reserve_output_tokens - fixed
        return max(0, free + count_tokens(EMPTY_MEMORIES, settings.encoding_name))

    def _fit_input(
        self, input: Any, config: RunnableConfig
    ) -> tuple[BudgetedContext, dict[str, Any], Any]:
        """`fit` on a Runnable's input (and its scope's ledgers); report, output."""
        key, history = history_of(input, self.prompt) or (HISTORY, None)
        context = self.for_call(config).fit(
            documents_of(input),
            scope_ledgers(config) or (),
            question_of(input),
            history,
            prompt_values(input),
            key,
        )
        output = budget_output(input, context, key if history is not None else None)
        return context, context.report.to_dict(), output

    def _invoke(
        self,
        input: Any,
        run_manager: CallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        context, report, output = self._fit_input(input, config)
        dispatch_custom_event(REPORT_EVENT, report, config=config)
        REPORT_RUN.invoke(report, report_config(config, run_manager, context))
        return output

    async def _ainvoke(
        self,
        input: Any,
        run_manager: AsyncCallbackManagerForChainRun,
        config: RunnableConfig,
    ) -> Any:
        context, report, output = self._fit_input(input, config)
        await adispatch_custom_event(REPORT_EVENT, report, config=config)
        await REPORT_RUN.ainvoke(report, report_config(config, run_manager, context))
        return output


def _fit_within(
    budget: ContextBudget,
    documents: Sequence[Document],
    scoped: Sequence[RunLedger],
    question: str | None,
    tokens: int,
) -> BudgetedContext:
    """`budget`'s context alone, fitted to `tokens` instead of `max_tokens`."""
    settings = budget.settings.model_copy(update={"max_tokens": tokens})
    return budget.model_copy(update={"settings": settings})._fit(
        documents, scoped, question
    )


def _rendered_tokens(fmt: ContextFormat, document: Document, encoding: str) -> int:
    return count_tokens(fmt.render_passage(document), encoding)


def _header_tokens(fmt: ContextFormat, n: int, doc: Document, encoding: str) -> int:
    return count_tokens(fmt.render_header(n, doc), encoding)


@dataclass(frozen=True)
class _Packed:
    """One fit's candidates as the packer weighed them, and what it decided."""

    documents: Sequence[Document]
    items: list[PackItem]
    result: PackResult
    headers: list[int | None]
    ranks: list[int]  # each candidate's place in the budget's input
