"""The configured pipeline taken apart, so each stage's ranking can be measured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._cache import cached_hybrid_retriever
from langchain_ragbudget.ledger._records import CandidateList
from langchain_ragbudget.progress import ProgressCallback
from langchain_ragbudget.retrieval._hybrid import HybridRetriever
from langchain_ragbudget.retrieval._rerank import FlashRankRerank


@dataclass
class Stages:
    """The hybrid retriever, the reranker and one budget per surface."""

    hybrid: HybridRetriever
    reranker: FlashRankRerank | None
    budgets: dict[str, ContextBudget]

    @classmethod
    def build(
        cls,
        dataset: BeirDataset,
        config: RagBudgetConfig,
        surfaces: Sequence[str],
        reranker: FlashRankRerank | None,
        progress: ProgressCallback | None,
    ) -> Stages:
        budgets: dict[str, ContextBudget] = {}
        for name in surfaces:
            budget = ContextBudget.from_config(config, surface=name)
            budgets[name] = budget
            if budget.settings.packing == "trim":  # the same surface without it
                before = budget.settings.model_copy(update={"packing": "skip"})
                budgets[f"{name} (skip)"] = budget.model_copy(
                    update={"settings": before}
                )
        hybrid = cached_hybrid_retriever(
            dataset.corpus,
            config,
            name=dataset.name,
            progress=progress,
        )
        return cls(hybrid, reranker or FlashRankRerank.from_config(config), budgets)

    @property
    def encoding(self) -> str:
        """The encoding the first surface counts in (policies are compared in it)."""
        return next(iter(self.budgets.values())).settings.encoding_name

    @property
    def reranks(self) -> bool:
        """Whether a rerank stage runs."""
        return self.reranker is not None and self.reranker.available

    def with_and_without(
        self, text: str, relevant: set[str]
    ) -> tuple[CandidateList, CandidateList]:
        """The final candidates of `text`, as retrieved and without `relevant`.

        Both hand fusion lists of one length (each retriever fetches extra hits,
        or the list as retrieved is cut), so no list statistic gives the label
        away.
        """
        hybrid = self.hybrid
        sizes = hybrid.fetch_k or [None] * len(hybrid.retrievers)
        depths = [
            _depth(retriever, size)
            for retriever, size in zip(hybrid.retrievers, sizes, strict=True)
        ]
        wide = [
            (retriever.invoke(text, k=depth + len(relevant)), depth)
            for retriever, depth in zip(hybrid.retrievers, depths, strict=True)
        ]
        without = [
            [d for d in docs if judged_id(d) not in relevant][:size]
            for docs, size in wide
        ]
        as_is = [
            docs[: len(shorter)]
            for (docs, _), shorter in zip(wide, without, strict=True)
        ]
        return self._final(as_is, text), self._final(without, text)

    def _final(self, lists: list[list[Document]], text: str) -> CandidateList:
        """Fused, then reranked when a reranker runs: what the budget receives."""
        candidates = self.hybrid.fuse(lists, self.hybrid.k)
        if self.reranker is not None and self.reranks:
            candidates = self.reranker.compress_documents(candidates, text)
        return candidates


def _depth(retriever: BaseRetriever, size: int | None) -> int:
    depth = size or getattr(retriever, "k", None)
    if not isinstance(depth, int):
        raise ValueError(
            f"cannot tell how many hits {type(retriever).__name__} returns; give "
            "the hybrid retriever fetch_k"
        )
    return depth
