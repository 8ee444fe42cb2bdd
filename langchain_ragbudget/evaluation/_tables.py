"""An evaluation's report and its tables and images: rows built once, drawn three ways.

Each table is built once (`report_tables`); the terminal, Markdown and the
notebook only lay it out. Plots are drawn on a bare matplotlib `Figure`, not
pyplot, so they neither switch a notebook's backend nor leave a figure open.
"""

from __future__ import annotations

import io
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from langchain_ragbudget.errors import MissingExtraError, require
from langchain_ragbudget.evaluation._tuning import FOLDS, Interval, TuneReport
from langchain_ragbudget.ledger._html import (
    display,
    element,
    key_values,
    png_image,
    table,
)

if TYPE_CHECKING:
    from langchain_ragbudget.evaluation._chunked import ChunkedSurvival
    from langchain_ragbudget.evaluation._weak_evidence import WeakEvidence


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
        """Share of the gold passages with marked evidence that kept all of it."""
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
        quality: Mean metrics per stage (a skipped stage says why).
        survival: Per surface: gold passages retrieved, kept and dropped, silent
            drops (must be 0), tokens used.
        policy_budgets: The token budgets at which packing policies were compared.
        policy_survival: Per policy, the share of gold passages kept at each budget.
        policy_encoding: The tiktoken encoding the policies were compared in.
        settings: The retrieval settings measured.
        evidence_gold: Gold passages with marked evidence sentences.
        evidence_survival: Per policy and budget, the share of those with every
            evidence sentence in the prompt.
        mid_sentence_cuts: Per policy, kept texts not whole sentences (must be 0;
            the slice, which cuts anywhere by design, is not counted).
        chunked: Evidence survival per chunk size (`evaluate_chunked`).
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
            weak, stamp = self.weak_evidence, self.weak_evidence.calibrated_with
            data["weak_evidence"]["model"] = weak.model.model_dump(exclude_none=True)
            data["weak_evidence"]["calibrated_with"] = stamp and stamp.model_dump()
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
    """One table of a report as text: a caption, Markdown's lead-in, header, rows."""

    title: str
    lead: str
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
    """What a chunked evidence table measured: chunker, k, nDCG, gold, ceiling, cuts."""
    ndcg = "-" if item.ndcg_at_10 is None else f"{item.ndcg_at_10:.3f}"
    joined = "" if item.joined else ", neighbours not joined"
    added = (
        f" + {item.neighbours_added:.1f} neighbours ({item.neighbours} either side)"
        if item.neighbours
        else ""
    )
    return (
        f"{item.chunk_size}-token chunks ({item.chunker}{joined}), {item.k} "
        f"retrieved{added}, document nDCG@10 {ndcg}: evidence kept of "
        f"{item.evidence_gold} gold documents found ({item.split_evidence} with an "
        f"evidence sentence no retrieved chunk holds whole, {item.split_long} of "
        "them longer than a chunk); cut mid-sentence: "
        + ", ".join(f"{p} {n}" for p, n in item.mid_sentence_cuts.items())
    )


def overhead_rows(item: ChunkedSurvival) -> list[list[str]]:
    """Rows of the share of the context spent on headers, quotes and markers."""
    return [
        [f"{policy}: overhead", *(_pct(v) for v in values)]
        for policy, values in item.overhead.items()
        if policy == "trim"
    ]


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
        f"{weak.target_precision:.0%}; the combined (logistic) model's grouped "
        f"5-fold cross-validated AUROC there {weak.cv_auroc:.3f}"
    )


def report_tables(report: EvalReport) -> list[ReportTable]:
    """Every table of the report: quality, survival, policies, evidence, chunks."""
    tables = _stage_tables(report)
    if report.weak_evidence is not None:
        tables.append(_weak_table(report.weak_evidence))
    return tables + _chunked_tables(report)


def _stage_tables(report: EvalReport) -> list[ReportTable]:
    """Quality per stage, survival per surface, and the policies by budget."""
    budgets = budget_header(report)
    right = tuple(range(1, len(budgets)))
    tables = [
        ReportTable(
            f"{report.dataset}: quality per stage ({report.n_queries} queries)",
            "Quality per stage (mean over queries; a stage that did not run says so):",
            quality_header(report.k),
            quality_rows(report),
            (1, 2, 3, 4),
        ),
        ReportTable(
            "gold-passage survival into the prompt",
            "Gold passages (judged relevant) that the retrievers found, and where they "
            "went. `silent drops` counts candidates in neither the prompt nor the drop "
            "records; it must be 0.",
            SURVIVAL_HEADER,
            survival_rows(report),
        ),
        ReportTable(
            "gold survival by packing policy and token budget "
            f"({report.policy_encoding})",
            "Packing policies on the same candidate lists, gold survival by token "
            f"budget ({report.policy_encoding}, no max_docs):",
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
                f"The same, counting evidence instead of whole passages: of the "
                f"{report.evidence_gold} gold passages whose evidence sentences the "
                "dataset marks, the share whose evidence sentences are all in the "
                "context (a sliced passage may keep them in its head, a trimmed one in "
                f"the sentences it kept); {mid_sentence_note(report)}:",
                budgets,
                budget_rows(report.evidence_survival),
                right,
            )
        )
    return tables


def _weak_table(weak: WeakEvidence) -> ReportTable:
    """The weak-evidence methods side by side."""
    return ReportTable(
        weak_caption(weak),
        f"The weak-evidence signal: {weak_caption(weak)}. AUROC: answerable "
        "questions scored above unanswerable ones; precision and recall of the weak "
        "flag on this 50/50 mix at the threshold chosen on the fitting split:",
        WEAK_HEADER,
        weak_rows(weak),
        (1, 2, 3, 4, 5),
    )


def _chunked_tables(report: EvalReport) -> list[ReportTable]:
    """Evidence survival by policy and budget, one table per chunk size."""
    budgets = budget_header(report)
    return [
        ReportTable(
            chunked_caption(item),
            f"The corpus indexed in {chunked_caption(item)}:",
            budgets,
            budget_rows(item.evidence_survival) + overhead_rows(item),
            tuple(range(1, len(budgets))),
        )
        for item in report.chunked
    ]


def rich_tables(report: EvalReport) -> list[Table]:
    """The report's tables for the terminal."""
    tables = []
    for item in report_tables(report):
        drawn = Table(title=item.title)
        for i, column in enumerate(item.header):
            drawn.add_column(column, justify="right" if i in item.numeric else "left")
        for row in item.rows:
            drawn.add_row(*row)
        tables.append(drawn)
    return tables


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _markdown_section(item: ReportTable) -> list[str]:
    return ["", item.lead, "", _markdown_table(item.header, item.rows)]


def to_markdown(
    report: EvalReport,
    command: str,
    plot: str | None = None,
    calibration_plot: str | None = None,
) -> str:
    """The quality section of BENCHMARKS.md for this report."""
    parts = [
        f"Command: `{command}`. {report.n_queries} queries, {report.n_documents} "
        f"documents. Settings: {report.settings}. Nothing was tuned on these qrels."
    ]
    for item in [*_stage_tables(report), *_chunked_tables(report)]:
        parts += _markdown_section(item)
    if plot:
        parts += ["", f"![gold survival against the budget]({plot})"]
    if report.weak_evidence is not None:
        parts += _markdown_section(_weak_table(report.weak_evidence))
        if calibration_plot:
            parts += ["", f"![reliability of the combined signal]({calibration_plot})"]
    return "\n".join(parts) + "\n"


def _points(
    budgets: list[int], values: list[float | None]
) -> tuple[list[int], list[float]]:
    pairs = [(b, v) for b, v in zip(budgets, values, strict=True) if v is not None]
    return [b for b, _ in pairs], [v for _, v in pairs]


def survival_png(report: EvalReport) -> bytes:
    """The survival plot as PNG: gold kept against the token budget, per policy.

    Text from the data is drawn as written (a `$` is not read as math).

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


def plot_survival(report: EvalReport, path: Path) -> Path:
    """Write the survival plot (PNG) to `path`: gold kept against the budget.

    Raises:
        MissingExtraError: matplotlib (the `eval` extra) is not installed.
    """
    data = survival_png(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def plot_calibration(weak: WeakEvidence, path: Path) -> Path:
    """Write a PNG reliability diagram of the combined weak-evidence signal."""
    require("matplotlib", "eval", "the calibration plot")
    from matplotlib.figure import Figure

    predicted, observed = weak.reliability
    figure = Figure(figsize=(4.8, 4.4), dpi=120)
    axis = figure.subplots()
    axis.plot([0, 1], [0, 1], linestyle=":", color="grey", label="perfectly calibrated")
    axis.plot(predicted, observed, marker="o", label="combined signal")
    axis.axvline(
        weak.model.threshold, linestyle="--", color="tab:red", label="weak below"
    )
    axis.set_xlabel("predicted probability the answer is among the candidates")
    axis.set_ylabel("observed share answerable")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, 1.02)
    axis.set_title(f"weak evidence: reliability ({weak.n_measured} questions x 2)")
    axis.grid(True, alpha=0.3)
    axis.legend(loc="upper left")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    return path


def _signed(value: float) -> str:
    return f"{value:+.4f}"


def _interval(interval: Interval, report: TuneReport) -> str:
    return (
        f"{_signed(interval.mean)} ({report.confidence:.0%} CI "
        f"{_signed(interval.low)} .. {_signed(interval.high)})"
    )


def tune_table(report: TuneReport) -> Table:
    """The current setting, the best of each method, and which one won."""
    table = Table(
        title=f"{report.dataset}: fusion tuned on split {report.tuned_split!r} "
        f"({report.n_queries} queries, {report.grid_size} settings), measured on "
        f"split {report.measured_split!r}"
    )
    for column in ("setting", "nDCG@10", "vs current", ""):
        table.add_column(column, justify="left" if column == "setting" else "right")
    rows = [("current", report.current), *(("", s) for s in report.by_method)]
    for label, scored in rows:
        marks = [label] if label else []
        if scored.setting == report.best.setting:
            marks.append("best")
        table.add_row(
            scored.setting.describe(),
            f"{scored.ndcg:.4f}",
            _signed(scored.ndcg - report.current.ndcg),
            ", ".join(dict.fromkeys(marks)),
        )
    return table


def tune_lines(report: TuneReport) -> list[str]:
    """The gain with its interval, the held-out estimate, and where to measure."""
    split = repr(report.tuned_split)
    lines = [
        f"gain of the best over current on split {split}: "
        f"{_interval(report.gain, report)}; paired bootstrap over "
        f"{report.n_queries} queries, {report.resamples} resamples",
    ]
    if report.held_out is not None and report.held_out_gain is not None:
        lines.append(
            f"held out ({FOLDS}-fold cross-validation on split {split}, each fold "
            f"tuned on the others): nDCG@10 {report.held_out:.4f}, gain "
            f"{_interval(report.held_out_gain, report)}"
        )
    lines.append(
        f"measured on the queries that tuned it (split {split}): the gain above is "
        "optimistic; measure on the test split with `ragbudget eval DATA --config "
        "TUNED.yml`"
    )
    return lines
