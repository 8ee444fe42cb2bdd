"""The drop ledger: one record type for every candidate any stage removed.

The one rule of this package: every stage that decides what the model sees announces
what it dropped. Records travel with the surviving documents in a `CandidateList`, so a
plain LCEL chain (retriever | rerank | budget | chain) carries them without wiring.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.identity import document_source


class Stage(StrEnum):
    """The pipeline stage that made a decision."""

    FUSION = "fusion"
    RERANK = "rerank"
    BUDGET = "budget"


class DropReason(StrEnum):
    """Why a candidate did not reach the prompt."""

    FUSION_CUT = "below_fusion_cut"
    DUPLICATE = "duplicate"
    RERANKED_OUT = "reranked_out"
    SCORE_FLOOR = "under_score_floor"
    MAX_DOCS = "over_max_docs"
    MAX_TOKENS = "over_max_tokens"


@dataclass(frozen=True)
class DropRecord:
    """One candidate removed by one stage, and why."""

    key: str
    stage: Stage
    reason: DropReason
    rank: int
    document: Document = field(repr=False, compare=False)
    tokens: int | None = None
    detail: str = ""

    @property
    def source(self) -> str | None:
        """Where the dropped document came from (metadata `source`, `doc_id`...)."""
        return document_source(self.document)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view, for tracers, logs and reports."""
        return {
            "id": self.key,
            "source": self.source,
            "stage": str(self.stage),
            "reason": str(self.reason),
            "rank": self.rank,
            "tokens": self.tokens,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class StageSkip:
    """A stage that did not run (its model was unavailable, say), and why."""

    stage: Stage
    reason: str

    def to_dict(self) -> dict[str, str]:
        """A JSON-serialisable view."""
        return {"stage": str(self.stage), "reason": self.reason}


class CandidateList(list[Document]):
    """Documents that survived so far, plus the records of the stages behind.

    A `list` subclass, so anything that accepts the output of a retriever accepts
    it. `drops` names every candidate removed so far; `skipped` the stages that did
    not run.
    """

    def __init__(
        self,
        documents: Iterable[Document] = (),
        drops: Iterable[DropRecord] = (),
        skipped: Iterable[StageSkip] = (),
    ) -> None:
        super().__init__(documents)
        self.drops: list[DropRecord] = list(drops)
        self.skipped: list[StageSkip] = list(skipped)


def drops_of(documents: Iterable[Document]) -> list[DropRecord]:
    """The drop records carried by `documents`, or none for a plain list."""
    return list(documents.drops) if isinstance(documents, CandidateList) else []


def skipped_of(documents: Iterable[Document]) -> list[StageSkip]:
    """The skipped stages recorded on `documents`, or none for a plain list."""
    return list(documents.skipped) if isinstance(documents, CandidateList) else []
