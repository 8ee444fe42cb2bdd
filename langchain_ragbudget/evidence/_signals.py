"""Cheap signals of how strong a candidate list is, and the model that combines them.

The features come from the candidates' metadata (top scores, how far the top
stands out, retriever agreement, question terms covered) and, for each
retriever's whole fetched list, from the run ledger. `ragbudget eval` fits the
model and the budget applies it through the same functions, so the harness
measures exactly what runs.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence

from langchain_core.documents import Document

from langchain_ragbudget.config._weak_model import FEATURES as FEATURES
from langchain_ragbudget.config._weak_model import LIST_FEATURES as LIST_FEATURES
from langchain_ragbudget.config._weak_model import (
    LIST_STATISTICS,
    CombinedEvidence,
)
from langchain_ragbudget.evidence._sentence_scoring import terms
from langchain_ragbudget.evidence._sentences import sentences
from langchain_ragbudget.ledger._metadata_keys import (
    DENSE,
    FUSED_SCORE,
    RERANK_SCORE,
    SPARSE,
    rank_key,
    score_key,
)
from langchain_ragbudget.ledger._records import (
    LEDGER_KEY,
    DropReason,
    RunLedger,
    Stage,
    ledgers_of,
)
from langchain_ragbudget.ledger._validation import finite_score

_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")
AGREEMENT_DEPTH = 10  # the top-k of each retriever compared for overlap


def signal_features(documents: Sequence[Document], question: str) -> dict[str, float]:
    """The features of one question's candidate list (fused, maybe reranked).

    A retriever that returned no candidate scores 0; rerank features appear only
    after a rerank, `LIST_FEATURES` only with exactly one run ledger. An empty
    list has no features.
    """
    if not documents:
        return {}
    features = {"fused_top": _top(documents, FUSED_SCORE)}
    bm25 = _scores(documents, score_key(SPARSE))
    dense = _scores(documents, score_key(DENSE))
    wanted = terms(question)
    features["bm25_top"], features["bm25_gap"] = _top_and_gap(bm25)
    features["bm25_per_term"] = features["bm25_top"] / max(len(wanted), 1)
    features["dense_top"], features["dense_gap"] = _top_and_gap(dense)
    features["dense_margin"] = dense[0] - statistics.fmean(dense) if dense else 0.0
    features["overlap"], features["rank_correlation"] = _agreement(documents)
    top = documents[0].page_content
    features["coverage"] = query_coverage(question, top)
    features["weighted_coverage"] = weighted_coverage(
        wanted, [terms(doc.page_content) for doc in documents]
    )
    features["sentence_coverage"] = max(
        (query_coverage(question, sentence) for sentence in sentences(top)),
        default=0.0,
    )
    features["number_coverage"] = number_coverage(question, top)
    fetched = fetched_scores(documents)
    if fetched is not None:
        for name, scores in fetched.items():
            for statistic, value in list_statistics(scores).items():
                features[f"{name}_{statistic}"] = value
    rerank = _scores(documents, RERANK_SCORE)
    if rerank:
        features["rerank_top"], features["rerank_gap"] = _top_and_gap(rerank)
    return features


def fetched_scores(documents: Sequence[Document]) -> dict[str, list[float]] | None:
    """Each retriever's scores over every hit it handed to fusion, highest first.

    Read from the run ledger (kept and cut), so a later `docs[:5]` changes
    nothing; None without exactly one ledger, since statistics over a shorter
    list would quietly mean something else.
    """
    ledgers = ledgers_of(documents)
    if len(ledgers) != 1:
        return None
    fetched = [*ledgers[0].entered.values(), *_cut_by_fusion(ledgers[0])]
    return {name: _scores(fetched, score_key(name)) for name in (SPARSE, DENSE)}


def _cut_by_fusion(ledger: RunLedger) -> Iterator[Document]:
    """The candidates this run's fusion cut (not those of a fusion upstream)."""
    for record in ledger.drops:
        if (
            record.stage is Stage.FUSION
            and record.reason is DropReason.FUSION_CUT
            and record.document.metadata.get(LEDGER_KEY) == ledger.run_id
        ):
            yield record.document


def list_statistics(scores: Sequence[float]) -> dict[str, float]:
    """How far the top score stands above one retriever's list (highest first).

    An answer in the corpus tends to stand clearly above the loosely related
    crowd. `gap_10th` and `gap_50th` use the last score of a shorter list.
    """
    if not scores:
        return dict.fromkeys(LIST_STATISTICS, 0.0)
    top, mean = scores[0], statistics.fmean(scores)
    spread = statistics.pstdev(scores, mean)
    return {
        "list_z": (top - mean) / spread if spread > 0 else 0.0,
        "top_minus_mean": top - mean,
        "top_minus_median": top - statistics.median(scores),
        "gap_10th": top - scores[min(9, len(scores) - 1)],
        "gap_50th": top - scores[min(49, len(scores) - 1)],
    }


def query_coverage(question: str, passage: str) -> float:
    """Share of the question's terms (stemmed, no stopwords) found in `passage`."""
    wanted = terms(question)
    return len(wanted & terms(passage)) / len(wanted) if wanted else 0.0


def weighted_coverage(
    wanted: frozenset[str], candidates: Sequence[frozenset[str]]
) -> float:
    """Share of the question's terms in the first candidate, rare terms weighing more.

    A term's weight is `log(1 + n / (1 + df))` over the `n` candidates: a term
    every candidate shares says little about the top one.
    """
    if not wanted or not candidates:
        return 0.0
    n = len(candidates)
    weight = {
        term: math.log(1 + n / (1 + sum(term in found for found in candidates)))
        for term in wanted
    }
    return sum(weight[term] for term in wanted & candidates[0]) / sum(weight.values())


def number_coverage(question: str, passage: str) -> float:
    """Share of the question's numbers that `passage` also holds (1 if none).

    A claim's figures rarely recur in a passage about something else.
    """
    wanted = set(_NUMBER.findall(question))
    if not wanted:
        return 1.0
    return len(wanted & set(_NUMBER.findall(passage))) / len(wanted)


def _scores(documents: Sequence[Document], key: str) -> list[float]:
    """The finite values of `key` among `documents`, highest first."""
    found = (finite_score(doc.metadata.get(key)) for doc in documents)
    return sorted((score for score in found if score is not None), reverse=True)


def _top(documents: Sequence[Document], key: str) -> float:
    scores = _scores(documents, key)
    return scores[0] if scores else 0.0


def _top_and_gap(scores: Sequence[float]) -> tuple[float, float]:
    """The best score and its lead over the second (0 with fewer than two)."""
    if not scores:
        return 0.0, 0.0
    return scores[0], scores[0] - scores[1] if len(scores) > 1 else 0.0


def _ranks(documents: Sequence[Document], name: str) -> list[int | None]:
    out: list[int | None] = []
    for doc in documents:
        rank = doc.metadata.get(rank_key(name))
        out.append(
            rank if isinstance(rank, int) and not isinstance(rank, bool) else None
        )
    return out


def _agreement(documents: Sequence[Document]) -> tuple[float, float]:
    """Overlap of the retrievers' top `AGREEMENT_DEPTH`, and their rank correlation.

    Every candidate in both tops outscores one found by a single retriever, so
    the fused list holds them all. Spearman's correlation over the candidates
    both returned (0 with fewer than three, or no spread).
    """
    pairs = [
        (sparse, dense)
        for sparse, dense in zip(
            _ranks(documents, SPARSE), _ranks(documents, DENSE), strict=True
        )
        if sparse is not None and dense is not None
    ]
    both_top = sum(
        sparse <= AGREEMENT_DEPTH and dense <= AGREEMENT_DEPTH
        for sparse, dense in pairs
    )
    overlap = both_top / AGREEMENT_DEPTH
    if len(pairs) < 3:
        return overlap, 0.0
    import numpy as np  # here, not at the top: importing the budget stays light

    sparse_order = np.argsort(np.argsort([p[0] for p in pairs]))
    dense_order = np.argsort(np.argsort([p[1] for p in pairs]))
    correlation = float(np.corrcoef(sparse_order, dense_order)[0, 1])
    return overlap, correlation if math.isfinite(correlation) else 0.0


def combined_probability(
    features: Mapping[str, float], model: CombinedEvidence
) -> float | None:
    """The fitted model's probability that the candidates hold the answer.

    Coefficients apply to the raw features (the harness folds its
    standardisation into them); None when a feature the model needs is missing.
    """
    if any(name not in features for name in model.coefficients):
        return None
    logit = model.intercept + sum(
        weight * features[name] for name, weight in model.coefficients.items()
    )
    return _sigmoid(logit)


def _sigmoid(x: float) -> float:
    """The logistic function, without overflow."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def feature_rows(
    samples: Sequence[Mapping[str, float]], names: Sequence[str]
) -> Iterator[list[float]]:
    """Each sample's values of `names`, in that order (for a fitting library)."""
    for sample in samples:
        yield [sample[name] for name in names]
