"""Did the gold passage survive assembly into the prompt? Packing policies compared.

Over one ranked candidate list at each token budget: a naive slice of the joined
context (what a character limit does), skip and trim. A passage survives if
its whole text is in the context; its evidence, if all of its marked evidence
sentences are (a sliced passage may keep them in its head).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from langchain_core.documents import Document

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import ContextFormat, group_citations
from langchain_ragbudget.config._settings import Relevance, SurfaceSettings
from langchain_ragbudget.config._tokens import get_encoding
from langchain_ragbudget.evidence._sentences import sentences
from langchain_ragbudget.ledger._identity import document_key

POLICIES = ("naive slice", "skip", "trim", "trim, fitted")
DEFAULT_BUDGETS = (256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
# packing and sentence relevance of each policy the budget runs
_BUDGET_POLICIES: dict[str, tuple[Literal["skip", "trim"], Relevance]] = {
    "skip": ("skip", "blend"),
    "trim": ("trim", "blend"),  # the default relevance
    "trim, fitted": ("trim", "fitted"),
}


@dataclass(frozen=True)
class SliceSurvival:
    """Per budget, the passages a naive slice keeps whole, and those with evidence."""

    passages: list[list[int]]
    evidence: list[list[int]]


def naive_slice(
    documents: Sequence[Document],
    budgets: Sequence[int],
    encoding: str,
    evidence: Mapping[int, Sequence[str]] | None = None,
    fmt: ContextFormat | None = None,
) -> SliceSurvival:
    """Slice the joined context at each budget; which passages and evidence survive.

    The slice is in tokens of the rendered context (the token equivalent of
    `context[:MAX_CONTEXT_CHARS]`). `evidence` maps a passage index to its
    evidence sentences, each a substring of its text.
    """
    fmt = fmt or ContextFormat()
    text = fmt.render(group_citations(documents, fmt))
    tokenizer = get_encoding(encoding)
    tokens = tokenizer.encode(text, disallowed_special=())
    passage_ends: dict[int, int] = {}
    evidence_ends: dict[int, int] = {}
    for i, document in enumerate(documents):
        block = fmt.render_passage(document)
        start = text.find(block)
        if start < 0:
            continue
        passage_ends[i] = start + len(block)
        sentences = (evidence or {}).get(i, ())
        if sentences:
            evidence_ends[i] = start + max(
                _end_of(sentence, block, i) for sentence in sentences
            )
    passages, kept_evidence = [], []
    for budget in budgets:
        length = _prefix_length(text, tokenizer.decode(tokens[:budget]))
        passages.append([i for i, end in passage_ends.items() if end <= length])
        kept_evidence.append([i for i, end in evidence_ends.items() if end <= length])
    return SliceSurvival(passages, kept_evidence)


def _end_of(sentence: str, block: str, index: int) -> int:
    offset = block.find(sentence)
    if offset < 0:
        raise ValueError(
            f"evidence sentence {sentence[:60]!r} is not in passage {index}'s text"
        )
    return offset + len(sentence)


def _prefix_length(text: str, sliced: str) -> int:
    """Characters of `text` the slice keeps (a cut character decodes to U+FFFD)."""
    kept = sliced.rstrip("\ufffd")
    if not text.startswith(kept):
        raise ValueError("a slice of the context is not a prefix of it")
    return len(kept)


def policy_survival(
    documents: Sequence[Document],
    policy: str,
    budgets: Sequence[int],
    encoding: str,
    *,
    question: str | None = None,
    evidence: Mapping[int, Sequence[str]] | None = None,
    id_key: str | None = "chunk_id",
    max_sentences: int | None = None,
    fmt: ContextFormat | None = None,
) -> PolicySurvival:
    """Per token budget: passages kept whole, evidence kept, bad cuts, overhead.

    Only the token budget decides (no `max_docs`, `min_docs=0`). A passage
    shortened by `trim` is not whole, but its evidence may survive.
    """
    if policy == "naive slice":
        plain = replace(fmt or ContextFormat(), join_neighbours=False)
        sliced = naive_slice(documents, budgets, encoding, evidence, plain)
        return PolicySurvival(sliced.passages, sliced.evidence, [0] * len(budgets))
    if policy not in _BUDGET_POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {POLICIES}")
    packing, relevance = _BUDGET_POLICIES[policy]
    passages, kept_evidence, bad_cuts, overhead = [], [], [], []
    for budget in budgets:
        settings = SurfaceSettings(
            max_docs=max(len(documents), 1),
            max_tokens=budget,
            encoding=encoding,
            min_docs=0,
            packing=packing,
            max_sentences=max_sentences,
            relevance=relevance,
        )
        context = ContextBudget(
            settings=settings, id_key=id_key, format=fmt or ContextFormat()
        ).fit(documents, question=question)
        overhead.append(
            (context.report.overhead_tokens or 0, context.report.tokens_used)
        )
        texts = {str(doc.id): doc.page_content for doc in context.documents}
        shortened = {record.key for record in context.report.trimmed}
        keys = [document_key(doc, id_key) for doc in documents]
        kept = set(context.report.kept_ids)
        passages.append(
            [i for i, key in enumerate(keys) if key in kept and key not in shortened]
        )
        kept_evidence.append(
            [
                i
                for i, sentences in (evidence or {}).items()
                if keys[i] in kept
                and all(sentence in texts.get(keys[i], "") for sentence in sentences)
            ]
        )
        bad_cuts.append(
            sum(
                not is_whole_sentences(texts[keys[i]], documents[i].page_content)
                for i, key in enumerate(keys)
                if key in shortened
            )
        )
    return PolicySurvival(passages, kept_evidence, bad_cuts, overhead)


@dataclass(frozen=True)
class PolicySurvival:
    """What one policy kept, per budget.

    `passages`: indices kept whole; `evidence`: indices with all evidence in the
    context; `bad_cuts`: kept texts not whole sentences (must be 0); `overhead`:
    (tokens of headers and markers, tokens of the context), none for the slice.
    """

    passages: list[list[int]]
    evidence: list[list[int]]
    bad_cuts: list[int]
    overhead: list[tuple[int, int]] = field(default_factory=list)


def is_whole_sentences(kept: str, original: str) -> bool:
    """Whether `kept` is whole sentences of `original`, in order, any space between.

    Every reading of `kept` as sentences is tried, so a sentence that starts a
    later one cannot hide a match.
    """
    pieces = sentences(original)
    todo, seen = [(0, 0)], set()  # (offset in kept, next sentence of original)
    while todo:
        offset, position = todo.pop()
        if offset == len(kept):
            return True
        if (offset, position) in seen:
            continue
        seen.add((offset, position))
        rest = kept[offset:]
        for index in range(position, len(pieces)):
            if rest.startswith(pieces[index]):
                after = rest[len(pieces[index]) :].lstrip()
                todo.append((len(kept) - len(after), index + 1))
    return False


def every_policy(
    candidates: Sequence[Document],
    budgets: Sequence[int],
    encoding: str,
    question: str,
    evidence: dict[int, list[str]],
    id_key: str | None,
    fmt: ContextFormat | None = None,
) -> Iterator[tuple[str, PolicySurvival]]:
    """Each packing policy on the same candidate list, at every budget."""
    for policy in POLICIES:
        yield (
            policy,
            policy_survival(
                candidates,
                policy,
                budgets,
                encoding,
                question=question,
                evidence=evidence,
                id_key=id_key,
                fmt=fmt,
            ),
        )


def shares(hits: dict[str, list[int]], total: int) -> dict[str, list[float | None]]:
    """Per policy, each count of `hits` as a share of `total` (None if 0)."""
    return {
        policy: [n / total if total else None for n in row]
        for policy, row in hits.items()
    }
