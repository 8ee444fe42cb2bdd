"""The evaluation harness: BEIR data, retrieval metrics, evidence survival, tuning.

A wing of its own: the runtime stages never import it.
"""

from langchain_ragbudget.evaluation._beir import (
    BeirDataset,
    DatasetError,
    judged_id,
    load_beir,
    load_corpus,
)
from langchain_ragbudget.evaluation._cache import (
    cached_hybrid_retriever,
    cached_sparse_retriever,
    cached_vector_store,
    vector_store_folder,
)
from langchain_ragbudget.evaluation._chunked import ChunkedSurvival, evaluate_chunked
from langchain_ragbudget.evaluation._harness import evaluate
from langchain_ragbudget.evaluation._metrics import (
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)
from langchain_ragbudget.evaluation._survival import PolicySurvival, policy_survival
from langchain_ragbudget.evaluation._tables import EvalReport, StageQuality, Survival
from langchain_ragbudget.evaluation._tuning import (
    FusionSetting,
    QueryLists,
    TuneReport,
    current_setting,
    paired_bootstrap,
    query_ndcg,
    retrieve_lists,
    search,
    tune,
)
from langchain_ragbudget.evaluation._weak_evidence import (
    WeakEvidence,
    measure_weak_evidence,
)

__all__ = [
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
]
