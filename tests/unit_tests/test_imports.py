import ast
import importlib
import json
import re
from pathlib import Path

import pytest
from langchain_core.prompts import ChatPromptTemplate

import langchain_ragbudget

EXPECTED_ALL = [
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
    "DEFAULT_PROMPT",
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
    "MEMORY_PROMPT",
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


def test_all_imports() -> None:
    assert sorted(langchain_ragbudget.__all__) == sorted(EXPECTED_ALL)
    assert sorted(langchain_ragbudget._EXPORTS) == sorted(langchain_ragbudget.__all__)
    for name in EXPECTED_ALL:  # each name is bound to this package's own object
        obj = getattr(langchain_ragbudget, name)
        if name.isupper():  # a constant: the package's prompts, history optional
            assert isinstance(obj, ChatPromptTemplate), name
            assert "history" in obj.optional_variables, name
            continue
        assert obj.__name__ == name, name
        assert obj.__module__.startswith("langchain_ragbudget."), name


WINGS = {
    "langchain_ragbudget.index": [
        "Chunker",
        "FileError",
        "FileText",
        "HybridIndex",
        "IndexInspection",
        "IngestSummary",
        "RepairReport",
        "Scan",
        "Skipped",
        "SyncReport",
        "load_file",
        "read_file",
        "scan",
    ],
    "langchain_ragbudget.evaluation": [
        "BeirDataset",
        "ChunkedSurvival",
        "DatasetError",
        "EvalReport",
        "FusionSetting",
        "PolicySurvival",
        "QueryLists",
        "StageQuality",
        "Survival",
        "TuneReport",
        "WeakEvidence",
        "cached_hybrid_retriever",
        "cached_sparse_retriever",
        "cached_vector_store",
        "current_setting",
        "evaluate",
        "evaluate_chunked",
        "hit_at_k",
        "judged_id",
        "load_beir",
        "load_corpus",
        "measure_weak_evidence",
        "mrr_at_k",
        "ndcg_at_k",
        "paired_bootstrap",
        "policy_survival",
        "query_ndcg",
        "recall_at_k",
        "retrieve_lists",
        "search",
        "tune",
        "vector_store_folder",
    ],
    "langchain_ragbudget.cli": ["main", "run"],
}


@pytest.mark.parametrize("wing", sorted(WINGS))
def test_each_wing_pins_its_public_names(wing: str) -> None:
    module = importlib.import_module(wing)
    assert sorted(module.__all__) == WINGS[wing]
    for name in module.__all__:
        assert getattr(module, name).__module__.startswith(wing + "."), name


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'no_such_name'"):
        _ = langchain_ragbudget.no_such_name


def _top_level_imports(source: str) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "langchain_ragbudget":
            names += [alias.name for alias in node.names]
    return names


def test_every_top_level_import_in_the_repository_is_exported() -> None:
    """The lazy `__getattr__` hides a removed name from mypy: check every use."""
    root = Path(__file__).resolve().parents[2]
    sources = [
        path.read_text(encoding="utf-8")
        for folder in ("tests", "benchmarks", "docs", "langchain_ragbudget")
        for path in (root / folder).rglob("*.py")
    ]
    for notebook in (root / "notebooks").glob("*.ipynb"):
        cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
        sources += ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    sources += re.findall(r"```python\n(.*?)```", readme, re.DOTALL)
    exported = {*langchain_ragbudget.__all__, "__version__"}
    unknown = {
        name for source in sources for name in _top_level_imports(source)
    } - exported
    assert unknown == set()
