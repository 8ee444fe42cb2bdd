"""Evaluation reports: rich tables, a Markdown section, a survival plot (PNG).

The rows, titles and plot come from `evaluation` (which the notebook display
draws too); this module only lays them out for the terminal and for files.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from langchain_ragbudget.evaluation import (
    SURVIVAL_HEADER,
    EvalReport,
    budget_header,
    budget_rows,
    chunked_caption,
    mid_sentence_note,
    quality_header,
    quality_rows,
    report_tables,
    survival_png,
    survival_rows,
)

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


def to_markdown(report: EvalReport, command: str, plot: str | None = None) -> str:
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


def plot_survival(report: EvalReport, path: Path) -> Path:
    """Write the survival plot (PNG) to `path`: gold kept against the budget.

    Raises:
        MissingExtraError: matplotlib (the `eval` extra) is not installed.
    """
    data = survival_png(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
