"""LangChain retrieval within a context budget that never drops a passage in silence."""

from langchain_ragbudget.config import (
    RagBudgetConfig,
    SurfaceSettings,
    load_config,
    load_surface,
)
from langchain_ragbudget.dense import (
    DenseRetriever,
    build_embeddings,
    build_vector_store,
)
from langchain_ragbudget.drops import CandidateList, DropReason, DropRecord, Stage
from langchain_ragbudget.embedded import build_hybrid_retriever
from langchain_ragbudget.embeddings import FastEmbedEmbeddings
from langchain_ragbudget.errors import (
    ConfigError,
    IndexLoadError,
    ModelUnavailableError,
    RagBudgetError,
)
from langchain_ragbudget.fusion import weighted_rrf
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.sparse import BM25Retriever

__all__ = [
    "BM25Retriever",
    "CandidateList",
    "ConfigError",
    "DenseRetriever",
    "DropReason",
    "DropRecord",
    "FastEmbedEmbeddings",
    "HybridRetriever",
    "IndexLoadError",
    "ModelUnavailableError",
    "RagBudgetConfig",
    "RagBudgetError",
    "Stage",
    "SurfaceSettings",
    "build_embeddings",
    "build_hybrid_retriever",
    "build_vector_store",
    "load_config",
    "load_surface",
    "weighted_rrf",
]
