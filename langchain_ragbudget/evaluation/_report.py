"""Evaluation reports: rich tables, a Markdown section, a survival plot (PNG).

The rows, titles and plot come from `evaluation` (which the notebook display
draws too); this module only lays them out for the terminal and for files.

And the report of `ragbudget tune`: the settings compared and the gain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from rich.table import Table

from langchain_ragbudget._disk import atomic_write_text
from langchain_ragbudget.errors import require
from langchain_ragbudget.evaluation._harness import (
    SURVIVAL_HEADER,
    WEAK_HEADER,
    EvalReport,
    WeakEvidence,
    budget_header,
    budget_rows,
    chunked_caption,
    mid_sentence_note,
    quality_header,
    quality_rows,
    report_tables,
    survival_png,
    survival_rows,
    weak_caption,
    weak_rows,
)
from langchain_ragbudget.evaluation._tuning import FOLDS, Interval, TuneReport

QUALITY_START = "<!-- ragbudget-eval:start -->"
QUALITY_END = "<!-- ragbudget-eval:end -->"


def rich_tables(report: EvalReport) -> list[Table]:
    """The report's tables for the terminal."""
    tables = []
    for item in report_tables(report):
        table = Table(title=item.title)
        for i, column in enumerate(item.header):
            table.add_column(column, justify="right" if i in item.numeric else "left")
        for row in item.rows:
            table.add_row(*row)
        tables.append(table)
    return tables


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
    budgets = budget_header(report)
    parts = [
        f"Command: `{command}`. {report.n_queries} queries, {report.n_documents} "
        f"documents. Settings: {report.settings}. Nothing was tuned on these qrels.",
        "",
        "Quality per stage (mean over queries; a stage that did not run says so):",
        "",
        _markdown_table(quality_header(report.k), quality_rows(report)),
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
        _markdown_table(budgets, budget_rows(report.policy_survival)),
    ]
    if report.evidence_gold:
        parts += [
            "",
            f"The same, counting evidence instead of whole passages: of the "
            f"{report.evidence_gold} gold passages whose evidence sentences the "
            "dataset marks, the share whose evidence sentences are all in the "
            "context (a sliced passage may keep them in its head, a trimmed one in "
            f"the sentences it kept); {mid_sentence_note(report)}:",
            "",
            _markdown_table(budgets, budget_rows(report.evidence_survival)),
        ]
    for item in report.chunked:
        parts += [
            "",
            f"The corpus indexed in {chunked_caption(item)}:",
            "",
            _markdown_table(budgets, budget_rows(item.evidence_survival)),
        ]
    if plot:
        parts += ["", f"![gold survival against the budget]({plot})"]
    if report.weak_evidence is not None:
        parts += [
            "",
            f"The weak-evidence signal: {weak_caption(report.weak_evidence)}. AUROC: "
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
    atomic_write_text(path, text)


def plot_survival(report: EvalReport, path: Path) -> Path:
    """Write the survival plot (PNG) to `path`: gold kept against the budget.

    Raises:
        MissingExtraError: matplotlib (the `eval` extra) is not installed.
    """
    data = survival_png(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
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


def plot_calibration(weak: WeakEvidence, path: Path) -> Path:
    """Write a PNG reliability diagram of the combined weak-evidence signal.

    Drawn on a bare matplotlib `Figure`, as the survival plot is, so it does not
    switch a notebook's plotting backend.
    """
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


class _Node(dict[str, Any]):
    """A tree node, written on one line: `{feature: x, threshold: 0.4, ...}`."""


class _ModelDumper(yaml.SafeDumper):
    """The safe dumper, with each tree node as one flow mapping."""


_ModelDumper.add_representer(
    _Node,
    lambda dumper, node: dumper.represent_mapping(
        "tag:yaml.org,2002:map", node, flow_style=True
    ),
)


def weak_evidence_yaml(weak: WeakEvidence, surfaces: list[str]) -> str:
    """A YAML to merge over a configuration: the combined method on `surfaces`.

    A tree model is written one node per line, so a tree reads top to bottom.
    """
    model = weak.model.model_dump(exclude_none=True)
    for tree in model.get("trees", []):
        tree["nodes"] = [_Node(node) for node in tree["nodes"]]
    section = {
        "method": "combined",
        "precision": weak.target_precision,
        "combined": model,
    }
    header = (
        f"# written by `ragbudget eval`: the combined weak-evidence signal, "
        f"{weak_caption(weak)}\n"
    )
    body = {"surfaces": {name: {"weak_evidence": section} for name in surfaces}}
    return header + yaml.dump(body, Dumper=_ModelDumper, sort_keys=False, width=1_000)
