"""The evaluation harness: BEIR data, retrieval metrics, evidence survival, tuning.

A wing of its own: the runtime stages never import it.
"""

from langchain_ragbudget.evaluation._beir import BeirDataset, DatasetError, load_beir
from langchain_ragbudget.evaluation._chunked import ChunkedSurvival, evaluate_chunked
from langchain_ragbudget.evaluation._harness import (
    EvalReport,
    StageQuality,
    Survival,
    evaluate,
)
from langchain_ragbudget.evaluation._metrics import (
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)
from langchain_ragbudget.evaluation._tuning import TuneReport, tune
from langchain_ragbudget.evaluation._weak_evidence import (
    WeakEvidence,
    measure_weak_evidence,
)

__all__ = [
    "BeirDataset",
    "ChunkedSurvival",
    "DatasetError",
    "EvalReport",
    "StageQuality",
    "Survival",
    "TuneReport",
    "WeakEvidence",
    "evaluate",
    "evaluate_chunked",
    "hit_at_k",
    "load_beir",
    "measure_weak_evidence",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
    "tune",
]
