"""Terminal views for the CLI: rendering only; what is shown is computed elsewhere."""

from __future__ import annotations

import json
import re
import textwrap
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from langchain_ragbudget.budget._context_budget import BudgetedContext
from langchain_ragbudget.chain._pipeline import Explained
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.chain._warnings import likely_lost_entries
from langchain_ragbudget.config._settings import (
    DEFAULT_CONFIG_NAME,
    DEFAULT_SURFACE,
    ConfigValue,
    EffectiveConfig,
    Origin,
    RagBudgetConfig,
)
from langchain_ragbudget.index import IndexInspection
from langchain_ragbudget.ledger._identity import document_key, document_source
from langchain_ragbudget.ledger._metadata_keys import (
    CONTEXT_TOKENS,
    DENSE,
    FUSED_RANK,
    FUSED_SCORE,
    HEADER_TOKENS,
    RERANK_SCORE,
    SPARSE,
    score_key,
    with_neighbour,
)
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import Stage
from langchain_ragbudget.retrieval._rerank import FlashRankRerank


def _fmt(value: Any, digits: int) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


KEPT, SHORTENED, DROPPED = "kept", "shortened", "dropped"
ID_LIMIT = 400  # characters of an id or source shown (wrapped, then cut in the middle)


@dataclass(frozen=True)
class CandidateRow:
    """One candidate the budget saw, a row of `ragbudget ask`'s table and --json.

    Attributes:
        tokens: The passage as rendered in the prompt (or as it would have been).
        header_tokens: Its citation header, paid once per source document by its
            first kept passage (0: already paid).
        stage: The stage that dropped it; None when kept.
        reason: Why it was dropped or shortened; None when kept whole.
    """

    key: str
    source: str | None
    fused_rank: int | None
    scores: dict[str, float | None]
    tokens: int | None
    header_tokens: int | None
    outcome: str
    stage: str | None = None
    reason: str | None = None
    detail: str = ""
    in_answer: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def candidate_rows(
    context: BudgetedContext,
    answer_ids: Sequence[str] = (),
    retrievers: Sequence[str] = (SPARSE, DENSE),
) -> tuple[list[CandidateRow], Counter[str]]:
    """Every candidate the budget saw, in fused order, and the count cut earlier.

    Fusion's cuts are only counted: there are many.
    """
    keys = [*(score_key(name) for name in retrievers), FUSED_SCORE, RERANK_SCORE]
    trimmed = {r.key: r for r in context.report.trimmed}

    def row(
        document: Document, tokens: Any, header: int | None = None, **outcome: Any
    ) -> CandidateRow:
        meta = document.metadata
        key = document_key(document)
        outcome["detail"] = with_neighbour(outcome.get("detail"), meta) or ""
        return CandidateRow(
            key=key,
            source=document_source(document),
            fused_rank=meta.get(FUSED_RANK),
            scores={name: meta.get(name) for name in keys},
            tokens=tokens,
            header_tokens=meta.get(HEADER_TOKENS, header),
            in_answer=key in answer_ids,
            **outcome,
        )

    rows = []
    for doc in context.documents:
        record = trimmed.get(str(doc.id))
        tokens = doc.metadata.get(CONTEXT_TOKENS)
        if record is None:
            rows.append(row(doc, tokens, outcome=KEPT))
            continue
        shown = f"{record.kept_sentences} of {record.total_sentences} sentences"
        rows.append(row(doc, tokens, outcome=SHORTENED, reason=shown))
    earlier: Counter[str] = Counter()
    for drop in context.report.drops:
        if drop.stage == Stage.FUSION:
            earlier[str(drop.reason)] += 1
            continue
        rows.append(
            row(
                drop.document,
                drop.tokens,
                drop.header_tokens,
                outcome=DROPPED,
                stage=str(drop.stage),
                reason=str(drop.reason),
                detail=drop.detail,
            )
        )
    rows.sort(key=lambda item: item.fused_rank or 0)
    return rows, earlier


_STYLES = {KEPT: "green", SHORTENED: "yellow", DROPPED: "red"}


def rich_evidence_table(
    context: BudgetedContext,
    answer_ids: Sequence[str] = (),
    retrievers: Sequence[str] = (SPARSE, DENSE),
) -> tuple[Table, Counter[str]]:
    """The evidence as a rich table that stays readable from 80 columns up.

    Ids and sources are never cut: the passage column is as wide as its longest
    line (each id over its source, the source left out when it starts the id);
    the other columns wrap between words.
    """
    rows, earlier = candidate_rows(context, answer_ids, retrievers)
    names = [*(score_key(name) for name in retrievers), FUSED_SCORE, RERANK_SCORE]
    digits = {FUSED_SCORE: 3}
    cells = [_passage_cell(item) for item in rows]
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title_justify="left",
        caption="* cited in the answer; rank: fused; a source under its passage "
        "unless the id starts with it; tokens: passage + its citation header "
        "(paid once per source document)",
        caption_justify="left",
    )
    table.add_column("#", justify="right")
    table.add_column("passage / source", no_wrap=True)
    table.add_column(  # "8.94 / 0.86 /" then "0.033 / -": wraps between scores
        " / ".join(name.removesuffix("_score") for name in names), max_width=13
    )
    table.add_column("tokens", justify="right")
    table.add_column("in the prompt?", overflow="fold")
    for item, cell in zip(rows, cells, strict=True):
        scores = " / ".join(_fmt(item.scores[n], digits.get(n, 2)) for n in names)
        tokens = _fmt(item.tokens, 0)
        if item.header_tokens:
            tokens += f" +{item.header_tokens}"
        table.add_row(
            _fmt(item.fused_rank, 0),
            cell,
            scores,
            tokens,
            Text(_status(item)),
            style=_STYLES[item.outcome],
        )
    return table, earlier


def _passage_cell(item: CandidateRow) -> Text:
    """Id (starred when cited) over its source; Text, so no markup is read.

    A line longer than `_PASSAGE_WIDTH` continues on the next, every character
    kept, so the other columns still have room at 80 columns.
    """
    source = item.source or "-"
    lines = [display_name(item.key, ID_LIMIT) + (" *" if item.in_answer else "")]
    if not item.key.startswith(source):
        lines.append(display_name(source, ID_LIMIT))
    return Text(
        "\n".join(
            line[i : i + _PASSAGE_WIDTH]
            for line in lines
            for i in range(0, len(line), _PASSAGE_WIDTH)
        )
    )


_PASSAGE_WIDTH = 34  # leaves the scores, tokens and outcome room at 80 columns


def _status(row: CandidateRow) -> str:
    if row.outcome == KEPT:
        return KEPT
    if row.outcome == SHORTENED:
        return f"{SHORTENED} ({row.reason})"
    detail = f": {display_name(row.detail)}" if row.detail else ""
    return f"{row.reason} ({row.stage}){detail}"


def show_explained(
    console: Console,
    explained: Explained,
    surface: str,
    *,
    fusion_k: int,
    answer_ids: Sequence[str] = (),
    retrievers: Sequence[str] = (SPARSE, DENSE),
    show_prompt: bool = True,
) -> None:
    """Print the evidence table, the prompt sent and the answer (or why none)."""
    context = explained.context
    table, earlier = rich_evidence_table(context, answer_ids, retrievers)
    table.title = Text(_budget_line(context.report))
    console.print(table)
    if earlier:
        cut = ", ".join(f"{n} {reason}" for reason, n in earlier.items())
        console.print(f"before these: {cut} (fusion, k={fusion_k})")
    if show_prompt:
        prompt_text = "\n\n".join(f"[{m.type}]\n{m.text}" for m in explained.messages)
        shown = quoted_wrap(prompt_text, console.width - _PANEL_EDGES)
        console.print(
            Panel(Text(shown), title=f"prompt sent ({surface})", expand=False)
        )
    console.print(
        Panel(Text(_answer_text(explained)), title=f"answer ({surface})", expand=False)
    )


_PANEL_EDGES = 4  # a panel's two borders and two padding columns
_QUOTE = re.compile(r"^(?:> ?)+")


def quoted_wrap(text: str, width: int) -> str:
    """`text` with each long quoted line wrapped to `width`, `>` on every part.

    So a reader still sees which words are quoted passage text. Display only:
    the prompt sent is not changed; other lines are left to the terminal.
    """
    if width < 20:
        return text
    lines = []
    for line in text.split("\n"):
        prefix = _QUOTE.match(line)
        if prefix is None or len(line) <= width:
            lines.append(line)
            continue
        mark = (
            prefix.group(0) if prefix.group(0).endswith(" ") else prefix.group(0) + " "
        )
        lines += textwrap.wrap(
            line[prefix.end() :],
            width,
            initial_indent=mark,
            subsequent_indent=mark,
            break_on_hyphens=False,
        ) or [line]
    return "\n".join(lines)


def _budget_line(report: Any) -> str:
    return (
        f"surface '{display_name(report.surface)}': max_docs={report.max_docs}, "
        f"max_tokens={report.max_tokens} ({report.encoding}), packing="
        f"{report.packing}; used {report.tokens_used} tokens"
    )


NO_MODEL = (
    "(no chat model configured: set OPENAI_API_KEY or llm.model to see the answer)"
)


def _answer_text(explained: Explained) -> str:
    if explained.answer is None:
        return "\n".join([NO_MODEL, *context_warnings(explained.context)])
    return explained.answer.text()


def explained_to_dict(
    explained: Explained,
    surface: str,
    config: RagBudgetConfig,
    *,
    prompt: bool = True,
    answer_ids: Sequence[str] = (),
) -> dict[str, Any]:
    """`ragbudget ask --json`: evidence, report, warnings, prompt and answer.

    Every likely-lost drop is listed, where the warning names three; the
    prompt is None when left out, the answer None without a chat model.
    """
    context = explained.context
    rows, earlier = candidate_rows(context, answer_ids)
    answer = explained.answer
    retrieval = config.retrieval
    return {
        "question": explained.question,
        "surface": surface,
        "retrieval": {
            "k": retrieval.k,
            "fetch_k": {
                "sparse": retrieval.sparse.fetch_k,
                "dense": retrieval.dense.fetch_k,
            },
        },
        "evidence": [row.to_dict() for row in rows],
        "cut_at_fusion": dict(earlier),
        "report": context.report.to_dict(),
        "evidence_check": context.evidence.to_dict(),
        "warnings": answer.warnings if answer else context_warnings(context),
        "likely_lost": likely_lost_entries(context),
        "prompt": [{"role": m.type, "text": m.text} for m in explained.messages]
        if prompt
        else None,
        "answer": answer.model_dump(mode="json") if answer else None,
    }


def pipeline_line(config: RagBudgetConfig, reranker: FlashRankRerank | None) -> str:
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
    """What `ragbudget index` prints; `skipped` holds (reason, id, detail)."""
    counts = {
        "added": summary.added,
        "updated": summary.updated,
        "unchanged": summary.unchanged,
        "restored": summary.restored,
        "deleted": summary.deleted,
        "refused": summary.errors,
        "skipped": skipped,
    }
    files = ", ".join(f"{len(items)} {name}" for name, items in counts.items())
    chunks = (
        f"{summary.chunks_added} written, {summary.chunks_deleted} removed; now "
        f"{len(index.document_ids)} documents, {index.chunk_count} chunks"
    )
    # two rows of words, not eleven columns: whole at 80 columns
    totals = Table(
        box=box.SIMPLE,
        show_header=False,
        title=f"indexed {given} into {index.directory}",
        title_justify="left",
    )
    totals.add_column("what", style="bold", no_wrap=True)
    totals.add_column("count")
    totals.add_row("files", files)
    totals.add_row("chunks", chunks)
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
        shown = name_list(names)
        table.add_row(outcome, reason, str(len(names)), Text(shown))
    return table


def _named_lines(
    summary: Any, skipped: Sequence[tuple[str, str, str]], names_shown: int
) -> list[str]:
    lines = [f"refused: {display_name(e.path)}: {e.problem}" for e in summary.errors]
    shown: dict[str, int] = {}
    for reason, name, detail in skipped:
        shown[reason] = shown.get(reason, 0) + 1
        if shown[reason] <= names_shown:
            lines.append(f"skipped ({reason}): {display_name(name)} {detail}".rstrip())
    lines += [
        f"skipped ({reason}): ... and {count - names_shown} more (all: "
        "ragbudget inspect --documents)"
        for reason, count in shown.items()
        if count > names_shown
    ]
    lines += [f"note: {display_name(n.path)}: {n.problem}" for n in summary.notes]
    return lines


def name_list(names: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(display_name(name, ID_LIMIT) for name in names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def inspection_report(found: IndexInspection) -> list[Table | str]:
    table = Table(box=box.SIMPLE, show_header=False, title=f"index {found.directory}")
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    manifest = found.manifest
    chunking = manifest.get("chunking") or {}
    sync = found.sync
    facts = {
        "documents": _fmt(found.documents, 0),
        "chunks": f"{_fmt(found.bm25_chunks, 0)} in BM25, "
        f"{_fmt(found.vector_chunks, 0)} in the vector store",
        "embedding model": _fmt(manifest.get("embedding_model"), 0),
        "chunking": ", ".join(f"{k}={v}" for k, v in chunking.items()) or "-",
        "root": _fmt(manifest.get("root"), 0),
        "manifest format": _fmt(manifest.get("format"), 0),
        "BM25 version": f"{_fmt(found.committed_version, 0)} "
        f"(saved {found.saved_at or '-'})",
        "other versions": name_list(found.other_versions) or "none",
        "sync": _sync_shown(found),
        "size on disk": f"{found.size_bytes:,} bytes ("
        + ", ".join(f"{name} {size:,}" for name, size in found.sizes.items())
        + ")",
    }
    if found.moved_aside:
        facts["moved aside"] = name_list(found.moved_aside)
    for name, value in facts.items():
        table.add_row(name, Text(value))
    lines: list[Table | str] = [table]
    if sync is not None:
        for label, ids in (
            ("only in the vector store", sync.only_dense),
            ("only in BM25", sync.only_sparse),
            ("different text", sync.differing),
        ):
            if ids:
                lines.append(f"{label}: {name_list(ids, 10)}")
    lines += [f"problem: {display_name(problem, 1000)}" for problem in found.problems]
    if found.building and found.healthy:
        lines.append(
            f"a first build by {found.building} is in progress: no version is "
            "committed yet; nothing was changed"
        )
    else:
        lines.append(
            "healthy"
            if found.healthy
            else "not healthy: see above; nothing was changed"
        )
    return lines


def _sync_shown(found: IndexInspection) -> str:
    if found.building:
        return "nothing committed yet (a first build is in progress)"
    if found.sync is None:
        return "unknown (a side cannot be read)"
    return found.sync.summary()


# Where a value came from, short enough that the longest key and its value fit
# 80 columns; the caption says what each means.
_ORIGIN_TAG = {
    Origin.FILE: "your file",
    Origin.INHERITED: "inherited",
    Origin.DEFAULT: "defaults",
    Origin.BUILT_IN: "built-in",
}


def config_table(effective: EffectiveConfig, values: Sequence[ConfigValue]) -> Table:
    """Every key whole (it is copied into YAML), its value, and where it came from."""
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=f"configuration: {effective.file} merged over {DEFAULT_CONFIG_NAME}"
        if effective.file
        else f"configuration: {DEFAULT_CONFIG_NAME} (the shipped defaults)",
        title_justify="left",
        caption=f"from: your file = {effective.file or '-'}; defaults = "
        f"{DEFAULT_CONFIG_NAME}; inherited = its surfaces.{DEFAULT_SURFACE}; "
        "built-in = the package's own default",
        caption_justify="left",
    )
    table.add_column("key", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("from", no_wrap=True)
    styles = {
        Origin.FILE: "bold",
        Origin.INHERITED: "cyan",
        Origin.DEFAULT: "",
        Origin.BUILT_IN: "dim",
    }
    for value in values:
        table.add_row(
            value.key,
            Text(json.dumps(value.value, ensure_ascii=False)),
            _ORIGIN_TAG[value.origin],
            style=styles[value.origin],
        )
    return table
