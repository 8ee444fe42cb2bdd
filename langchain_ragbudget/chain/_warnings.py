"""The warning lines shown under an answer: what was dropped, shortened or skipped.

Every value from data in a line (ids, surface, reasons, model names) goes through
`display_name`, so none can forge a line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from langchain_ragbudget.budget._context_budget import BudgetedContext, BudgetReport
from langchain_ragbudget.chain._triage import LikelyLost, likely_lost
from langchain_ragbudget.evidence._assess import COMBINED, UNKNOWN_COMBINED, Evidence
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._records import DropReason, DropRecord, Stage

# Items named in one drop-warning line, then "+N more", so the line stays readable;
# the records carry them all.
MAX_NAMED = 3
_NAME_LIMIT = 300  # characters of one id in a warning line

# Drop reasons in pipeline order, for the counts of the warning line.
_REASON_ORDER = (
    DropReason.EMPTY,
    DropReason.RERANKED_OUT,
    DropReason.SCORE_FLOOR,
    DropReason.DUPLICATE,
    DropReason.MAX_PER_SOURCE,
    DropReason.MAX_PER_RETRIEVER,
    DropReason.MAX_DOCS,
    DropReason.MAX_TOKENS,
)


def _name(key: str) -> str:
    return display_name(key, _NAME_LIMIT)


def _ids(shown_items: Sequence[str], limit: int = 12) -> str:
    """The first `limit` items, whole, then `+N more`."""
    shown = ", ".join(shown_items[:limit])
    more = len(shown_items) - limit
    return f"{shown} +{more} more" if more > 0 else shown


def context_warnings(context: BudgetedContext) -> list[str]:
    """Warnings about what the context lacks, one line per condition, each once.

    Ordinary narrowing (fusion's cut, the ranks below `retrieval.k`) is counted
    in the report and its table, not here: a line on every answer is a line
    nobody reads. Every value from data is shown through `display_name`, so none
    can add a line.
    """
    report = context.report
    lines = [
        *_unaccounted_warning(report),
        *_drop_warnings(context),
        *_history_warning(report),
        *_memory_warnings(context),
        *_stage_warnings(report),
        *_evidence_warning(context.evidence, report.surface),
    ]
    return list(dict.fromkeys(lines))


def _by_reason(counts: Counter[DropReason], order: Sequence[DropReason]) -> str:
    """`3 over_max_docs, 1 duplicate`: `order` first, then any other reason."""
    reasons = [*order, *(reason for reason in counts if reason not in order)]
    return ", ".join(f"{counts[r]} {r}" for r in reasons if counts[r])


def _context_line(report: BudgetReport, text: str) -> str:
    return f"[warning: {display_name(report.surface)} context: {text}]"


def _unaccounted_warning(report: BudgetReport) -> list[str]:
    if not (unaccounted := [_name(r.key) for r in report.unaccounted]):
        return []
    return [
        f"[warning: {len(unaccounted)} candidate(s) vanished between stages with "
        f"no record (a step outside ragbudget removed them): {_ids(unaccounted)}]"
    ]


def asked_drops(report: BudgetReport) -> list[DropRecord]:
    """The passages dropped after fusion's cut: among those the user asked for."""
    return [
        r
        for r in report.drops
        if r.reason not in (DropReason.UNACCOUNTED, DropReason.FUSION_CUT)
        and r.stage not in (Stage.HISTORY, Stage.MEMORY)
    ]


def _drop_warnings(context: BudgetedContext) -> list[str]:
    """The passages left out after fusion's cut (likely lost named), the shortened.

    Duplicates alone say nothing (their text is in the prompt); counted when
    another drop brings the line.
    """
    report = context.report
    lines = []
    drops = asked_drops(report)
    if any(r.reason != DropReason.DUPLICATE for r in drops):
        lost = likely_lost_of(context)
        lines.append(_context_line(report, _drops_text(drops, lost, context.evidence)))
    if report.trimmed:
        shown = [
            f"{_name(r.key)} ({r.kept_sentences} of {r.total_sentences} sentences)"
            for r in report.trimmed
        ]
        lines.append(_context_line(report, f"shortened: {_ids(shown, MAX_NAMED)}"))
    return lines


def _history_warning(report: BudgetReport) -> list[str]:
    turns = [r for r in report.drops if r.stage == Stage.HISTORY]
    if not turns:
        return []
    why = ", ".join(dict.fromkeys(str(r.reason) for r in turns))
    text = f"{len(turns)} history turn(s) dropped (oldest first, {why})"
    return [_context_line(report, text)]


# Memory drops that bring the line on their own; those under `min_score` (not
# relevant to the question) are counted when it shows.
_MEMORY_NOTABLE = (
    DropReason.SUPERSEDED,
    DropReason.STALE_SOURCE,
    DropReason.MAX_MEMORIES,
    DropReason.MAX_TOKENS,
)
_MEMORY_ORDER = (
    DropReason.SCORE_FLOOR,
    DropReason.SUPERSEDED,
    DropReason.STALE_SOURCE,
    DropReason.MAX_MEMORIES,
    DropReason.MAX_TOKENS,
)


def _memory_warnings(context: BudgetedContext) -> list[str]:
    """Memories left out (counted by reason) and kept stale (named), a line each."""
    report = context.report
    drops = [r for r in report.drops if r.stage == Stage.MEMORY]
    flags = context.memory.stale if context.memory is not None else []
    lines = []
    if any(r.reason in _MEMORY_NOTABLE for r in drops):
        by_reason = _by_reason(Counter(r.reason for r in drops), _MEMORY_ORDER)
        text = f"{len(drops)} memory(ies) dropped ({by_reason})"
        lines.append(_context_line(report, text))
    if flags:
        named = [f"{_name(flag.key)} ({_name(flag.detail)})" for flag in flags]
        text = f"{len(flags)} memory(ies) kept marked stale: {_ids(named)}"
        lines.append(_context_line(report, text))
    return lines


def likely_lost_of(context: BudgetedContext) -> list[LikelyLost]:
    """The drops after fusion's cut that likely cost evidence (`_triage`)."""
    report, evidence = context.report, context.evidence
    groups = {
        str(document.id): citation.group
        for citation in context.citations
        for document in citation.documents
    }
    return likely_lost(
        context.documents,
        report.kept_ids,
        asked_drops(report),
        evidence.score_key,
        evidence.score,
        groups=groups,
    )


def likely_lost_entries(context: BudgetedContext) -> list[dict[str, object]]:
    """Every likely-lost drop, whole, for `--json`: the line names three at most."""
    return [
        {
            **item.record.to_dict(),
            "outranked_kept_rank": item.outranked,
            "score_key": None if item.score is None else context.evidence.score_key,
            "score": item.score,
        }
        for item in likely_lost_of(context)
    ]


def _drops_text(
    drops: Sequence[DropRecord], lost: Sequence[LikelyLost], evidence: Evidence
) -> str:
    """Likely lost named first; the rest counted by reason in one clause."""
    parts = []
    if lost:
        named = [_lost(item, evidence) for item in lost]
        parts.append(f"evidence likely lost: {_ids(named, MAX_NAMED)}")
    named_keys = {id(item.record) for item in lost}
    if rest := [r for r in drops if id(r) not in named_keys]:
        counts = Counter(r.reason for r in rest)
        by_reason = _by_reason(counts, _REASON_ORDER)
        what = (
            "lower-ranked or duplicate"
            if counts[DropReason.DUPLICATE]
            else "lower-ranked"
        )
        parts.append(f"{len(rest)} {what} left out ({by_reason})")
    return "; ".join(parts)


def _lost(item: LikelyLost, evidence: Evidence) -> str:
    record = item.record
    if item.outranked is not None:
        why = f"rank {record.rank}, while rank {item.outranked} was kept"
    else:
        why = (
            f"{display_name(str(evidence.score_key))} {item.score:.2f}, top kept "
            f"{evidence.score:.2f}"
        )
    return f"{_name(record.key)} ({record.stage}/{record.reason}: {why})"


def _stage_warnings(report: BudgetReport) -> list[str]:
    lines = []
    if report.issues:
        named = [
            f"{_name(i.field)} of {_name(i.key)} = {_name(str(i.value))}"
            for i in report.issues
        ]
        lines.append(
            f"[warning: {len(named)} score(s) were not finite numbers and were "
            f"ignored: {_ids(named)}]"
        )
    room = report.prompt
    prompt_over = room is not None and room.over_tokens > 0
    if room is not None and prompt_over:
        lines.append(
            f"[warning: the {display_name(report.surface)} prompt is "
            f"{room.prompt_tokens} tokens against max_prompt_tokens "
            f"{room.max_prompt_tokens} ({room.reserve_output_tokens} reserved for the "
            f"answer): without context or history it is {room.fixed_tokens} tokens "
            "(system text, question, prompt variables, memories); shorten them or "
            "raise max_prompt_tokens]"
        )
    if report.over_budget and (
        report.tokens_used > report.max_tokens or not prompt_over
    ):
        lines.append(
            f"[warning: context is over the {display_name(report.surface)} budget "
            f"({report.tokens_used} > {report.max_tokens} tokens): the top passage(s) "
            f"were kept because min_docs={report.min_docs}]"
        )
    lines += [
        f"[warning: {skip.stage} stage skipped: {display_name(skip.reason, 300)}]"
        for skip in report.skipped
    ]
    return lines


def _evidence_warning(evidence: Evidence, surface: str) -> list[str]:
    """Weak or unknown evidence, and a stale calibration; nothing when all is well.

    A calibration made with other models than those in use gets a line even when
    the evidence cleared its threshold: then "strong" means little (the clause's
    model names come through `display_name`).
    """
    surface = display_name(surface)
    clause = evidence.stale_clause
    stale = f"; {clause}" if evidence.stale else ""
    if evidence.weak and evidence.score is not None:
        return [
            f"[warning: weak evidence: {display_name(evidence.measure)} "
            f"{evidence.score:.2f} is below the {surface} threshold "
            f"{evidence.threshold:.2f}; the answer may not be supported by the "
            f"documents{stale}]"
        ]
    if evidence.weak:
        return [f"[warning: weak evidence: no passage reached the context{stale}]"]
    if evidence.weak is None and evidence.score_key == COMBINED:
        return [f"[warning: evidence strength unknown: {UNKNOWN_COMBINED}{stale}]"]
    if evidence.weak is None:
        return [
            "[warning: evidence strength unknown: no kept passage has a score this "
            f"surface has a threshold for{stale}]"
        ]
    if evidence.stale:
        return [
            f"[warning: weak-evidence {clause}: the {surface} "
            "threshold may not mean what it did; re-run `ragbudget eval "
            "--weak-evidence-yaml`]"
        ]
    return []
