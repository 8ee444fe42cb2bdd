"""LangChain retrieval within a context budget that never drops a passage in silence."""

from langchain_ragbudget.budget import BudgetedContext, BudgetReport, ContextBudget
from langchain_ragbudget.chain import BudgetedAnswer, create_budgeted_stuff_chain
from langchain_ragbudget.config import (
    RagBudgetConfig,
    SurfaceSettings,
    load_config,
    load_surface,
)
from langchain_ragbudget.dense import DenseRetriever
from langchain_ragbudget.embeddings import FastEmbedEmbeddings
from langchain_ragbudget.errors import (
    ConfigError,
    IndexLoadError,
    IndexRepairError,
    InvalidInputError,
    ModelUnavailableError,
    RagBudgetError,
)
from langchain_ragbudget.evidence import Calibration, Evidence, calibrate_threshold
from langchain_ragbudget.factory import (
    build_embeddings,
    build_hybrid_retriever,
    build_vector_store,
)
from langchain_ragbudget.fusion import weighted_rrf
from langchain_ragbudget.hybrid import HybridRetriever, ScoredSearch
from langchain_ragbudget.index import HybridIndex
from langchain_ragbudget.ledger import (
    CandidateList,
    DropReason,
    DropRecord,
    RunLedger,
    ScoreIssue,
    Stage,
    StageSkip,
    ledger_scope,
)
from langchain_ragbudget.pipeline import create_budgeted_rag_chain
from langchain_ragbudget.render import Citation, ContextFormat
from langchain_ragbudget.rerank import FlashRankRerank
from langchain_ragbudget.sparse import BM25Retriever

__all__ = [
    "BM25Retriever",
    "BudgetReport",
    "BudgetedAnswer",
    "BudgetedContext",
    "Calibration",
    "CandidateList",
    "Citation",
    "ConfigError",
    "ContextBudget",
    "ContextFormat",
    "DenseRetriever",
    "DropReason",
    "DropRecord",
    "Evidence",
    "FastEmbedEmbeddings",
    "FlashRankRerank",
    "HybridIndex",
    "HybridRetriever",
    "IndexLoadError",
    "IndexRepairError",
    "InvalidInputError",
    "ModelUnavailableError",
    "RagBudgetConfig",
    "RagBudgetError",
    "RunLedger",
    "ScoreIssue",
    "ScoredSearch",
    "Stage",
    "StageSkip",
    "SurfaceSettings",
    "build_embeddings",
    "build_hybrid_retriever",
    "build_vector_store",
    "calibrate_threshold",
    "create_budgeted_rag_chain",
    "create_budgeted_stuff_chain",
    "ledger_scope",
    "load_config",
    "load_surface",
    "weighted_rrf",
]
