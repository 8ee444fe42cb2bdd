"""Drop records, and the two ways they travel so that no copy of a list loses them.

- With the surviving documents in a `CandidateList`, so a plain LCEL chain carries
  them without wiring.
- In a `RunLedger` that fusion opens per query. Each surviving document carries it in
  `metadata["ragbudget_run"]` as a `LedgerRef` (a `str` run id, JSON-serialisable,
  holding the ledger), so after a foreign step copies or filters the list
  (`docs[:5]`) the budget still finds the ledger and reports every candidate that
  vanished without a record as unaccounted. A step that removes every candidate
  leaves no document to follow: inside `ledger_scope(chain)` fusion also files its
  ledger with the invocation.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from langchain_core.documents import Document
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig
from langchain_core.runnables.config import var_child_runnable_config

from langchain_ragbudget.ledger._evidence_rows import (
    TEXT,
    document_entry,
    drop_counts,
    evidence_table,
    issues_table,
    skipped_table,
)
from langchain_ragbudget.ledger._html import display, element
from langchain_ragbudget.ledger._identity import document_source
from langchain_ragbudget.ledger._metadata_keys import scores_of

LEDGER_KEY = "ragbudget_run"
SCOPE_KEY = "ragbudget_ledgers"  # in RunnableConfig["configurable"]: one list per call


class Stage(StrEnum):
    """The pipeline stage that made a decision.

    Attributes:
        FUSION: `HybridRetriever`.
        RERANK: `FlashRankRerank`.
        BUDGET: `ContextBudget`.
        HISTORY: `ContextBudget` fitting chat history; its records name turns.
        MEMORY: Agent memory recalled beside the documents; records name memories.
        EXTERNAL: A step between stages that this package did not write.
    """

    FUSION = "fusion"
    RERANK = "rerank"
    BUDGET = "budget"
    HISTORY = "history"
    MEMORY = "memory"
    EXTERNAL = "external_step"


class DropReason(StrEnum):
    """Why a candidate did not reach the prompt.

    Attributes:
        FUSION_CUT: Fused below the retriever's `k`.
        DUPLICATE: Same text as a passage the budget already kept.
        RERANKED_OUT: Past the reranker's `top_n`.
        SCORE_FLOOR: Rerank score under `score_floor` (or not a finite number).
        MAX_DOCS: The surface's `max_docs` passages were already kept.
        MAX_TOKENS: The passage (or history turn) does not fit in what is left
            of the budget.
        MAX_PER_SOURCE: The surface's `max_per_source` passages of its source
            document were already kept.
        MAX_PER_RETRIEVER: The surface's `max_per_retriever` passages that its
            best-ranking retriever found were already kept.
        UNACCOUNTED: The candidate entered at fusion and vanished before the
            budget with no stage's record (a step outside the package removed it).
        SUPERSEDED: A memory of the same subject was said more recently.
        STALE_SOURCE: The document a memory was learned from changed or left
            the index (dropped; a kept one carries a stale marker instead).
        MAX_MEMORIES: The surface's `max_memories` memories were already kept.
        EMPTY: The passage has no text (empty or blanks): nothing to cite.
    """

    FUSION_CUT = "below_fusion_cut"
    DUPLICATE = "duplicate"
    RERANKED_OUT = "reranked_out"
    SCORE_FLOOR = "under_score_floor"
    MAX_DOCS = "over_max_docs"
    MAX_TOKENS = "over_max_tokens"
    MAX_PER_SOURCE = "over_max_per_source"
    MAX_PER_RETRIEVER = "over_max_per_retriever"
    UNACCOUNTED = "unaccounted"
    SUPERSEDED = "superseded"
    STALE_SOURCE = "stale_source"
    MAX_MEMORIES = "over_max_memories"
    EMPTY = "empty_text"


@dataclass(frozen=True)
class DropRecord:
    """One candidate removed by one stage, and why.

    Attributes:
        key: The candidate's identity (`Document.id`, else `metadata[id_key]`,
            else a hash of source and text).
        stage: The stage that removed it.
        reason: Why it was removed.
        rank: Its rank in the list the stage decided on (1 = best); for an
            unaccounted candidate, its fused rank (0 if unknown).
        document: The removed document, with the scores it had gathered.
        tokens: What it would have cost in the prompt (budget drops only).
        detail: A readable explanation, e.g. `needs 120 tokens; 40 left of 512`.
        header_tokens: The citation header it would have needed too (budget
            drops only; 0 when its source already had a kept passage).
    """

    key: str
    stage: Stage
    reason: DropReason
    rank: int
    document: Document = field(repr=False, compare=False)
    tokens: int | None = None
    detail: str = ""
    header_tokens: int | None = None

    @property
    def source(self) -> str | None:
        """Where the dropped document came from (metadata `source`, `doc_id`...)."""
        return document_source(self.document)

    @property
    def identity(self) -> tuple[str, Stage, DropReason]:
        """What makes two records the same decision about the same candidate."""
        return (self.key, self.stage, self.reason)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view, for tracers, logs and reports."""
        return {
            "id": self.key,
            "source": self.source,
            "stage": str(self.stage),
            "reason": str(self.reason),
            "rank": self.rank,
            "tokens": self.tokens,
            "header_tokens": self.header_tokens,
            "detail": self.detail,
        }

    def to_entry(self) -> dict[str, Any]:
        """`to_dict` plus the candidate's ranks and scores: a row of the evidence."""
        return {**self.to_dict(), **scores_of(self.document)}


class DeferredDropRecord(DropRecord):
    """A drop record whose document is built by `build(rank)` on its first read.

    Fusion cuts most of its candidates, and building each merged document costs
    more than the fusion itself (BENCHMARKS.md); a retriever used alone never
    reads it.
    """

    _build: Callable[[int], Document]
    _built: Document | None

    def __init__(
        self,
        key: str,
        stage: Stage,
        reason: DropReason,
        rank: int,
        detail: str,
        build: Callable[[int], Document],
    ) -> None:
        # Frozen, and made by the hundred per query: fields go straight into __dict__.
        self.__dict__.update(
            key=key,
            stage=stage,
            reason=reason,
            rank=rank,
            detail=detail,
            _build=build,
            _built=None,
        )

    @property
    def document(self) -> Document:
        if self._built is None:
            object.__setattr__(self, "_built", self._build(self.rank))
        assert self._built is not None
        return self._built

    def __reduce__(self) -> tuple[type[DropRecord], tuple[Any, ...]]:
        # Pickled as a plain record: `build` refers to the retriever.
        return (
            DropRecord,
            (
                self.key,
                self.stage,
                self.reason,
                self.rank,
                self.document,
                self.tokens,
                self.detail,
                self.header_tokens,
            ),
        )


class DeferredRecords(Iterable[DropRecord]):
    """Drop records made once, on the first iteration, for every holder.

    A retriever used on its own rarely has its records read, so the
    `CandidateList` and the `RunLedger` share this instead of a list.
    """

    def __init__(self, make: Callable[[], list[DropRecord]]) -> None:
        self._make: Callable[[], list[DropRecord]] | None = make
        self._records: list[DropRecord] = []
        self._lock = threading.Lock()

    def __iter__(self) -> Iterator[DropRecord]:
        with self._lock:
            if self._make is not None:
                self._records, self._make = self._make(), None
        return iter(self._records)


@dataclass(frozen=True)
class TrimRecord:
    """A kept passage shortened to some of its sentences; `document` is the original."""

    key: str
    stage: Stage
    rank: int
    document: Document = field(repr=False, compare=False)
    kept_sentences: int = 0
    total_sentences: int = 0
    omitted_tokens: int = 0
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return {
            "id": self.key,
            "source": document_source(self.document),
            "stage": str(self.stage),
            "rank": self.rank,
            "kept_sentences": self.kept_sentences,
            "total_sentences": self.total_sentences,
            "omitted_tokens": self.omitted_tokens,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class StageSkip:
    """A stage that did not run (its model was unavailable, say), and why in words."""

    stage: Stage
    reason: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-serialisable view."""
        return {"stage": str(self.stage), "reason": self.reason}


@dataclass(frozen=True)
class ScoreIssue:
    """A score that was not a finite number: ignored, and shown to the user.

    Attributes:
        stage: The stage that found it.
        key: The candidate's identity.
        field: The metadata key the score was read from or written to.
        value: The score's `repr` (e.g. `nan`).
    """

    stage: Stage
    key: str
    field: str
    value: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-serialisable view."""
        return {
            "stage": str(self.stage),
            "id": self.key,
            "field": self.field,
            "value": self.value,
        }


class CandidateList(list[Document]):
    """Documents that survived so far, plus the records of the stages behind.

    A `list` subclass, so anything that accepts a retriever's output accepts it.
    Slicing or copying it gives a plain `list` without the records; the run
    ledger keeps them.

    Attributes:
        drops: Every candidate removed so far, one record per decision.
        skipped: The stages that did not run.
        issues: The scores that were not finite numbers.
    """

    def __init__(
        self,
        documents: Iterable[Document] = (),
        drops: Iterable[DropRecord] = (),
        skipped: Iterable[StageSkip] = (),
        issues: Iterable[ScoreIssue] = (),
    ) -> None:
        super().__init__(documents)
        self._drops: list[DropRecord] | DeferredRecords = (
            drops if isinstance(drops, DeferredRecords) else list(drops)
        )
        self.skipped: list[StageSkip] = list(skipped)
        self.issues: list[ScoreIssue] = list(issues)

    @property
    def drops(self) -> list[DropRecord]:
        """Every candidate removed so far (deferred records are made here)."""
        if isinstance(self._drops, DeferredRecords):
            self._drops = list(self._drops)
        return self._drops

    def __getstate__(self) -> dict[str, Any]:
        # Copies and pickles carry the records themselves, never the deferral.
        return {**self.__dict__, "_drops": self.drops}

    def _summary(self) -> str:
        parts = [
            f"{len(self)} document{'' if len(self) == 1 else 's'}",
            drop_counts((record.stage, record.reason) for record in self.drops),
        ]
        if self.skipped:
            stages = ", ".join(str(skip.stage) for skip in self.skipped)
            parts.append(f"skipped: {stages}")
        if self.issues:
            parts.append(f"{len(self.issues)} score issue(s)")
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"CandidateList({self._summary()})"

    def _repr_html_(self) -> str:
        """Jupyter's view: the candidates and every drop behind them."""
        candidates = [{**document_entry(d), TEXT: d.page_content} for d in self]
        dropped = [
            {**record.to_entry(), TEXT: record.document.page_content}
            for record in self.drops
        ]
        parts = [
            element("p", self._summary()),
            evidence_table(
                (),
                dropped,
                candidates=candidates,
                fold_stage=Stage.FUSION,
                caption="candidates, and the drops behind them",
            ),
        ]
        if self.skipped:
            parts.append(skipped_table([skip.to_dict() for skip in self.skipped]))
        if self.issues:
            parts.append(issues_table([issue.to_dict() for issue in self.issues]))
        return display("CandidateList", parts)


class RunLedger:
    """Every candidate that entered one query's pipeline, and every record made.

    Fusion opens it; later stages add their records. The budget reconciles: a
    candidate that entered and is neither in its input nor in any record was
    removed by a step this package did not write. Thread-safe.

    Attributes:
        run_id: A random hex id, the text of `metadata["ragbudget_run"]`.
        entered: The candidates fusion handed on, by key.
    """

    def __init__(self, entered: dict[str, Document]) -> None:
        self.run_id = uuid.uuid4().hex
        self.entered = entered
        self._lock = threading.Lock()
        self._drops: dict[tuple[str, Stage, DropReason], DropRecord] = {}
        # Merged on read: most queries' records are never read.
        self._unmerged: list[DropRecord] = []
        self._deferred: list[DeferredRecords] = []
        self._skipped: list[StageSkip] = []
        self._issues: list[ScoreIssue] = []

    def add(
        self,
        drops: Iterable[DropRecord] = (),
        skipped: Iterable[StageSkip] = (),
        issues: Iterable[ScoreIssue] = (),
    ) -> None:
        """Record decisions; a drop whose (key, stage, reason) is held is ignored."""
        with self._lock:
            if isinstance(drops, DeferredRecords):
                self._deferred.append(drops)
            else:
                self._unmerged.extend(drops)
            self._skipped.extend(s for s in skipped if s not in self._skipped)
            self._issues.extend(i for i in issues if i not in self._issues)

    @property
    def drops(self) -> list[DropRecord]:
        """The drop records, in the order they were made."""
        with self._lock:
            for block in self._deferred:
                self._unmerged.extend(block)
            self._deferred.clear()
            for record in self._unmerged:
                self._drops.setdefault(record.identity, record)
            self._unmerged.clear()
            return list(self._drops.values())

    @property
    def skipped(self) -> list[StageSkip]:
        with self._lock:
            return list(self._skipped)

    @property
    def issues(self) -> list[ScoreIssue]:
        with self._lock:
            return list(self._issues)

    def reference(self) -> LedgerRef:
        """The value stored in `metadata["ragbudget_run"]` of each candidate."""
        return LedgerRef(self.run_id, self)


class LedgerRef(str):
    """A run id that carries its ledger: plain text to JSON, a link in process."""

    ledger: RunLedger

    def __new__(cls, run_id: str, ledger: RunLedger) -> LedgerRef:
        ref = super().__new__(cls, run_id)
        ref.ledger = ledger
        return ref

    def __deepcopy__(self, memo: dict[int, Any]) -> LedgerRef:
        return self  # one run, one ledger: a deep copy of metadata still points at it

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        return (str, (str(self),))  # pickles as the plain run id


def ledgers_of(documents: Iterable[Document]) -> list[RunLedger]:
    """The distinct run ledgers the documents lead to, in first-seen order."""
    found: dict[int, RunLedger] = {}
    for document in documents:
        ref = document.metadata.get(LEDGER_KEY)
        if isinstance(ref, LedgerRef):
            found.setdefault(id(ref.ledger), ref.ledger)
    return list(found.values())


def drops_of(documents: Iterable[Document]) -> list[DropRecord]:
    """The drop records carried by `documents`, or none for a plain list."""
    return list(documents.drops) if isinstance(documents, CandidateList) else []


def skipped_of(documents: Iterable[Document]) -> list[StageSkip]:
    return list(documents.skipped) if isinstance(documents, CandidateList) else []


def issues_of(documents: Iterable[Document]) -> list[ScoreIssue]:
    return list(documents.issues) if isinstance(documents, CandidateList) else []


Records = tuple[list[DropRecord], list[StageSkip], list[ScoreIssue]]


def records_of(
    documents: Iterable[Document], scoped: Iterable[RunLedger] = ()
) -> Records:
    """Everything recorded on the list, in its run ledgers and in `scoped`, once each.

    The ledgers fill in what a copied list lost.
    """
    docs = documents if isinstance(documents, CandidateList) else list(documents)
    drops: dict[tuple[str, Stage, DropReason], DropRecord] = {}
    skipped: list[StageSkip] = []
    issues: list[ScoreIssue] = []
    ledgers = {id(ledger): ledger for ledger in [*ledgers_of(docs), *scoped]}
    sources = [(drops_of(docs), skipped_of(docs), issues_of(docs))] + [
        (ledger.drops, ledger.skipped, ledger.issues) for ledger in ledgers.values()
    ]
    for source_drops, source_skipped, source_issues in sources:
        for record in source_drops:
            drops.setdefault(record.identity, record)
        skipped.extend(s for s in source_skipped if s not in skipped)
        issues.extend(i for i in source_issues if i not in issues)
    return list(drops.values()), skipped, issues


def ledger_scope(runnable: Runnable[Any, Any]) -> Runnable[Any, Any]:
    """`runnable` with a fresh ledger list per call, shared by every stage inside.

    Fusion files each ledger it opens there and the budget reconciles them all, so
    a step that removes every candidate is reported too. Calls and batch items
    never share a scope. `create_budgeted_rag_chain` applies it; use it when you
    compose the stages (at least fusion and budget) yourself.
    """
    return RunnableBinding(
        bound=runnable,
        config_factories=[lambda _: RunnableConfig(configurable={SCOPE_KEY: []})],
    )


def file_in_scope(ledger: RunLedger) -> None:
    """File `ledger` with the enclosing `ledger_scope`, if the call runs in one."""
    scoped = scope_ledgers(var_child_runnable_config.get())
    if scoped is not None:
        scoped.append(ledger)


def scope_ledgers(config: RunnableConfig | None) -> list[RunLedger] | None:
    """The ledgers filed with the scope `config` belongs to, or None outside one."""
    scoped = ((config or {}).get("configurable") or {}).get(SCOPE_KEY)
    return scoped if isinstance(scoped, list) else None
