"""The ledger as tables: every candidate kept, shortened or dropped, one row each.

Every holder of records (candidate list, budgeted context, report, answer) turns
them into plain entries (`id`, `source`, `stage`, `reason`, `tokens`, `detail`,
ranks and scores, `text`) and gets its table here, so the notebook and the
terminal show the same columns and rows.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.ledger._html import Markup, collapsible, folded, join, table
from langchain_ragbudget.ledger._identity import document_key
from langchain_ragbudget.ledger._metadata_keys import (
    FUSED_RANK,
    FUSED_SCORE,
    RERANK_SCORE,
    is_score_key,
    score_label,
    scores_of,
    with_neighbour,
)
from langchain_ragbudget.ledger._names import display_name

KEPT = "kept"
SHORTENED = "shortened"
DROPPED = "dropped"
CANDIDATE = "candidate"  # still in a candidate list: no stage has decided yet
TEXT = "text"  # the entry key of the passage's text, shown folded
Entry = Mapping[str, Any]
NAME_LIMIT = 400  # characters of an id or source in a table cell


@dataclass(frozen=True)
class EvidenceRows:
    """The evidence table as plain cells: one row per candidate, fused order.

    Attributes:
        headers: Column names, with one column per score present.
        rows: The cells: str, or Markup for a folded passage text.
        statuses: Per row: `kept`, `shortened`, `dropped` or `candidate`.
        numeric: Indices of the number columns.
    """

    headers: list[str]
    rows: list[list[object]]
    statuses: list[str]
    numeric: list[int]


def document_entry(document: Document, **extra: Any) -> dict[str, Any]:
    """A document as an entry (the shape of `BudgetedAnswer.kept`)."""
    return {
        "id": document_key(document),
        "source": document.metadata.get("source"),
        **extra,
        **scores_of(document),
    }


def evidence_rows(
    kept: Sequence[Entry],
    dropped: Sequence[Entry],
    shortened: Sequence[Entry] = (),
    candidates: Sequence[Entry] = (),
) -> EvidenceRows:
    """One row per candidate, by fused rank (rows without one last).

    A kept passage named in `shortened` (trim records' entries) shows as
    `shortened`; `candidates` are passages no stage has decided on yet.
    """
    trims = {str(entry["id"]): entry for entry in shortened}
    tagged = [
        *((SHORTENED if str(e["id"]) in trims else KEPT, e) for e in kept),
        *((CANDIDATE, e) for e in candidates),
        *((DROPPED, e) for e in dropped),
    ]
    tagged.sort(key=lambda pair: _rank_order(pair[1].get(FUSED_RANK)))
    scores = _score_columns(entry for _, entry in tagged)
    with_text = any(TEXT in entry for _, entry in tagged)
    fixed = ["status", "#", "id", "source", "stage", "reason"]
    headers = [*fixed, *map(score_label, scores), "tokens", "detail"]
    headers += [TEXT] if with_text else []
    rows = [
        _cells(status, entry, trims.get(str(entry["id"])), scores, with_text)
        for status, entry in tagged
    ]
    # the rank, then the scores and the tokens (which follow them)
    numeric = [fixed.index("#"), *range(len(fixed), len(fixed) + len(scores) + 1)]
    return EvidenceRows(headers, rows, [status for status, _ in tagged], numeric)


def _cells(
    status: str,
    entry: Entry,
    trim: Entry | None,
    scores: Sequence[str],
    with_text: bool,
) -> list[object]:
    """One row: a shortened passage takes its stage and detail from its trim."""
    stage, detail = entry.get("stage"), entry.get("detail")
    if status == SHORTENED and trim is not None:
        stage = trim.get("stage")
        detail = f"{trim.get('detail')}; {trim.get('omitted_tokens')} tokens left out"
    detail = with_neighbour(detail, entry)
    cells: list[object] = [
        status,
        _number(entry.get(FUSED_RANK)),
        _name(entry["id"]),
        _name(entry.get("source")),
        _text(stage),
        _text(entry.get("reason")),
        *(_number(entry.get(key)) for key in scores),
        _number(entry.get("tokens")),
        _text(detail),
    ]
    if with_text:
        cells.append(collapsible(str(entry[TEXT])) if TEXT in entry else "-")
    return cells


def evidence_table(
    kept: Sequence[Entry],
    dropped: Sequence[Entry],
    shortened: Sequence[Entry] = (),
    candidates: Sequence[Entry] = (),
    *,
    fold_stage: str | None = None,
    caption: str = "evidence: every candidate, kept or dropped, and why",
) -> Markup:
    """The evidence table; the drops of `fold_stage`, if any, in a folded second one.

    Fusion cuts a hundred or more candidates per query: folded and without their
    texts, they keep the notebook light. Every candidate appears in one row.
    """
    early = [e for e in dropped if fold_stage and e.get("stage") == fold_stage]
    later = [e for e in dropped if not (fold_stage and e.get("stage") == fold_stage)]
    parts = [_table(evidence_rows(kept, later, shortened, candidates), caption)]
    if early:
        bare = [{k: v for k, v in entry.items() if k != TEXT} for entry in early]
        what = f"{len(early)} candidate(s) dropped at {fold_stage}"
        parts.append(folded(what, _table(evidence_rows((), bare), what)))
    return join(parts)


def citations_table(citations: Sequence[Entry]) -> Markup:
    return table(
        ["[n]", "document", "source", "passages"],
        [
            [
                f"[{c['number']}]",
                _name(c["document"]),
                _name(c.get("source")),
                ", ".join(map(_name, c.get("passages", ()))),
            ]
            for c in citations
        ],
        caption="citations (one per source document)",
    )


def skipped_table(skipped: Sequence[Entry]) -> Markup:
    return table(
        ["stage", "reason"],
        [[str(s["stage"]), str(s["reason"])] for s in skipped],
        caption="stages skipped",
    )


def issues_table(issues: Sequence[Entry]) -> Markup:
    return table(
        ["stage", "id", "field", "value"],
        [
            [str(i["stage"]), _name(i["id"]), _name(i["field"]), str(i["value"])]
            for i in issues
        ],
        caption="scores that were not finite numbers (ignored)",
    )


def drop_counts(pairs: Iterable[tuple[object, object]]) -> str:
    """`stage/reason=n` for each pair, most frequent first (for one-line reprs)."""
    counts = Counter(f"{stage}/{reason}" for stage, reason in pairs)
    if not counts:
        return "no drops"
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    shown = ", ".join(f"{label}={n}" for label, n in ordered)
    noun = "drop" if counts.total() == 1 else "drops"
    return f"{counts.total()} {noun}: {shown}"


def _table(rows: EvidenceRows, caption: str) -> Markup:
    return table(
        rows.headers,
        rows.rows,
        caption=caption,
        row_classes=[f"rb-{status}" for status in rows.statuses],
        numeric=rows.numeric,
        drop_empty=True,
    )


def _score_columns(entries: Iterable[Entry]) -> list[str]:
    """Score keys present, each retriever's first (as met), then fused, rerank."""
    found = dict.fromkeys(
        key for entry in entries for key in entry if is_score_key(key)
    )
    last = [key for key in (FUSED_SCORE, RERANK_SCORE) if key in found]
    return [key for key in found if key not in last] + last


def _rank_order(rank: object) -> float:
    return (
        float(rank)
        if isinstance(rank, int | float) and math.isfinite(rank)
        else math.inf
    )


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return "-" if value is None else str(value)


def _name(value: object) -> str:
    return "-" if value is None else display_name(str(value), NAME_LIMIT)


def _text(value: object) -> str:
    return "-" if value is None or value == "" else str(value)
