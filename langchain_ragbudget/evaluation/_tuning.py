"""`ragbudget tune`: choose the fusion method, weights and c on labelled queries.

Each retriever runs once per query; every grid point re-fuses those lists exactly
as `HybridRetriever` does, so a setting's nDCG here is the one `ragbudget eval`
reports on the same queries. Tuning and measuring on the same queries overstates
the gain, so the test split is refused unless asked for, and the report gives a
paired bootstrap interval and a cross-validated estimate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from langchain_ragbudget.config._settings import FusionMethod, RagBudgetConfig
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.evaluation._beir import (
    BeirDataset,
    judged_id,
    load_beir,
    load_qrels,
)
from langchain_ragbudget.evaluation._cache import cached_hybrid_retriever
from langchain_ragbudget.evaluation._metrics import ndcg_at_k, without_query_itself
from langchain_ragbudget.progress import ProgressCallback
from langchain_ragbudget.retrieval._fusion import FUSION_METHODS, fuse
from langchain_ragbudget.retrieval._hybrid import HybridRetriever, hit_keys, hit_scores

TEST_SPLIT = "test"
SPARSE_SHARES = tuple(i / 20 for i in range(21))  # sparse weight; dense gets 1 - it
RRF_CS = (1.0, 5.0, 10.0, 20.0, 40.0, 60.0, 100.0)
RESAMPLES = 10_000
CONFIDENCE = 0.95
FOLDS = 5
SEED = 0  # bootstrap and folds: the same run prints the same interval
NDCG_AT = 10


@dataclass(frozen=True)
class FusionSetting:
    """One point of the grid: a fusion method and its parameters.

    Attributes:
        method: `rrf`, `minmax` or `dbsf`.
        weights: One weight per retriever (sparse, dense).
        rrf_c: The RRF constant (read by `rrf` only).
    """

    method: FusionMethod
    weights: tuple[float, ...]
    rrf_c: float

    def describe(self) -> str:
        """`minmax, weights 0.35/0.65` or `rrf, weights 1/1, c 60`."""
        weights = "/".join(f"{w:g}" for w in self.weights)
        text = f"{self.method}, weights {weights}"
        return f"{text}, c {self.rrf_c:g}" if self.method == "rrf" else text


@dataclass(frozen=True)
class Scored:
    """A setting and its mean nDCG@10 over the tuning queries."""

    setting: FusionSetting
    ndcg: float


@dataclass(frozen=True)
class Interval:
    """A mean difference over queries and its bootstrap confidence interval."""

    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class TuneReport:
    """What `tune` found, and on which queries.

    Attributes:
        dataset: The dataset's name (its folder).
        tuned_split: The qrels split whose queries chose the setting.
        measured_split: The split the numbers are measured on (the same one).
        n_queries: Queries tuned and measured on.
        grid_size: Settings tried.
        current: The configuration's own setting and its nDCG@10.
        best: The best setting found and its nDCG@10 (`current` on a tie).
        by_method: The best setting of each method.
        gain: best - current, mean over queries, with its bootstrap interval.
        held_out: nDCG@10 of the tuning procedure on queries it did not see
            (cross-validated), None with fewer than two queries.
        held_out_gain: held_out - current, with its bootstrap interval.
        confidence: The interval's confidence level.
        resamples: Bootstrap resamples.
    """

    dataset: str
    tuned_split: str
    measured_split: str
    n_queries: int
    grid_size: int
    current: Scored
    best: Scored
    by_method: list[Scored]
    gain: Interval
    held_out: float | None
    held_out_gain: Interval | None
    confidence: float = CONFIDENCE
    resamples: int = RESAMPLES

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        return asdict(self)


@dataclass(frozen=True)
class QueryLists:
    """One query's retrieved lists, as fusion reads them, and its judgements.

    Attributes:
        query_id: The query's id.
        keys: Per retriever, the ranked candidate keys.
        scores: Per retriever, each key's finite score or None.
        judged: Candidate key -> the id the qrels judge it by.
        relevant: Judged id -> graded relevance (> 0 only).
    """

    query_id: str
    keys: list[list[str]]
    scores: list[list[float | None]]
    judged: dict[str, str]
    relevant: dict[str, int]


def check_split(folder: str | Path, split: str, *, allow_test: bool = False) -> None:
    """Refuse to tune on the test split (by name or path) or one sharing its queries.

    Raises:
        InvalidInputError: The split is the test split or shares a query with it,
            and `allow_test` is False.
    """
    if allow_test:
        return
    qrels = Path(folder) / "qrels"
    chosen, test = qrels / f"{split}.tsv", qrels / f"{TEST_SPLIT}.tsv"
    advice = (
        "tune on labelled queries that are not measured later (--split train), "
        "or pass --allow-test-split to do it anyway"
    )
    if split.lower() == TEST_SPLIT or chosen.resolve() == test.resolve():
        raise InvalidInputError(
            f"refusing to tune on the test split ({chosen}): a setting chosen on "
            f"the queries it is measured on overstates its gain; {advice}"
        )
    if test.is_file() and chosen.is_file():
        shared = sorted(load_qrels(chosen).keys() & load_qrels(test).keys())
        if shared:
            raise InvalidInputError(
                f"refusing to tune on split {split!r}: {len(shared)} of its queries "
                f"are test queries (e.g. {shared[:3]}); {advice}"
            )


def tune(
    folder: str | Path,
    config: RagBudgetConfig,
    *,
    split: str = "train",
    allow_test_split: bool = False,
    limit: int | None = None,
    ignore_identical_ids: bool = True,
    progress: ProgressCallback | None = None,
) -> TuneReport:
    """Search fusion method, weights and c on one labelled split of a BEIR folder.

    `tuned_yaml` turns the report into a file `--config` loads.

    Args:
        folder: A BEIR folder with `qrels/<split>.tsv`.
        config: The configuration whose retrievers are searched; its own fusion
            setting is the baseline (`current`).
        split: The split to tune on.
        allow_test_split: Tune on the test split (or one sharing its queries).
        limit: Tune on the first `limit` queries only.
        ignore_identical_ids: Leave out a hit whose id is the query's own.
        progress: Called with (stage, done, total) as work advances.

    Raises:
        InvalidInputError: The split is refused or has no judged query.
        DatasetError: The folder is missing a file or holds a malformed line.
    """
    check_split(folder, split, allow_test=allow_test_split)
    dataset = load_beir(folder, split)
    hybrid = cached_hybrid_retriever(
        dataset.corpus,
        config,
        name=dataset.name,
        progress=progress,
    )
    runs = retrieve_lists(dataset, hybrid, limit=limit, progress=progress)
    if not runs:
        raise InvalidInputError(f"{folder}: split {split!r} has no judged query")
    return search(
        runs,
        current_setting(config),
        hybrid.k,
        dataset=dataset.name,
        split=split,
        ignore_identical_ids=ignore_identical_ids,
        progress=progress,
    )


def current_setting(config: RagBudgetConfig) -> FusionSetting:
    """The fusion setting a configuration uses."""
    retrieval = config.retrieval
    return FusionSetting(
        retrieval.fusion,
        (retrieval.sparse.weight, retrieval.dense.weight),
        retrieval.rrf_c,
    )


def search(
    runs: Sequence[QueryLists],
    current: FusionSetting,
    k: int,
    *,
    dataset: str,
    split: str,
    ignore_identical_ids: bool = True,
    progress: ProgressCallback | None = None,
) -> TuneReport:
    """Score every grid setting on `runs` and report the best against `current`.

    Args:
        runs: The retrieved lists of the tuning queries (`retrieve_lists`).
        current: The baseline setting, tried first (it wins a tie).
        k: The fused candidates kept (the hybrid's `k`).
        dataset: The dataset's name, for the report.
        split: The split `runs` come from, for the report.
        ignore_identical_ids: Leave out a hit whose id is the query's own.
        progress: Called with (stage, done, total) per setting.
    """
    grid = fusion_grid(current)
    matrix = ndcg_matrix(runs, grid, k, ignore_identical_ids, progress)
    return _report(dataset, split, grid, matrix)


def retrieve_lists(
    dataset: BeirDataset,
    hybrid: HybridRetriever,
    *,
    limit: int | None = None,
    progress: ProgressCallback | None = None,
) -> list[QueryLists]:
    """Run each retriever once per query and keep what fusion reads."""
    queries = list(dataset.queries.items())[:limit]
    runs = []
    for done, (query_id, text) in enumerate(queries, start=1):
        hits = [
            [
                (doc, doc.metadata.get(hybrid.score_key))
                for doc in retriever.invoke(text)
            ]
            for retriever in hybrid.retrievers
        ]
        keys = hit_keys(hits, hybrid.id_key)
        judged: dict[str, str] = {}
        for list_keys, pairs in zip(keys, hits, strict=True):
            for key, (doc, _) in zip(list_keys, pairs, strict=True):
                judged.setdefault(key, judged_id(doc))
        relevant = {d: rel for d, rel in dataset.qrels[query_id].items() if rel > 0}
        runs.append(QueryLists(query_id, keys, hit_scores(hits), judged, relevant))
        if progress:
            progress("retrieving", done, len(queries))
    return runs


def fusion_grid(
    current: FusionSetting,
    shares: Sequence[float] = SPARSE_SHARES,
    rrf_cs: Sequence[float] = RRF_CS,
) -> list[FusionSetting]:
    """`current` first, then every method at every weight share (and c for RRF).

    Weights are `(share, 1 - share)`: only their ratio changes a ranking.
    """
    grid = [current]
    for method in FUSION_METHODS:
        for c in rrf_cs if method == "rrf" else (current.rrf_c,):
            grid += [
                FusionSetting(method, (share, round(1 - share, 6)), c)
                for share in shares
            ]
    return list(dict.fromkeys(grid))


def query_ndcg(
    run: QueryLists, setting: FusionSetting, k: int, ignore_identical_ids: bool
) -> float:
    """nDCG@10 of the top `k` that `setting` fuses for one query."""
    fused = fuse(
        setting.method,
        run.keys,
        setting.weights,
        scores=run.scores,
        c=setting.rrf_c,
    )
    ranked = [run.judged[item.key] for item in fused[:k]]
    if ignore_identical_ids:
        ranked = without_query_itself(ranked, run.query_id)
    return ndcg_at_k(ranked, run.relevant, NDCG_AT)


def ndcg_matrix(
    runs: Sequence[QueryLists],
    grid: Sequence[FusionSetting],
    k: int,
    ignore_identical_ids: bool,
    progress: ProgressCallback | None = None,
) -> np.ndarray:
    """nDCG@10 per setting (rows) and query (columns)."""
    matrix = np.empty((len(grid), len(runs)))
    for row, setting in enumerate(grid):
        matrix[row] = [
            query_ndcg(run, setting, k, ignore_identical_ids) for run in runs
        ]
        if progress:
            progress("fusing", row + 1, len(grid))
    return matrix


def paired_bootstrap(
    differences: np.ndarray,
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> Interval:
    """Mean of per-query differences and its percentile bootstrap interval.

    Queries are resampled with replacement, keeping each query's pair together.

    Raises:
        ValueError: No differences.
    """
    n = len(differences)
    if n == 0:
        raise ValueError("a bootstrap needs at least one query")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    for start in range(0, resamples, 1000):  # bounded memory
        size = min(1000, resamples - start)
        means[start : start + size] = differences[rng.integers(0, n, (size, n))].mean(
            axis=1
        )
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Interval(float(differences.mean()), float(low), float(high))


def held_out_scores(
    matrix: np.ndarray, folds: int = FOLDS, seed: int = SEED
) -> np.ndarray | None:
    """Per query, the nDCG of the setting chosen on the other folds (None: < 2)."""
    n = matrix.shape[1]
    if n < 2:
        return None
    order = np.random.default_rng(seed).permutation(n)
    scores = np.empty(n)
    for held in np.array_split(order, min(folds, n)):
        rest = np.setdiff1d(order, held)
        chosen = int(np.argmax(matrix[:, rest].mean(axis=1)))
        scores[held] = matrix[chosen, held]
    return scores


def _report(
    dataset: str, split: str, grid: Sequence[FusionSetting], matrix: np.ndarray
) -> TuneReport:
    means = matrix.mean(axis=1)
    best = int(np.argmax(means))  # the first maximum: `current` wins a tie
    by_method = []
    for method in FUSION_METHODS:
        rows = [i for i, setting in enumerate(grid) if setting.method == method]
        top = max(rows, key=lambda i: means[i])
        by_method.append(Scored(grid[top], float(means[top])))
    held = held_out_scores(matrix)
    return TuneReport(
        dataset=dataset,
        tuned_split=split,
        measured_split=split,
        n_queries=matrix.shape[1],
        grid_size=len(grid),
        current=Scored(grid[0], float(means[0])),
        best=Scored(grid[best], float(means[best])),
        by_method=by_method,
        gain=paired_bootstrap(matrix[best] - matrix[0]),
        held_out=None if held is None else float(held.mean()),
        held_out_gain=None if held is None else paired_bootstrap(held - matrix[0]),
    )


def tuned_yaml(report: TuneReport) -> str:
    """The best setting as a `retrieval:` section that `--config` merges over."""
    best = report.best.setting
    retrieval: dict[str, Any] = {"fusion": best.method}
    if best.method == "rrf":
        retrieval["rrf_c"] = float(best.rrf_c)
    retrieval["sparse"] = {"weight": float(best.weights[0])}
    retrieval["dense"] = {"weight": float(best.weights[1])}
    # json.dumps: a folder name cannot end the comment line or start a key
    header = (
        f"# Fusion tuned by `ragbudget tune` on {json.dumps(report.dataset)}, split "
        f"{json.dumps(report.tuned_split)} ({report.n_queries} queries).\n"
        f"# nDCG@10 on that split: {report.current.ndcg:.4f} "
        f"({report.current.setting.describe()}) -> {report.best.ndcg:.4f}.\n"
        "# Load with --config; measure on the test split with `ragbudget eval`.\n"
    )
    return header + yaml.safe_dump({"retrieval": retrieval}, sort_keys=False)
