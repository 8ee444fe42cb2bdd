"""Evaluation harness: retrieval quality per stage, and survival through the budget.

For every query of a BEIR dataset the configured pipeline runs stage by stage (each
retriever, fusion, rerank, budget) and the harness records the ranking after each
stage, which gold passages each stage dropped and why, the tokens used, and silent
drops: candidates missing from both the context and the drop records (always 0, or
the one rule is broken). It also compares packing policies on the same candidate
lists at several budgets.
"""

from __future__ import annotations

import io
import math
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragbudget._disk import atomic_write_text, cache_root
from langchain_ragbudget._html import (
    display,
    element,
    key_values,
    png_image,
    table,
)
from langchain_ragbudget._identity import document_key
from langchain_ragbudget._weak_signal import signal_features
from langchain_ragbudget.budget import BudgetedContext, ContextBudget
from langchain_ragbudget.config import (
    CombinedEvidence,
    RagBudgetConfig,
    TreeEvidence,
)
from langchain_ragbudget.errors import MissingExtraError, require
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._cache import (
    cached_hybrid_retriever,
    corpus_fingerprint,
)
from langchain_ragbudget.evaluation._metrics import (
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    without_query_itself,
)
from langchain_ragbudget.evaluation._survival import (
    POLICIES,
    PolicySurvival,
    policy_survival,
)
from langchain_ragbudget.evaluation._weak_fit import (
    Cases,
    FlagQuality,
    combined_scores,
    common_features,
    fit_combined,
    flag_quality,
    reliability,
    threshold_for_precision,
)
from langchain_ragbudget.evidence import top_score
from langchain_ragbudget.factory import (
    build_budget,
    build_reranker,
)
from langchain_ragbudget.hybrid import HybridRetriever
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.ledger import CandidateList
from langchain_ragbudget.progress import ProgressCallback, StageProgress, prefixed
from langchain_ragbudget.rerank import FlashRankRerank

DEFAULT_BUDGETS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)


@dataclass(frozen=True)
class StageQuality:
    """Mean metrics of one stage's ranking over the queries; None when skipped."""

    stage: str
    status: str
    hit: float | None = None
    mrr: float | None = None
    recall: float | None = None
    ndcg: float | None = None
    note: str = ""


@dataclass(frozen=True)
class Survival:
    """What happened to the gold passages on one surface, and to the budget."""

    surface: str
    max_tokens: int
    max_docs: int
    gold_retrieved: int
    gold_kept: int
    gold_dropped: dict[str, int]
    silent_drops: int
    tokens_mean: float
    tokens_p50: float
    tokens_max: int
    over_budget: int
    evidence_retrieved: int = 0
    evidence_kept: int = 0

    @property
    def survival(self) -> float | None:
        """Share of the gold passages the retrievers found that reached the prompt."""
        return self.gold_kept / self.gold_retrieved if self.gold_retrieved else None

    @property
    def evidence_survival(self) -> float | None:
        """Share of the gold passages with marked evidence that kept all of it.

        Whole, or in the sentences a shortened passage kept.
        """
        if not self.evidence_retrieved:
            return None
        return self.evidence_kept / self.evidence_retrieved


@dataclass
class EvalReport:
    """Everything one evaluation run measured.

    Attributes:
        dataset: The dataset's name (its folder).
        n_queries: Queries measured.
        n_documents: Documents in the corpus.
        k: The k of hit@k and recall@k (MRR and nDCG are at 10).
        quality: Mean metrics per stage: each retriever, fusion, rerank (or why it
            was skipped), and the budget of each surface.
        survival: Per surface: gold passages retrieved, kept and dropped (by
            stage and reason), silent drops (must be 0), tokens used.
        policy_budgets: The token budgets at which packing policies were compared.
        policy_survival: Per policy, the share of gold passages kept at each budget.
        policy_encoding: The tiktoken encoding the policies were compared in.
        settings: The retrieval settings measured (fusion k, fetch k, weights,
            fusion, rrf_c, rerank model).
        evidence_gold: Gold passages with marked evidence sentences.
        evidence_survival: Per policy, the share of those with every evidence
            sentence in the prompt, at each budget.
        mid_sentence_cuts: Per policy, kept texts that were not whole sentences
            of their passage, over every query and budget (0 but for the slice,
            which is not counted: it cuts anywhere by design).
        chunked: Evidence survival with the corpus indexed in chunks, one entry
            per chunk size measured (`evaluate_chunked`).
        weak_evidence: How well the weak-evidence signals tell answerable from
            unanswerable questions (when a fitting split was given).
    """

    dataset: str
    n_queries: int
    n_documents: int
    k: int
    quality: list[StageQuality]
    survival: list[Survival]
    policy_budgets: list[int]
    policy_survival: dict[str, list[float | None]]
    policy_encoding: str
    settings: dict[str, Any] = field(default_factory=dict)
    evidence_gold: int = 0
    evidence_survival: dict[str, list[float | None]] = field(default_factory=dict)
    mid_sentence_cuts: dict[str, int] = field(default_factory=dict)
    chunked: list[ChunkedSurvival] = field(default_factory=list)
    weak_evidence: WeakEvidence | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view."""
        data = asdict(self)
        for row, item in zip(data["survival"], self.survival, strict=True):
            row["survival"] = item.survival
            row["evidence_survival"] = item.evidence_survival
        if self.weak_evidence is not None:
            model = self.weak_evidence.model
            data["weak_evidence"]["model"] = model.model_dump(exclude_none=True)
        return data

    def __repr__(self) -> str:
        surfaces = ", ".join(item.surface for item in self.survival) or "none"
        return (
            f"EvalReport({self.dataset!r}, {self.n_queries} queries, "
            f"{self.n_documents} documents, k={self.k}, {len(self.quality)} stages, "
            f"surfaces: {surfaces})"
        )

    def _repr_html_(self) -> str:
        """Jupyter's view: the run, every table, and the survival plot inline."""
        summary: list[tuple[str, object]] = [
            ("dataset", self.dataset),
            ("queries", self.n_queries),
            ("documents", self.n_documents),
            ("settings", self.settings or "-"),
        ]
        parts = [key_values(summary, caption="evaluation")]
        parts += [
            table(item.header, item.rows, caption=item.title, numeric=item.numeric)
            for item in report_tables(self)
        ]
        try:
            plot = survival_png(self)
        except MissingExtraError as error:
            parts.append(element("p", f"No survival plot: {error}"))
        else:
            parts.append(png_image(plot, "gold survival against the token budget"))
        return display("EvalReport", parts)


@dataclass(frozen=True)
class ReportTable:
    """One table of a report as text, which the terminal, Markdown and HTML draw.

    Attributes:
        title: What the table shows.
        header: The column names.
        rows: The cells.
        numeric: Indices of the columns aligned right.
    """

    title: str
    header: list[str]
    rows: list[list[str]]
    numeric: tuple[int, ...] = ()


def _num(value: float | None, digits: int = 4) -> str:
    return "skipped" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def quality_header(k: int) -> list[str]:
    """The columns of the quality table."""
    return ["stage", f"hit@{k}", "MRR@10", f"recall@{k}", "nDCG@10"]


def quality_rows(report: EvalReport) -> list[list[str]]:
    """One row per stage: stage, hit@k, MRR@10, recall@k, nDCG@10."""
    return [
        [
            row.stage + (f" ({row.note})" if row.note else ""),
            _num(row.hit),
            _num(row.mrr),
            _num(row.recall),
            _num(row.ndcg),
        ]
        for row in report.quality
    ]


SURVIVAL_HEADER = [
    "surface",
    "budget",
    "gold retrieved",
    "gold in prompt",
    "gold evidence in prompt",
    "gold dropped (stage/reason)",
    "tokens mean / p50 / max",
    "over budget",
    "silent drops",
]


def survival_rows(report: EvalReport) -> list[list[str]]:
    """One row per surface: budget, gold found, gold kept, drops, tokens, silent."""
    rows = []
    for item in report.survival:
        dropped = ", ".join(
            f"{n} {why}" for why, n in sorted(item.gold_dropped.items())
        )
        rows.append(
            [
                item.surface,
                f"{item.max_docs} docs / {item.max_tokens} tok",
                str(item.gold_retrieved),
                f"{item.gold_kept} ({_pct(item.survival)})",
                f"{item.evidence_kept} of {item.evidence_retrieved} "
                f"({_pct(item.evidence_survival)})",
                dropped or "none",
                f"{item.tokens_mean:.0f} / {item.tokens_p50:.0f} / {item.tokens_max}",
                str(item.over_budget),
                str(item.silent_drops),
            ]
        )
    return rows


def budget_header(report: EvalReport) -> list[str]:
    """The columns of a table by packing policy: the policy, then each budget."""
    return ["policy", *map(str, report.policy_budgets)]


def budget_rows(by_policy: dict[str, list[float | None]]) -> list[list[str]]:
    """One row per packing policy: the share kept at each budget."""
    return [
        [policy, *(_pct(v) for v in values)] for policy, values in by_policy.items()
    ]


def chunked_caption(item: ChunkedSurvival) -> str:
    """What a chunked evidence table measured: chunks, k, gold, mid-sentence cuts."""
    return (
        f"{item.chunk_size}-token chunks, {item.k} retrieved: evidence kept of "
        f"{item.evidence_gold} gold documents found ({item.split_evidence} with an "
        "evidence sentence no retrieved chunk holds whole); cut mid-sentence: "
        + ", ".join(f"{p} {n}" for p, n in item.mid_sentence_cuts.items())
    )


def mid_sentence_note(report: EvalReport) -> str:
    """The mid-sentence count per policy, for the evidence table's caption."""
    counts = ", ".join(f"{p} {n}" for p, n in report.mid_sentence_cuts.items())
    return f"kept texts cut mid-sentence: {counts}"


WEAK_HEADER = [
    "method",
    "AUROC",
    "threshold (fitted)",
    "weak-flag precision",
    "weak-flag recall",
    "precision on the fitting split",
]


def weak_rows(weak: WeakEvidence) -> list[list[str]]:
    """One row per weak-evidence method: AUROC, threshold, the flag's quality."""
    return [
        [
            row.method,
            f"{row.auroc:.3f}",
            f"{row.threshold:.3f}",
            _pct(row.precision),
            _pct(row.recall),
            _pct(row.train_precision),
        ]
        for row in weak.methods
    ]


def weak_caption(weak: WeakEvidence) -> str:
    """What the weak-evidence table measured and what it was fitted on."""
    return (
        f"weak evidence: {weak.n_measured} questions measured twice (as is, and "
        f"with their judged-relevant documents removed); fitted on {weak.fit_split} "
        f"({weak.n_fit} questions) for a weak-flag precision of "
        f"{weak.target_precision:.0%}; combined model chosen there by grouped "
        "5-fold AUROC: "
        + ", ".join(f"{kind} {value:.3f}" for kind, value in weak.cv_auroc.items())
    )


def report_tables(report: EvalReport) -> list[ReportTable]:
    """Every table of the report: quality, survival, policies, evidence, chunks."""
    budgets = budget_header(report)
    right = tuple(range(1, len(budgets)))
    tables = [
        ReportTable(
            f"{report.dataset}: quality per stage ({report.n_queries} queries)",
            quality_header(report.k),
            quality_rows(report),
            (1, 2, 3, 4),
        ),
        ReportTable(
            "gold-passage survival into the prompt",
            SURVIVAL_HEADER,
            survival_rows(report),
        ),
        ReportTable(
            "gold survival by packing policy and token budget "
            f"({report.policy_encoding})",
            budgets,
            budget_rows(report.policy_survival),
            right,
        ),
    ]
    if report.evidence_gold:
        tables.append(
            ReportTable(
                "gold evidence sentences in the context, by policy and token budget "
                f"({report.evidence_gold} gold passages with marked evidence; "
                f"{mid_sentence_note(report)})",
                budgets,
                budget_rows(report.evidence_survival),
                right,
            )
        )
    if report.weak_evidence is not None:
        tables.append(
            ReportTable(
                weak_caption(report.weak_evidence),
                WEAK_HEADER,
                weak_rows(report.weak_evidence),
                (1, 2, 3, 4, 5),
            )
        )
    tables += [
        ReportTable(
            chunked_caption(item), budgets, budget_rows(item.evidence_survival), right
        )
        for item in report.chunked
    ]
    return tables


def _points(
    budgets: list[int], values: list[float | None]
) -> tuple[list[int], list[float]]:
    pairs = [(b, v) for b, v in zip(budgets, values, strict=True) if v is not None]
    return [b for b, _ in pairs], [v for _, v in pairs]


def survival_png(report: EvalReport) -> bytes:
    """The survival plot as PNG: gold kept against the token budget, per policy.

    Drawn on a bare matplotlib `Figure`, not through pyplot, so it neither switches
    a notebook's backend nor leaves a figure open; text from the data is drawn as
    written (a `$` in a dataset's name is not read as math).

    Raises:
        MissingExtraError: matplotlib (the `eval` extra) is not installed.
    """
    require("matplotlib", "eval", "the survival plot")
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.0), dpi=120)
    axis = figure.subplots()
    for policy, values in report.policy_survival.items():
        points = _points(report.policy_budgets, values)
        (line,) = axis.plot(*points, marker="o", label=policy)
        if report.evidence_gold:
            axis.plot(
                *_points(report.policy_budgets, report.evidence_survival[policy]),
                linestyle="--",
                color=line.get_color(),
                label=f"{policy}: evidence",
            )
    axis.set_xscale("log", base=2)
    axis.set_xlabel(
        f"context budget (tokens, {report.policy_encoding})", parse_math=False
    )
    axis.set_ylabel(
        "gold kept whole (evidence kept: dashed)"
        if report.evidence_gold
        else "gold passages kept whole"
    )
    axis.set_ylim(0, 1.02)
    axis.set_title(
        f"{report.dataset}: does the gold passage survive the budget?",
        parse_math=False,
    )
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _doc_id(document: Document) -> str:
    return judged_id(document)


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


@dataclass
class _Accumulator:
    rankings: dict[str, list[tuple[list[str], dict[str, int]]]] = field(
        default_factory=dict
    )
    gold_retrieved: Counter[str] = field(default_factory=Counter)
    gold_kept: Counter[str] = field(default_factory=Counter)
    gold_dropped: dict[str, Counter[str]] = field(default_factory=dict)
    silent: Counter[str] = field(default_factory=Counter)
    tokens: dict[str, list[int]] = field(default_factory=dict)
    over_budget: Counter[str] = field(default_factory=Counter)
    policy_hits: dict[str, list[int]] = field(default_factory=dict)
    policy_gold: int = 0
    evidence_hits: dict[str, list[int]] = field(default_factory=dict)
    evidence_gold: int = 0
    bad_cuts: dict[str, int] = field(default_factory=dict)
    surface_evidence: Counter[str] = field(default_factory=Counter)
    surface_evidence_kept: Counter[str] = field(default_factory=Counter)

    ignore_query: str | None = None  # the query id, while BEIR's rule applies

    def rank(self, stage: str, docs: Sequence[Document], rel: dict[str, int]) -> None:
        ranked = [_doc_id(d) for d in docs]
        if self.ignore_query is not None:
            ranked = without_query_itself(ranked, self.ignore_query)
        self.rankings.setdefault(stage, []).append((ranked, rel))


def evaluate(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    *,
    surfaces: Sequence[str] | None = None,
    k: int = 10,
    limit: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    reranker: FlashRankRerank | None = None,
    progress: ProgressCallback | None = None,
    ignore_identical_ids: bool = True,
    weak_fit: BeirDataset | None = None,
) -> EvalReport:
    """Run the configured pipeline over `dataset` and measure every stage.

    Args:
        dataset: A BEIR dataset (corpus, queries, qrels; rationales if any).
        config: The configuration whose pipeline is measured.
        surfaces: The budgets to measure (every configured surface if None).
        k: The k of hit@k and recall@k.
        limit: Measure the first `limit` queries only.
        budgets: Token budgets at which packing policies are compared.
        reranker: A rerank stage to use instead of the configured one; if the
            model is missing, the rerank row says "skipped" and the budget works on
            the fused list.
        progress: Called with (stage, done, total) as work advances.
        ignore_identical_ids: As BEIR's evaluator does by default, leave out of
            the quality metrics a hit whose id is the query's own id.
        weak_fit: Labelled questions (the train split) to fit the combined
            weak-evidence signal on; it is then measured on `dataset`'s queries
            beside the single threshold (`EvalReport.weak_evidence`).

    Returns:
        The report: quality per stage, gold survival per surface, policies by
        budget. Corpus embeddings are cached on disk (keyed by content and model).

    Raises:
        ConfigError: A surface is unknown, or its weak-evidence check names a
            score no stage writes.
        ModelUnavailableError: The embedding model cannot be loaded, or the
            configured reranker's cannot and `rerank.on_unavailable` is `error`.
    """
    surfaces = list(surfaces or config.surfaces)
    stages = _Stages.build(dataset, config, surfaces, reranker, progress)
    queries = list(dataset.queries.items())[:limit]
    acc = _Accumulator(
        policy_hits={policy: [0] * len(budgets) for policy in POLICIES},
        evidence_hits={policy: [0] * len(budgets) for policy in POLICIES},
    )
    answered = StageProgress(progress, "queries", len(queries)).start()
    for query_id, text in queries:
        relevant = {doc: rel for doc, rel in dataset.qrels[query_id].items() if rel > 0}
        rationales = dataset.rationales.get(query_id, {})
        acc.ignore_query = query_id if ignore_identical_ids else None
        candidates = stages.run(acc, text, relevant, rationales)
        _compare_policies(
            acc,
            candidates,
            relevant,
            rationales,
            budgets,
            stages.encoding,
            stages.hybrid.id_key,
            text,
        )
        answered.advance()
    report = _report(dataset, config, stages, acc, k, len(queries), budgets)
    if weak_fit is not None:
        report.weak_evidence = measure_weak_evidence(
            stages, config, surfaces[0], weak_fit, dataset, limit, progress
        )
    return report


@dataclass
class _Stages:
    """The pipeline, taken apart so each stage's ranking can be measured."""

    hybrid: HybridRetriever
    reranker: FlashRankRerank | None
    budgets: dict[str, ContextBudget]

    @classmethod
    def build(
        cls,
        dataset: BeirDataset,
        config: RagBudgetConfig,
        surfaces: Sequence[str],
        reranker: FlashRankRerank | None,
        progress: ProgressCallback | None,
    ) -> _Stages:
        budgets: dict[str, ContextBudget] = {}
        for name in surfaces:
            budget = build_budget(name, config)
            budgets[name] = budget
            if budget.settings.packing == "trim":  # the same surface without it
                before = budget.settings.model_copy(update={"packing": "skip"})
                budgets[f"{name} (skip)"] = budget.model_copy(
                    update={"settings": before}
                )
        hybrid = cached_hybrid_retriever(
            dataset.corpus,
            config,
            name=dataset.name,
            progress=progress,
        )
        return cls(hybrid, reranker or build_reranker(config), budgets)

    @property
    def encoding(self) -> str:
        """The encoding the first surface counts in (policies are compared in it)."""
        return next(iter(self.budgets.values())).settings.encoding_name

    @property
    def reranks(self) -> bool:
        """Whether a rerank stage runs."""
        return self.reranker is not None and self.reranker.available

    def run(
        self,
        acc: _Accumulator,
        text: str,
        relevant: dict[str, int],
        rationales: dict[str, list[str]],
    ) -> CandidateList:
        """One query, stage by stage; rankings and survival go to `acc`."""
        hybrid = self.hybrid
        lists = [retriever.invoke(text) for retriever in hybrid.retrievers]
        for name, docs in zip(hybrid.resolved_names, lists, strict=True):
            acc.rank(name, docs, relevant)
        candidates = hybrid.fuse(lists, hybrid.k)
        acc.rank("fusion", candidates, relevant)
        if self.reranker is not None and self.reranks:
            candidates = self.reranker.compress_documents(candidates, text)
            acc.rank("rerank", candidates, relevant)
        entered = {document_key(d, hybrid.id_key): d for docs in lists for d in docs}
        for surface, stage in self.budgets.items():
            context = stage.fit(candidates, question=text)
            acc.rank(f"budget:{surface}", _ranked(context, hybrid.id_key), relevant)
            _account(acc, surface, entered, context, relevant)
            _account_evidence(acc, surface, entered, context, rationales)
        return candidates

    def with_and_without(
        self, text: str, relevant: set[str]
    ) -> tuple[CandidateList, CandidateList]:
        """The final candidates of `text`, as retrieved and without `relevant`.

        Each retriever fetches as many more hits as there are relevant documents,
        so its list keeps its depth once they are removed. Where it has no more
        (BM25 returns only hits that share a term) the list as retrieved is cut to
        the same length: both cases hand fusion lists of one length, so neither
        the length nor a statistic over the whole list can give the label away.
        """
        hybrid = self.hybrid
        sizes = hybrid.fetch_k or [None] * len(hybrid.retrievers)
        depths = [
            _depth(retriever, size)
            for retriever, size in zip(hybrid.retrievers, sizes, strict=True)
        ]
        wide = [
            (retriever.invoke(text, k=depth + len(relevant)), depth)
            for retriever, depth in zip(hybrid.retrievers, depths, strict=True)
        ]
        without = [
            [d for d in docs if _doc_id(d) not in relevant][:size]
            for docs, size in wide
        ]
        as_is = [
            docs[: len(shorter)]
            for (docs, _), shorter in zip(wide, without, strict=True)
        ]
        return self._final(as_is, text), self._final(without, text)

    def _final(self, lists: list[list[Document]], text: str) -> CandidateList:
        """Fused, then reranked when a reranker runs: what the budget receives."""
        candidates = self.hybrid.fuse(lists, self.hybrid.k)
        if self.reranker is not None and self.reranks:
            candidates = self.reranker.compress_documents(candidates, text)
        return candidates


def _depth(retriever: BaseRetriever, size: int | None) -> int:
    """How many hits `retriever` hands to fusion: its fetch size, or its own `k`."""
    depth = size or getattr(retriever, "k", None)
    if not isinstance(depth, int):
        raise ValueError(
            f"cannot tell how many hits {type(retriever).__name__} returns; give "
            "the hybrid retriever fetch_k"
        )
    return depth


@dataclass(frozen=True)
class WeakEvidence:
    """The weak-evidence signals measured: each question answerable and not.

    Attributes:
        fit_split: What the combined signal and both thresholds were fitted on.
        n_fit: Questions of the fitting split (each gives two cases).
        n_measured: Questions measured (each gives two cases).
        target_precision: The weak flag's precision the thresholds aim at.
        methods: The single threshold and the combined signal, side by side.
        model: The fitted combined model (as the YAML holds it).
        cv_auroc: Each kind of combined model to its cross-validated AUROC on
            the fitting split (the better one is `model`).
        reliability: Mean predicted and observed share answerable per bin of the
            combined probability on the measured split.
    """

    fit_split: str
    n_fit: int
    n_measured: int
    target_precision: float
    methods: list[FlagQuality]
    model: CombinedEvidence | TreeEvidence
    cv_auroc: dict[str, float]
    reliability: tuple[list[float], list[float]]


def measure_weak_evidence(
    stages: _Stages,
    config: RagBudgetConfig,
    surface: str,
    fit_on: BeirDataset,
    measured: BeirDataset,
    limit: int | None = None,
    progress: ProgressCallback | None = None,
) -> WeakEvidence:
    """Fit the combined signal on `fit_on`, measure both methods on `measured`.

    Each question gives two cases: its candidates as retrieved, and with its
    judged-relevant documents removed from every retriever's list (refilled to
    the same depth, as a corpus without them would answer). Only `fit_on`'s cases
    shape the model and the thresholds.
    """
    settings = config.surface(surface).weak_evidence
    fit_cases = _cases(stages, fit_on, None, settings.thresholds, progress)
    cases = _cases(stages, measured, limit, settings.thresholds, progress)
    names = common_features([*fit_cases.features, *cases.features])
    fitted = fit_combined(
        fit_cases,
        names,
        settings.precision,
        f"{measured.name}, {fit_on.name} ({len(fit_on.queries)} questions)",
    )
    model = fitted.model
    key = ", ".join(sorted(set(fit_cases.top_keys) | set(cases.top_keys)))
    fit_top = _present(fit_cases.top_scores, key)
    top = _present(cases.top_scores, key)
    probs = combined_scores(cases, model)
    return WeakEvidence(
        fit_split=fit_on.name,
        n_fit=len(fit_cases.answerable) // 2,
        n_measured=len(cases.answerable) // 2,
        target_precision=settings.precision,
        methods=[
            flag_quality(
                f"threshold ({key})",
                fit_top,
                fit_cases.answerable,
                top,
                cases.answerable,
                threshold_for_precision(
                    fit_top, fit_cases.answerable, settings.precision
                ),
            ),
            flag_quality(
                f"combined ({model.kind})",
                fitted.held_out,
                fit_cases.answerable,
                probs,
                cases.answerable,
                model.threshold,
            ),
        ],
        model=model,
        cv_auroc=fitted.cv_auroc,
        reliability=reliability(probs, cases.answerable),
    )


def _present(scores: list[float | None], key: str) -> list[float]:
    """Top scores, every case having one (else the baseline would lose cases)."""
    if any(score is None for score in scores):
        raise ValueError(f"some candidate lists carry no {key!r}")
    return [score for score in scores if score is not None]


def _cases(
    stages: _Stages,
    dataset: BeirDataset,
    limit: int | None,
    thresholds: dict[str, float | None],
    progress: ProgressCallback | None,
) -> Cases:
    """Both cases of every judged question of `dataset` (first `limit`)."""
    features: list[dict[str, float]] = []
    tops: list[float | None] = []
    top_keys: list[str] = []
    labels: list[bool] = []
    queries = list(dataset.queries.items())[:limit]
    keys = [key for key, threshold in thresholds.items() if threshold is not None]
    for done, (query_id, text) in enumerate(queries, start=1):
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        for answerable, candidates in zip(
            (True, False), stages.with_and_without(text, relevant), strict=True
        ):
            features.append(signal_features(candidates, text))
            key, top = next(
                ((k, s) for k in keys if (s := top_score(candidates, k)) is not None),
                ("none", None),
            )
            tops.append(top)
            top_keys.append(key)
            labels.append(answerable)
        if progress:
            progress(f"weak evidence ({dataset.name})", done, len(queries))
    return Cases(features, tops, top_keys, labels)


def _report(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    stages: _Stages,
    acc: _Accumulator,
    k: int,
    n_queries: int,
    budgets: Sequence[int],
) -> EvalReport:
    names = stages.hybrid.resolved_names
    quality = [_quality(name, acc, k) for name in [*names, "fusion"]]
    if "rerank" in acc.rankings:
        quality.append(_quality("rerank", acc, k))
    else:
        reason = "no reranker" if stages.reranker is None else "model unavailable"
        quality.append(StageQuality("rerank", "skipped", note=reason))
    quality += [_quality(f"budget:{surface}", acc, k) for surface in stages.budgets]
    retrieval = config.retrieval
    return EvalReport(
        dataset=dataset.name,
        n_queries=n_queries,
        n_documents=len(dataset.corpus),
        k=k,
        quality=quality,
        survival=[
            _survival(acc, surface, stage) for surface, stage in stages.budgets.items()
        ],
        policy_budgets=list(budgets),
        policy_survival=_shares(acc.policy_hits, acc.policy_gold),
        policy_encoding=stages.encoding,
        evidence_gold=acc.evidence_gold,
        evidence_survival=_shares(acc.evidence_hits, acc.evidence_gold),
        mid_sentence_cuts={p: n for p, n in acc.bad_cuts.items() if p != "naive slice"},
        settings={
            "fusion_k": retrieval.k,
            "fetch_k": [retrieval.sparse.fetch_k, retrieval.dense.fetch_k],
            "weights": [retrieval.sparse.weight, retrieval.dense.weight],
            "fusion": retrieval.fusion,
            "rrf_c": retrieval.rrf_c,
            "rerank": config.rerank.model if stages.reranks else None,
        },
    )


def _shares(hits: dict[str, list[int]], total: int) -> dict[str, list[float | None]]:
    return {
        policy: [n / total if total else None for n in row]
        for policy, row in hits.items()
    }


def _ranked(context: BudgetedContext, id_key: str | None) -> list[Document]:
    """The kept passages in the budget's input order (the prompt may use `edges`)."""
    by_key = {document_key(doc, id_key): doc for doc in context.documents}
    return [by_key[key] for key in context.report.kept_ids]


def _account(
    acc: _Accumulator,
    surface: str,
    entered: dict[str, Document],
    context: BudgetedContext,
    relevant: dict[str, int],
) -> None:
    """Count gold passages kept and dropped, tokens, and silent drops (must be 0)."""
    report = context.report
    accounted = report.kept_ids + [record.key for record in report.drops]
    missing = set(entered) - set(accounted)
    acc.silent[surface] += len(missing) + len(accounted) - len(set(accounted))
    acc.gold_retrieved[surface] += sum(_doc_id(d) in relevant for d in entered.values())
    acc.gold_kept[surface] += sum(_doc_id(d) in relevant for d in context.documents)
    dropped = acc.gold_dropped.setdefault(surface, Counter())
    for record in report.drops:
        if _doc_id(record.document) in relevant:
            dropped[f"{record.stage}/{record.reason}"] += 1
    acc.tokens.setdefault(surface, []).append(report.tokens_used)
    acc.over_budget[surface] += report.over_budget


def _account_evidence(
    acc: _Accumulator,
    surface: str,
    entered: dict[str, Document],
    context: BudgetedContext,
    rationales: dict[str, list[str]],
) -> None:
    """Count gold passages with marked evidence, and those that kept all of it.

    Kept whole, or in the sentences a shortened passage kept.
    """
    found = {_doc_id(d) for d in entered.values()} & set(rationales)
    acc.surface_evidence[surface] += len(found)
    kept_text = {_doc_id(d): d.page_content for d in context.documents}
    acc.surface_evidence_kept[surface] += sum(
        doc_id in kept_text
        and all(sentence in kept_text[doc_id] for sentence in rationales[doc_id])
        for doc_id in found
    )


def _compare_policies(
    acc: _Accumulator,
    candidates: Sequence[Document],
    relevant: dict[str, int],
    rationales: dict[str, list[str]],
    budgets: Sequence[int],
    encoding: str,
    id_key: str | None,
    question: str,
) -> None:
    """Gold passages kept whole, and gold evidence kept, by each policy and budget.

    A naive slice may keep the evidence sentences of a passage it cuts mid-text;
    `trim` may keep them in a passage it shortens to whole sentences.
    """
    gold = {i for i, doc in enumerate(candidates) if _doc_id(doc) in relevant}
    if not gold:
        return
    evidence = {
        i: rationales[_doc_id(candidates[i])]
        for i in gold
        if _doc_id(candidates[i]) in rationales
    }
    acc.policy_gold += len(gold)
    acc.evidence_gold += len(evidence)
    for policy, result in _every_policy(
        candidates, budgets, encoding, question, evidence, id_key
    ):
        for position, (ids, evidence_ids) in enumerate(
            zip(result.passages, result.evidence, strict=True)
        ):
            acc.policy_hits[policy][position] += len(gold.intersection(ids))
            acc.evidence_hits[policy][position] += len(evidence_ids)
        acc.bad_cuts[policy] = acc.bad_cuts.get(policy, 0) + sum(result.bad_cuts)


def _every_policy(
    candidates: Sequence[Document],
    budgets: Sequence[int],
    encoding: str,
    question: str,
    evidence: dict[int, list[str]],
    id_key: str | None,
) -> Iterator[tuple[str, PolicySurvival]]:
    """Each packing policy on the same candidate list, at every budget."""
    for policy in POLICIES:
        yield (
            policy,
            policy_survival(
                candidates,
                policy,
                budgets,
                encoding,
                question=question,
                evidence=evidence,
                id_key=id_key,
            ),
        )


def _quality(stage: str, acc: _Accumulator, k: int) -> StageQuality:
    rows = acc.rankings.get(stage, [])
    return StageQuality(
        stage,
        "ran",
        hit=_mean([hit_at_k(r, rel, k) for r, rel in rows]),
        mrr=_mean([mrr_at_k(r, rel, 10) for r, rel in rows]),
        recall=_mean([recall_at_k(r, rel, k) for r, rel in rows]),
        ndcg=_mean([ndcg_at_k(r, rel, 10) for r, rel in rows]),
    )


def _survival(acc: _Accumulator, surface: str, stage: ContextBudget) -> Survival:
    tokens = acc.tokens.get(surface, [])
    return Survival(
        surface=surface,
        max_tokens=stage.settings.max_tokens,
        max_docs=stage.settings.max_docs,
        gold_retrieved=acc.gold_retrieved[surface],
        gold_kept=acc.gold_kept[surface],
        gold_dropped=dict(acc.gold_dropped.get(surface, Counter())),
        silent_drops=acc.silent[surface],
        tokens_mean=_mean([float(t) for t in tokens]),
        tokens_p50=float(statistics.median(tokens)) if tokens else 0.0,
        tokens_max=max(tokens, default=0),
        over_budget=acc.over_budget[surface],
        evidence_retrieved=acc.surface_evidence[surface],
        evidence_kept=acc.surface_evidence_kept[surface],
    )


@dataclass(frozen=True)
class ChunkedSurvival:
    """Evidence survival with the corpus indexed in chunks of `chunk_size` tokens.

    Attributes:
        chunk_size: Tokens per chunk (the index's splitter).
        k: Chunks retrieved per query (the candidate list every policy packs).
        evidence_gold: Gold documents with marked evidence that had a chunk among
            the candidates.
        split_evidence: Of those, documents with an evidence sentence that no
            single retrieved chunk holds whole (it cannot survive any policy).
        evidence_survival: Per policy, the share of `evidence_gold` whose every
            evidence sentence is in the prompt, at each budget.
        mid_sentence_cuts: Per policy, kept texts that were not whole sentences of
            their chunk (must be 0).
    """

    chunk_size: int
    k: int
    evidence_gold: int
    split_evidence: int
    evidence_survival: dict[str, list[float | None]]
    mid_sentence_cuts: dict[str, int]


def chunk_k(k: int, chunk_size: int, reference: int = 256) -> int:
    """Chunks to retrieve: about the tokens of `k` passages of `reference` tokens."""
    return max(k, math.ceil(k * reference / chunk_size))


def evaluate_chunked(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    chunk_size: int,
    *,
    limit: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    progress: ProgressCallback | None = None,
) -> ChunkedSurvival:
    """Evidence survival by policy and budget over the corpus split into chunks.

    The corpus goes through a `HybridIndex` (cached on disk by content, model and
    chunking), so a document's evidence may be spread over several chunks: it
    survives when each of its evidence sentences is whole in a kept chunk.

    Args:
        dataset: A BEIR dataset with marked evidence (SciFact).
        config: The configuration; `index.chunk_size` is replaced by `chunk_size`.
        chunk_size: Tokens per chunk.
        limit: Measure the first `limit` queries only.
        budgets: The token budgets to compare the policies at.
        progress: Called with (stage, done, total) as work advances.

    Returns:
        The evidence survival table for this chunk size.
    """
    index = _chunk_index(dataset, config, chunk_size, progress)
    k = chunk_k(config.retrieval.k, chunk_size)
    retriever = index.as_retriever(k=k)
    encoding = build_budget(next(iter(config.surfaces)), config).settings.encoding_name
    hits = {policy: [0] * len(budgets) for policy in POLICIES}
    cuts = dict.fromkeys(POLICIES, 0)
    gold_total = split_total = 0
    queries = list(dataset.queries.items())[:limit]
    answered = StageProgress(
        progress, f"queries ({chunk_size}-token chunks)", len(queries)
    ).start()
    for query_id, text in queries:
        candidates = retriever.invoke(text)
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        rationales = dataset.rationales.get(query_id, {})
        needs, split = _evidence_by_chunk(candidates, relevant, rationales)
        gold_total += len(needs) + len(split)
        split_total += len(split)
        evidence = {i: s for chunks in needs.values() for i, s in chunks.items()}
        for policy, result in _every_policy(
            candidates, budgets, encoding, text, evidence, retriever.id_key
        ):
            for position, kept in enumerate(result.evidence):
                kept_set = set(kept)
                hits[policy][position] += sum(
                    set(chunks) <= kept_set for chunks in needs.values()
                )
            cuts[policy] += sum(result.bad_cuts)
        answered.advance()
    index.close()
    return ChunkedSurvival(
        chunk_size=chunk_size,
        k=k,
        evidence_gold=gold_total,
        split_evidence=split_total,
        evidence_survival=_shares(hits, gold_total),
        mid_sentence_cuts={p: n for p, n in cuts.items() if p != "naive slice"},
    )


def _evidence_by_chunk(
    candidates: Sequence[Document],
    relevant: set[str],
    rationales: dict[str, list[str]],
) -> tuple[dict[str, dict[int, list[str]]], set[str]]:
    """Per gold document found: which candidate chunk holds each evidence sentence.

    Each sentence goes to the first (best-ranked) chunk holding it whole; a
    document with a sentence no chunk holds whole is returned apart.
    """
    found = {_doc_id(d) for d in candidates} & relevant & set(rationales)
    needs: dict[str, dict[int, list[str]]] = {}
    split: set[str] = set()
    for doc_id in found:
        chunks: dict[int, list[str]] = {}
        for sentence in rationales[doc_id]:
            holder = next(
                (
                    i
                    for i, d in enumerate(candidates)
                    if _doc_id(d) == doc_id and sentence in d.page_content
                ),
                None,
            )
            if holder is None:
                split.add(doc_id)
                break
            chunks.setdefault(holder, []).append(sentence)
        else:
            needs[doc_id] = chunks
    return needs, split


def _chunk_index(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    chunk_size: int,
    progress: ProgressCallback | None,
) -> HybridIndex:
    """The corpus in a HybridIndex of `chunk_size`-token chunks, built once."""
    overlap = min(config.index.chunk_overlap, chunk_size // 4)
    settings = config.index.model_copy(
        update={"chunk_size": chunk_size, "chunk_overlap": overlap}
    )
    chunked = config.model_copy(update={"index": settings})
    key = corpus_fingerprint(
        dataset.corpus, f"{config.embedding.model} {settings.model_dump_json()}"
    )
    folder = cache_root() / f"{dataset.name}-chunks{chunk_size}-{key}"
    complete = folder / "ragbudget_complete"
    index = HybridIndex.open(folder / "index", chunked)
    if not complete.is_file():
        index.upsert(
            dataset.corpus, progress=prefixed(progress, f"{chunk_size}-token chunks: ")
        )
        atomic_write_text(complete, str(index.chunk_count))
    return index
