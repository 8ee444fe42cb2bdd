"""The warning lines shown under an answer: what was dropped, shortened or skipped.

Every id in a line goes through `display_name`, so no name can forge a line.
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
    return display_name(key, _NAME_LIMIT)


def _ids(shown_items: Sequence[str], limit: int = 12) -> str:
    """The first `limit` items, whole, then `+N more`."""
    shown = ", ".join(shown_items[:limit])
    more = len(shown_items) - limit
    return f"{shown} +{more} more" if more > 0 else shown


def context_warnings(context: BudgetedContext) -> list[str]:
    """Warnings about what the context lacks, for display next to the answer.

    Every id is escaped to one line, so no id or source can add a line.
    """
    report = context.report
    return [
        *_drop_warnings(context),
        *_stage_warnings(report),
        *_evidence_warning(context.evidence, report.surface),
    ]


def _drop_warnings(context: BudgetedContext) -> list[str]:
    """Candidates that vanished; then one line for what was dropped or shortened.

    Only a likely loss (`_triage`) is named; the ordinary narrowing below every
    kept passage is counted in one short clause, so any drop still shows.
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
    if drops or report.trimmed or turns or memory:
        lost = likely_lost_of(context)
        line = _drops_line(report, drops, lost, context.evidence, len(turns), memory)
        lines.append(line)
    return lines


# Memory drops that fire the clause on their own; the others (min_score,
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
    """Memories dropped (counted by reason) and kept stale (named); '' if quiet."""
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


def likely_lost_of(context: BudgetedContext) -> list[LikelyLost]:
    report, evidence = context.report, context.evidence
    drops = [
        r
        for r in report.drops
        if r.reason != DropReason.UNACCOUNTED
        and r.stage not in (Stage.HISTORY, Stage.MEMORY)
    ]
    return likely_lost(
        context.documents, report.kept_ids, drops, evidence.score_key, evidence.score
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


def _drops_line(
    report: BudgetReport,
    drops: Sequence[DropRecord],
    lost: Sequence[LikelyLost],
    evidence: Evidence,
    turns: int = 0,
    memory: str = "",
) -> str:
    """Likely lost named first, then the shortened; the rest counted in one clause."""
    parts = []
    if lost:
        named = [_lost(item, evidence) for item in lost]
        parts.append(f"evidence likely lost: {_ids(named, MAX_NAMED)}")
    if report.trimmed:
        shown = [
            f"{_name(r.key)} ({r.kept_sentences} of {r.total_sentences} sentences)"
            for r in report.trimmed
        ]
        parts.append(f"shortened: {_ids(shown, MAX_NAMED)}")
    if turns:
        parts.append(f"{turns} history turn(s) dropped (oldest first, over_max_tokens)")
    if memory:
        parts.append(memory)
    named_keys = {id(item.record) for item in lost}
    if rest := [r for r in drops if id(r) not in named_keys]:
        counts = Counter(r.reason for r in rest)
        by_reason = ", ".join(
            f"{counts[reason]} {reason}" for reason in _REASON_ORDER if counts[reason]
        )
        what = (
            "lower-ranked or duplicate"
            if counts[DropReason.DUPLICATE]
            else ("lower-ranked")
        )
        parts.append(f"{len(rest)} {what} left out ({by_reason})")
    return f"[warning: {display_name(report.surface)} context: {'; '.join(parts)}]"


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
    the evidence cleared its threshold: then "strong" means little.
    """
    stale = f"; {evidence.stale_clause}" if evidence.stale else ""
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
            f"[warning: weak-evidence {evidence.stale_clause}: the {surface} "
            "threshold may not mean what it did; re-run `ragbudget eval "
            "--weak-evidence-yaml`]"
        ]
    return []
