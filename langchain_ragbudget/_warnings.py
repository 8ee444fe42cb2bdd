"""The warning lines shown under an answer: what was dropped, shortened or skipped.

One line for drops and shortenings (the drops that likely lost evidence named
first, by `_triage.likely_lost`), one per skipped stage, one for weak evidence.
Every id in a line is shown by `display_name`, so no name can forge a line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from langchain_ragbudget._names import display_name
from langchain_ragbudget._triage import LikelyLost, likely_lost
from langchain_ragbudget.budget import BudgetedContext, BudgetReport
from langchain_ragbudget.evidence import COMBINED, UNKNOWN_COMBINED, Evidence
from langchain_ragbudget.ledger import DropReason, DropRecord, Stage

_MAX_NAMED = 12  # ids named in one warning line; the structured answer has them all


_NAME_LIMIT = 80  # characters of one id in a warning line (display_name shortens)


# Drop reasons in pipeline order, for the counts of the warning line.
_REASON_ORDER = (
    DropReason.FUSION_CUT,
    DropReason.RERANKED_OUT,
    DropReason.SCORE_FLOOR,
    DropReason.DUPLICATE,
    DropReason.MAX_PER_SOURCE,
    DropReason.MAX_PER_RETRIEVER,
    DropReason.MAX_DOCS,
    DropReason.MAX_TOKENS,
)


def _name(key: str) -> str:
    """An id or source as a warning shows it (`display_name`, kept short)."""
    return display_name(key, _NAME_LIMIT)


def _ids(shown_items: Sequence[str]) -> str:
    """Items for a warning line (each names its id through `_name`), kept few."""
    shown = ", ".join(shown_items[:_MAX_NAMED])
    more = len(shown_items) - _MAX_NAMED
    return f"{shown} and {more} more" if more > 0 else shown


def context_warnings(context: BudgetedContext) -> list[str]:
    """Warnings about what the context lacks, for display next to the answer.

    Every id is escaped to one line, so no id or source can add a line here.
    """
    report = context.report
    return [
        *_drop_warnings(context),
        *_stage_warnings(report),
        *_evidence_warning(context.evidence, report.surface),
    ]


def _drop_warnings(context: BudgetedContext) -> list[str]:
    """Candidates that vanished; then one line for what was dropped or shortened.

    The line fires when evidence was likely lost (see `triage`), a passage was
    shortened, or one did not fit the tokens left. The ordinary narrowing (fusion's
    `k`, rerank's `top_n` and floor, `max_docs`, duplicates) of candidates ranked
    below every kept passage does not fire it: those stay in the records, and are
    counted in the line when it fires.
    """
    report = context.report
    lines = []
    if unaccounted := [_name(r.key) for r in report.unaccounted]:
        lines.append(
            f"[warning: {len(unaccounted)} candidate(s) vanished between stages with "
            f"no record (a step outside ragbudget removed them): {_ids(unaccounted)}]"
        )
    drops = [r for r in report.drops if r.reason != DropReason.UNACCOUNTED]
    turns = [r for r in drops if r.stage == Stage.HISTORY]
    memory = _memory_clause(context, [r for r in drops if r.stage == Stage.MEMORY])
    drops = [r for r in drops if r.stage not in (Stage.HISTORY, Stage.MEMORY)]
    evidence = context.evidence
    lost = likely_lost(
        context.documents, report.kept_ids, drops, evidence.score_key, evidence.score
    )
    out_of_tokens = any(r.reason == DropReason.MAX_TOKENS for r in drops)
    if lost or report.trimmed or out_of_tokens or turns or memory:
        lines.append(_drops_line(report, drops, lost, evidence, len(turns), memory))
    return lines


# Memory drops that fire the line on their own; the others (min_score,
# max_memories: the ordinary narrowing) are counted when it fires.
_MEMORY_NOTABLE = (
    DropReason.SUPERSEDED,
    DropReason.STALE_SOURCE,
    DropReason.MAX_TOKENS,
)
_MEMORY_ORDER = (
    DropReason.SCORE_FLOOR,
    DropReason.SUPERSEDED,
    DropReason.STALE_SOURCE,
    DropReason.MAX_MEMORIES,
    DropReason.MAX_TOKENS,
)


def _memory_clause(context: BudgetedContext, drops: Sequence[DropRecord]) -> str:
    """Memories dropped (counted by reason) and kept stale (named); '' if quiet.

    Fires on a superseded or stale memory, or one over `memory_tokens`.
    """
    flags = context.memory.stale if context.memory is not None else []
    if not flags and not any(r.reason in _MEMORY_NOTABLE for r in drops):
        return ""
    parts = []
    if drops:
        counts = Counter(r.reason for r in drops)
        by_reason = ", ".join(
            f"{counts[reason]} {reason}" for reason in _MEMORY_ORDER if counts[reason]
        )
        parts.append(f"{len(drops)} memory(ies) dropped ({by_reason})")
    if flags:
        named = [f"{_name(flag.key)} ({flag.detail})" for flag in flags]
        parts.append(f"{len(flags)} memory(ies) kept marked stale: {_ids(named)}")
    return ", ".join(parts)


def _drops_line(
    report: BudgetReport,
    drops: Sequence[DropRecord],
    lost: Sequence[LikelyLost],
    evidence: Evidence,
    turns: int = 0,
    memory: str = "",
) -> str:
    """Counts by reason; likely lost named first, then the shortened; rest counted.

    `turns`: chat history turns dropped (oldest first) to fit the whole prompt;
    `memory`: the memories' clause (`_memory_clause`).
    """
    counts = Counter(r.reason for r in drops)
    by_reason = ", ".join(
        f"{counts[reason]} {reason}" for reason in _REASON_ORDER if counts[reason]
    )
    head = [f"{len(drops)} candidate(s) dropped ({by_reason})"] if drops else []
    if report.trimmed:
        head.append(f"{len(report.trimmed)} passage(s) shortened")
    if turns:
        head.append(f"{turns} history turn(s) dropped (oldest first, over_max_tokens)")
    if memory:
        head.append(memory)
    parts = [f"{display_name(report.surface)} context: {', '.join(head)}"]
    if lost:
        named = [_lost(item, evidence) for item in lost]
        parts.append(f"evidence likely lost: {_ids(named)}")
    if report.trimmed:
        shown = [
            f"{_name(r.key)} ({r.kept_sentences} of {r.total_sentences} sentences)"
            for r in report.trimmed
        ]
        parts.append(f"shortened: {_ids(shown)}")
    if rest := len(drops) - len(lost):
        duplicates = ", or duplicates" if counts[DropReason.DUPLICATE] else ""
        parts.append(f"{rest} other(s) ranked below the kept passages{duplicates}")
    return f"[warning: {'; '.join(parts)}]"


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
    """Odd scores, an over-budget context, skipped stages."""
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
    if report.over_budget:
        lines.append(
            f"[warning: context is over the {report.surface} budget "
            f"({report.tokens_used} > {report.max_tokens} tokens): the top passage(s) "
            f"were kept because min_docs={report.min_docs}]"
        )
    lines += [
        f"[warning: {skip.stage} stage skipped: {display_name(skip.reason, 300)}]"
        for skip in report.skipped
    ]
    return lines


def _evidence_warning(evidence: Evidence, surface: str) -> list[str]:
    """Weak or unknown evidence; nothing when the top score clears its threshold."""
    if evidence.weak and evidence.score is not None:
        return [
            f"[warning: weak evidence: {display_name(evidence.measure)} "
            f"{evidence.score:.2f} is below the {surface} threshold "
            f"{evidence.threshold:.2f}; the answer may not be supported by the "
            "documents]"
        ]
    if evidence.weak:
        return ["[warning: weak evidence: no passage reached the context]"]
    if evidence.weak is None and evidence.score_key == COMBINED:
        return [f"[warning: evidence strength unknown: {UNKNOWN_COMBINED}]"]
    if evidence.weak is None:
        return [
            "[warning: evidence strength unknown: no kept passage has a score this "
            "surface has a threshold for]"
        ]
    return []
