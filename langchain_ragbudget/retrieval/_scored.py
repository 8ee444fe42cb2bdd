"""The base of the sparse and dense retrievers: scored hits, returned as copies.

`scored_hits` gives the documents held (shared, not copied) and their scores, which
`HybridRetriever` fuses directly; invoked as a retriever, it returns copies with
the score in `metadata[score_key]`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragbudget.ledger._identity import with_scores


class ScoredRetriever(BaseRetriever):
    """A retriever whose results carry their score in `metadata[score_key]`.

    A subclass defines `scored_hits` and the `score_key` field (declared there, so
    it keeps its place among the subclass's own fields).
    """

    if TYPE_CHECKING:
        score_key: str

    @abstractmethod
    def scored_hits(
        self, query: str, k: int | None = None
    ) -> list[tuple[Document, float]]:
        """The top `k` documents (shared, not copies) and their scores; no callbacks."""

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        return with_scores(self.scored_hits(query, k), self.score_key)
