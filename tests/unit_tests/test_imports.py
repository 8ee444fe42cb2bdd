import langchain_ragbudget

EXPECTED_ALL = [
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


def test_all_imports() -> None:
    assert sorted(langchain_ragbudget.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:  # each name is bound to this package's own object
        obj = getattr(langchain_ragbudget, name)
        assert obj.__name__ == name, name
        assert obj.__module__.startswith("langchain_ragbudget."), name
