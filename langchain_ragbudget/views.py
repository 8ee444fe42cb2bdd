"""Terminal views of one question through the pipeline: rendering only.

The evidence table (every candidate, kept or dropped with its stage and reason), the
prompt that is sent, and the answer with its warnings. What is shown is computed by
`pipeline.explain`; the objects come from `factory`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from langchain_ragbudget.budget import BudgetedContext
from langchain_ragbudget.chain import context_warnings
from langchain_ragbudget.config import RagBudgetConfig
from langchain_ragbudget.identity import document_key, document_source
from langchain_ragbudget.ledger import Stage
from langchain_ragbudget.pipeline import Explained
from langchain_ragbudget.render import one_line
from langchain_ragbudget.rerank import FlashRankRerank
from langchain_ragbudget.scores import (
    CONTEXT_TOKENS,
    DENSE,
    FUSED_RANK,
    FUSED_SCORE,
    RERANK_SCORE,
    SPARSE,
    score_key,
)


def _fmt(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


def evidence_table(
    context: BudgetedContext,
    answer_ids: Sequence[str] = (),
    retrievers: Sequence[str] = (SPARSE, DENSE),
) -> tuple[Table, Counter[str]]:
    """Every candidate the budget saw, and the count of those cut earlier.

    Rows are the kept passages and the passages the rerank and budget stages
    dropped, in fused order; fusion cuts are only counted (there are many).
    """
    trimmed = {
        r.key: f"shortened ({r.kept_sentences} of {r.total_sentences} sentences)"
        for r in context.report.trimmed
    }
    rows: list[tuple[Document, str, int | None]] = [
        (doc, trimmed.get(str(doc.id), "kept"), doc.metadata.get(CONTEXT_TOKENS))
        for doc in context.documents
    ]
    earlier: Counter[str] = Counter()
    for record in context.report.drops:
        if record.stage == Stage.FUSION:
            earlier[str(record.reason)] += 1
            continue
        rows.append(
            (record.document, f"{record.reason} ({record.stage})", record.tokens)
        )
    rows.sort(key=lambda row: row[0].metadata.get(FUSED_RANK, 0))
    columns = [*((score_key(name), 2) for name in retrievers)]
    columns += [(FUSED_SCORE, 3), (RERANK_SCORE, 2)]
    heading = " / ".join(key.removesuffix("_score") for key, _ in columns)
    table = Table(title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("passage", no_wrap=True)
    table.add_column("source", no_wrap=True)
    table.add_column(heading, no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("in the prompt?", no_wrap=True)
    for document, status, tokens in rows:
        meta = document.metadata
        key = document_key(document)
        scores = " / ".join(_fmt(meta.get(name), digits) for name, digits in columns)
        # Text, not str: rich would read markup ("[red]") in an id or a source.
        table.add_row(
            _fmt(meta.get(FUSED_RANK), 0),
            Text(one_line(f"{key} *" if key in answer_ids else key)),
            Text(one_line(document_source(document) or "-")),
            scores,
            _fmt(tokens, 0),
            status,
            style="green"
            if status == "kept"
            else "yellow"
            if status.startswith("shortened")
            else "red",
        )
    return table, earlier


def show_explained(
    console: Console,
    explained: Explained,
    surface: str,
    *,
    fusion_k: int,
    answer_ids: Sequence[str] = (),
    retrievers: Sequence[str] = (SPARSE, DENSE),
) -> None:
    """Print the evidence table, the prompt sent and the answer (or why none)."""
    context = explained.context
    report = context.report
    table, earlier = evidence_table(context, answer_ids, retrievers)
    table.title = (
        f"surface '{surface}': max_docs={report.max_docs}, "
        f"max_tokens={report.max_tokens} ({report.encoding}), packing="
        f"{report.packing}; used {report.tokens_used} tokens"
    )
    console.print(table)
    if earlier:
        cut = ", ".join(f"{n} {reason}" for reason, n in earlier.items())
        console.print(f"before these: {cut} (fusion, k={fusion_k})")
    prompt_text = "\n\n".join(f"[{m.type}]\n{m.text}" for m in explained.messages)
    console.print(
        Panel(Text(prompt_text), title=f"prompt sent ({surface})", expand=False)
    )
    if explained.answer is None:
        lines = [
            "(no chat model configured: set OPENAI_API_KEY or llm.model "
            "to see the answer)",
            *context_warnings(context),
        ]
        text = "\n".join(lines)
    else:
        text = explained.answer.text()
    console.print(Panel(Text(text), title=f"answer ({surface})", expand=False))


def pipeline_line(config: RagBudgetConfig, reranker: FlashRankRerank | None) -> str:
    """One line naming the stages and whether the reranker loaded."""
    if reranker is None:
        state = "off in config"
    else:
        state = "loaded" if reranker.available else "unavailable"
    return (
        f"pipeline: BM25 + dense (k={config.retrieval.k}) -> weighted RRF -> "
        f"FlashRank {config.rerank.model} ({state}) -> budget"
    )


def ingest_report(
    given: Path,
    index: Any,
    summary: Any,
    skipped: Sequence[tuple[str, str, str]],
    names_shown: int,
) -> list[Table | str]:
    """What `ragbudget index` prints: the counts, every file by outcome, the names.

    `summary` is an `index.IngestSummary`; `skipped` holds (reason, id, detail).
    """
    counts = {
        "added": summary.added,
        "updated": summary.updated,
        "unchanged": summary.unchanged,
        "restored": summary.restored,
        "deleted": summary.deleted,
        "refused": summary.errors,
        "skipped": skipped,
    }
    totals = Table(title=f"indexed {given} into {index.directory}")
    after = {
        "chunks written": summary.chunks_added,
        "chunks removed": summary.chunks_deleted,
        "documents now": len(index.document_ids),
        "chunks now": index.chunk_count,
    }
    for column in [*counts, *after]:
        totals.add_column(column, justify="right")
    totals.add_row(
        *(str(len(items)) for items in counts.values()),
        *(str(n) for n in after.values()),
    )
    return [
        totals,
        _files_by_outcome(given, summary, skipped),
        *_named_lines(summary, skipped, names_shown),
    ]


def _files_by_outcome(
    given: Path, summary: Any, skipped: Sequence[tuple[str, str, str]]
) -> Table:
    groups: dict[tuple[str, str], list[str]] = {}
    for outcome in ("added", "updated", "unchanged", "restored", "deleted"):
        if getattr(summary, outcome):
            groups[(outcome, "")] = list(getattr(summary, outcome))
    for error in summary.errors:
        reason = error.problem.split(":")[0].split(" (")[0].split(";")[0]
        groups.setdefault(("refused", reason), []).append(error.path)
    for reason, name, _ in skipped:
        groups.setdefault(("skipped", reason), []).append(name)
    table = Table(title=f"files under {given}")
    for column in ("outcome", "reason", "files", "names"):
        table.add_column(column, justify="right" if column == "files" else "left")
    for (outcome, reason), names in groups.items():
        shown = one_line(name_list(names), 400)
        table.add_row(outcome, reason, str(len(names)), Text(shown))
    return table


def _named_lines(
    summary: Any, skipped: Sequence[tuple[str, str, str]], names_shown: int
) -> list[str]:
    lines = [f"refused: {one_line(e.path)}: {e.problem}" for e in summary.errors]
    shown: dict[str, int] = {}
    for reason, name, detail in skipped:
        shown[reason] = shown.get(reason, 0) + 1
        if shown[reason] <= names_shown:
            lines.append(f"skipped ({reason}): {one_line(name)} {detail}".rstrip())
    lines += [
        f"skipped ({reason}): ... and {count - names_shown} more"
        for reason, count in shown.items()
        if count > names_shown
    ]
    lines += [f"note: {one_line(n.path)}: {n.problem}" for n in summary.notes]
    return lines


def name_list(names: Sequence[str], limit: int = 5) -> str:
    """The first `limit` names, and how many more there are."""
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")
