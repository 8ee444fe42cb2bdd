"""LangChain retrieval within a context budget that never drops a passage in silence.

The names a chain needs, each imported from its module when first used (PEP 562),
so `import langchain_ragbudget` loads no stage, no model library and none of the
wings: the index (`langchain_ragbudget.index`), the evaluation harness
(`langchain_ragbudget.evaluation`) and the command line (`langchain_ragbudget.cli`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_ragbudget.agents import (
        AgentBudgetMiddleware,
        AgentBudgetState,
        RequestReport,
        create_retrieval_tool,
    )
    from langchain_ragbudget.budget import (
        DEFAULT_PROMPT,
        MEMORY_PROMPT,
        BudgetedContext,
        BudgetReport,
        Citation,
        ContextBudget,
        ContextFormat,
        message_tokens,
        prompt_tokens,
    )
    from langchain_ragbudget.chain import (
        BudgetedAnswer,
        build_chat_model,
        create_budgeted_rag_chain,
        create_budgeted_stuff_chain,
    )
    from langchain_ragbudget.config import (
        RagBudgetConfig,
        SurfaceSettings,
        count_tokens,
        load_config,
    )
    from langchain_ragbudget.errors import (
        ConfigError,
        IndexLoadError,
        IndexLockedError,
        IndexRepairError,
        IndexWriteError,
        InvalidInputError,
        ModelUnavailableError,
        RagBudgetError,
    )
    from langchain_ragbudget.evidence import Calibration, Evidence, calibrate_threshold
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
    from langchain_ragbudget.memory import (
        Memory,
        MemoryRetriever,
        MemoryStore,
        MemoryStoreError,
    )
    from langchain_ragbudget.retrieval import (
        BM25Retriever,
        DenseRetriever,
        FastEmbedEmbeddings,
        FlashRankRerank,
        HybridRetriever,
        ScoredSearch,
        build_embeddings,
        build_vector_store,
        weighted_rrf,
    )

    __version__: str

# Each public name and the module (under langchain_ragbudget) that defines it.
_EXPORTS = {
    "AgentBudgetMiddleware": "agents",
    "AgentBudgetState": "agents",
    "BM25Retriever": "retrieval",
    "BudgetReport": "budget",
    "BudgetedAnswer": "chain",
    "BudgetedContext": "budget",
    "Calibration": "evidence",
    "CandidateList": "ledger",
    "Citation": "budget",
    "ConfigError": "errors",
    "ContextBudget": "budget",
    "ContextFormat": "budget",
    "DEFAULT_PROMPT": "budget",
    "DenseRetriever": "retrieval",
    "DropReason": "ledger",
    "DropRecord": "ledger",
    "Evidence": "evidence",
    "FastEmbedEmbeddings": "retrieval",
    "FlashRankRerank": "retrieval",
    "HybridRetriever": "retrieval",
    "IndexLoadError": "errors",
    "IndexLockedError": "errors",
    "IndexRepairError": "errors",
    "IndexWriteError": "errors",
    "InvalidInputError": "errors",
    "MEMORY_PROMPT": "budget",
    "Memory": "memory",
    "MemoryRetriever": "memory",
    "MemoryStore": "memory",
    "MemoryStoreError": "memory",
    "ModelUnavailableError": "errors",
    "RagBudgetConfig": "config",
    "RagBudgetError": "errors",
    "RequestReport": "agents",
    "RunLedger": "ledger",
    "ScoreIssue": "ledger",
    "ScoredSearch": "retrieval",
    "Stage": "ledger",
    "StageSkip": "ledger",
    "SurfaceSettings": "config",
    "build_chat_model": "chain",
    "build_embeddings": "retrieval",
    "build_vector_store": "retrieval",
    "calibrate_threshold": "evidence",
    "count_tokens": "config",
    "create_budgeted_rag_chain": "chain",
    "create_budgeted_stuff_chain": "chain",
    "create_retrieval_tool": "agents",
    "ledger_scope": "ledger",
    "load_config": "config",
    "message_tokens": "budget",
    "prompt_tokens": "budget",
    "weighted_rrf": "retrieval",
}

__all__ = [
    "DEFAULT_PROMPT",
    "MEMORY_PROMPT",
    "AgentBudgetMiddleware",
    "AgentBudgetState",
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
    "HybridRetriever",
    "IndexLoadError",
    "IndexLockedError",
    "IndexRepairError",
    "IndexWriteError",
    "InvalidInputError",
    "Memory",
    "MemoryRetriever",
    "MemoryStore",
    "MemoryStoreError",
    "ModelUnavailableError",
    "RagBudgetConfig",
    "RagBudgetError",
    "RequestReport",
    "RunLedger",
    "ScoreIssue",
    "ScoredSearch",
    "Stage",
    "StageSkip",
    "SurfaceSettings",
    "build_chat_model",
    "build_embeddings",
    "build_vector_store",
    "calibrate_threshold",
    "count_tokens",
    "create_budgeted_rag_chain",
    "create_budgeted_stuff_chain",
    "create_retrieval_tool",
    "ledger_scope",
    "load_config",
    "message_tokens",
    "prompt_tokens",
    "weighted_rrf",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use, and keep the name here."""
    if name == "__version__":  # read from the installed metadata when asked
        globals()[name] = _version()
        return globals()[name]
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def _version() -> str:
    """The installed distribution's version, or "0+unknown" for a bare source tree."""
    from importlib import metadata

    try:
        return metadata.version("langchain-ragbudget")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__, "__version__"})
