"""Evaluation reports: rich tables, a Markdown section, a survival plot (PNG)."""

from __future__ import annotations

from pathlib import Path

import yaml
from rich.table import Table

from langchain_ragbudget.errors import require
from langchain_ragbudget.evaluation import ChunkedSurvival, EvalReport, WeakEvidence

QUALITY_START = "<!-- ragbudget-eval:start -->"
QUALITY_END = "<!-- ragbudget-eval:end -->"


def _num(value: float | None, digits: int = 4) -> str:
    return "skipped" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


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


def _budget_rows(by_policy: dict[str, list[float | None]]) -> list[list[str]]:
    return [
        [policy, *(_pct(v) for v in values)] for policy, values in by_policy.items()
    ]


def policy_rows(report: EvalReport) -> list[list[str]]:
    """One row per packing policy: gold survival at each budget."""
    return _budget_rows(report.policy_survival)


def evidence_rows(report: EvalReport) -> list[list[str]]:
    """One row per packing policy: gold evidence survival at each budget."""
    return _budget_rows(report.evidence_survival)


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


def _weak_caption(weak: WeakEvidence) -> str:
    return (
        f"weak evidence: {weak.n_measured} questions measured twice (as is, and "
        f"with their judged-relevant documents removed); fitted on {weak.fit_split} "
        f"({weak.n_fit} questions) for a weak-flag precision of "
        f"{weak.target_precision:.0%}"
    )


def _budget_table(title: str, budgets: list[int], rows: list[list[str]]) -> Table:
    table = Table(title=title)
    table.add_column("policy")
    for budget in budgets:
        table.add_column(str(budget), justify="right")
    for row in rows:
        table.add_row(*row)
    return table


def rich_tables(report: EvalReport) -> list[Table]:
    """The three tables for the terminal."""
    k = report.k
    quality = Table(
        title=f"{report.dataset}: quality per stage ({report.n_queries} queries)"
    )
    for column in ("stage", f"hit@{k}", "MRR@10", f"recall@{k}", "nDCG@10"):
        quality.add_column(column, justify="left" if column == "stage" else "right")
    for row in quality_rows(report):
        quality.add_row(*row)
    survival = Table(title="gold-passage survival into the prompt")
    for column in SURVIVAL_HEADER:
        survival.add_column(column)
    for row in survival_rows(report):
        survival.add_row(*row)
    tables = [
        quality,
        survival,
        _budget_table(
            "gold survival by packing policy and token budget "
            f"({report.policy_encoding})",
            report.policy_budgets,
            policy_rows(report),
        ),
    ]
    if report.evidence_gold:
        tables.append(
            _budget_table(
                "gold evidence sentences in the context, by policy and token budget "
                f"({report.evidence_gold} gold passages with marked evidence; "
                f"{_cuts(report)})",
                report.policy_budgets,
                evidence_rows(report),
            )
        )
    if report.weak_evidence is not None:
        weak = Table(title=_weak_caption(report.weak_evidence))
        for column in WEAK_HEADER:
            weak.add_column(column, justify="left" if column == "method" else "right")
        for row in weak_rows(report.weak_evidence):
            weak.add_row(*row)
        tables.append(weak)
    tables += [
        _budget_table(
            _chunked_caption(item),
            report.policy_budgets,
            _budget_rows(item.evidence_survival),
        )
        for item in report.chunked
    ]
    return tables


def _chunked_caption(item: ChunkedSurvival) -> str:
    return (
        f"{item.chunk_size}-token chunks, {item.k} retrieved: evidence kept of "
        f"{item.evidence_gold} gold documents found ({item.split_evidence} with an "
        "evidence sentence no retrieved chunk holds whole); cut mid-sentence: "
        + ", ".join(f"{p} {n}" for p, n in item.mid_sentence_cuts.items())
    )


def _cuts(report: EvalReport) -> str:
    """The mid-sentence count per policy, for the evidence table's caption."""
    counts = ", ".join(f"{p} {n}" for p, n in report.mid_sentence_cuts.items())
    return f"kept texts cut mid-sentence: {counts}"


def _markdown_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def to_markdown(
    report: EvalReport,
    command: str,
    plot: str | None = None,
    calibration_plot: str | None = None,
) -> str:
    """The quality section of BENCHMARKS.md for this report."""
    k = report.k
    parts = [
        f"Command: `{command}`. {report.n_queries} queries, {report.n_documents} "
        f"documents. Settings: {report.settings}. Nothing was tuned on these qrels.",
        "",
        "Quality per stage (mean over queries; a stage that did not run says so):",
        "",
        _markdown_table(
            ["stage", f"hit@{k}", "MRR@10", f"recall@{k}", "nDCG@10"],
            quality_rows(report),
        ),
        "",
        "Gold passages (judged relevant) that the retrievers found, and where they "
        "went. `silent drops` counts candidates in neither the prompt nor the drop "
        "records; it must be 0.",
        "",
        _markdown_table(SURVIVAL_HEADER, survival_rows(report)),
        "",
        f"Packing policies on the same candidate lists, gold survival by token budget "
        f"({report.policy_encoding}, no max_docs):",
        "",
        _markdown_table(
            ["policy", *map(str, report.policy_budgets)], policy_rows(report)
        ),
    ]
    if report.evidence_gold:
        parts += [
            "",
            f"The same, counting evidence instead of whole passages: of the "
            f"{report.evidence_gold} gold passages whose evidence sentences the "
            "dataset marks, the share whose evidence sentences are all in the "
            "context (a sliced passage may keep them in its head, a trimmed one in "
            f"the sentences it kept); {_cuts(report)}:",
            "",
            _markdown_table(
                ["policy", *map(str, report.policy_budgets)], evidence_rows(report)
            ),
        ]
    for item in report.chunked:
        parts += [
            "",
            f"The corpus indexed in {_chunked_caption(item)}:",
            "",
            _markdown_table(
                ["policy", *map(str, report.policy_budgets)],
                _budget_rows(item.evidence_survival),
            ),
        ]
    if plot:
        parts += ["", f"![gold survival against the budget]({plot})"]
    if report.weak_evidence is not None:
        parts += [
            "",
            f"The weak-evidence signal: {_weak_caption(report.weak_evidence)}. AUROC: "
            "answerable questions scored above unanswerable ones; precision and "
            "recall of the weak flag on this 50/50 mix at the threshold chosen on "
            "the fitting split:",
            "",
            _markdown_table(WEAK_HEADER, weak_rows(report.weak_evidence)),
        ]
        if calibration_plot:
            parts += ["", f"![reliability of the combined signal]({calibration_plot})"]
    return "\n".join(parts) + "\n"


def update_section(path: Path, section: str) -> None:
    """Replace the text between the eval markers of `path` (append if absent)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{QUALITY_START}\n{section}{QUALITY_END}"
    if QUALITY_START in text and QUALITY_END in text:
        head, rest = text.split(QUALITY_START, 1)
        tail = rest.split(QUALITY_END, 1)[1]
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


def _points(
    budgets: list[int], values: list[float | None]
) -> tuple[list[int], list[float]]:
    pairs = [(b, v) for b, v in zip(budgets, values, strict=True) if v is not None]
    return [b for b, _ in pairs], [v for _, v in pairs]


def plot_survival(report: EvalReport, path: Path) -> Path:
    """Write a PNG: gold survival against the token budget, one line per policy."""
    require("matplotlib", "eval", "the survival plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.0), dpi=120)
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
    axis.set_xlabel(f"context budget (tokens, {report.policy_encoding})")
    axis.set_ylabel(
        "gold kept whole (evidence kept: dashed)"
        if report.evidence_gold
        else "gold passages kept whole"
    )
    axis.set_ylim(0, 1.02)
    axis.set_title(f"{report.dataset}: does the gold passage survive the budget?")
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_calibration(weak: WeakEvidence, path: Path) -> Path:
    """Write a PNG reliability diagram of the combined weak-evidence signal."""
    require("matplotlib", "eval", "the calibration plot")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    predicted, observed = weak.reliability
    figure, axis = plt.subplots(figsize=(4.8, 4.4), dpi=120)
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
    plt.close(figure)
    return path


def weak_evidence_yaml(weak: WeakEvidence, surfaces: list[str]) -> str:
    """A YAML to merge over a configuration: the combined method on `surfaces`."""
    section = {
        "method": "combined",
        "precision": weak.target_precision,
        "combined": weak.model.model_dump(),
    }
    header = (
        f"# written by `ragbudget eval`: the combined weak-evidence signal, "
        f"{_weak_caption(weak)}\n"
    )
    body = {"surfaces": {name: {"weak_evidence": section} for name in surfaces}}
    return header + yaml.safe_dump(body, sort_keys=False)
