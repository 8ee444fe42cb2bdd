"""Retrieval: BM25 and dense search, fused by rank or score, then reranked.

Each name loads its module on first use (PEP 562), so importing the package loads
no bm25s, Chroma or ONNX runtime.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_ragbudget.retrieval._dense import DenseRetriever, build_vector_store
    from langchain_ragbudget.retrieval._embeddings import (
        FastEmbedEmbeddings,
        build_embeddings,
    )
    from langchain_ragbudget.retrieval._fusion import weighted_rrf
    from langchain_ragbudget.retrieval._hybrid import HybridRetriever, ScoredSearch
    from langchain_ragbudget.retrieval._rerank import FlashRankRerank
    from langchain_ragbudget.retrieval._sparse import BM25Retriever

_EXPORTS = {
    "BM25Retriever": "_sparse",
    "DenseRetriever": "_dense",
    "FastEmbedEmbeddings": "_embeddings",
    "FlashRankRerank": "_rerank",
    "HybridRetriever": "_hybrid",
    "ScoredSearch": "_hybrid",
    "build_embeddings": "_embeddings",
    "build_vector_store": "_dense",
    "weighted_rrf": "_fusion",
}
__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "FastEmbedEmbeddings",
    "FlashRankRerank",
    "HybridRetriever",
    "ScoredSearch",
    "build_embeddings",
    "build_vector_store",
    "weighted_rrf",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
