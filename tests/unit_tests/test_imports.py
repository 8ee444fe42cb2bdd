import langchain_ragbudget

EXPECTED_ALL = [
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


def test_all_imports() -> None:
    assert sorted(langchain_ragbudget.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(langchain_ragbudget, name) is not None
