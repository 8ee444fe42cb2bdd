"""The sentence scorers on another genre: the bundled sample corpus (company docs).

SciFact, the only data set here with marked evidence sentences, is one genre:
abstracts, which state their findings late. The `fitted` scorer learned that. This
probe asks questions a user of the sample corpus would ask, each with the one
sentence of one passage that answers it (written down before either scorer was run
on them), and reports where each scorer ranks that sentence among the passage's
sentences: top 1, top 2 and the mean reciprocal rank. With room for one or two
sentences, `trim` keeps the top of that order. The shipped scorers (`blend`, the
default, and `fitted`) are compared with the blend's overlap part on its own.

    python benchmarks/bench_relevance_docs.py
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence

# The script compares the scorers of the private `_sentence_scoring` module, on
# sentences split by `_sentences.sentences`, exactly as the budget stage splits them.
from langchain_ragbudget.evidence._sentence_scoring import (
    FEATURES,
    FITTED_SHARE,
    blended_relevance,
    fitted_relevance,
    sentence_features,
)
from langchain_ragbudget.evidence._sentences import sentences
from langchain_ragbudget.sample import load_sample_corpus

Scorer = Callable[[str | None, Sequence[str]], list[float]]

# (passage id, question, a phrase only the answering sentence holds)
PROBES = [
    (
        "expenses-policy::0",
        "Which expenses need the department head's approval?",
        "department head",
    ),
    (
        "expenses-policy::0",
        "How soon are approved expenses reimbursed?",
        "next payroll run",
    ),
    (
        "expenses-policy::0",
        "Do I need a receipt for a $30 lunch?",
        "Itemized receipts are required",
    ),
    ("expenses-policy::1", "What is the hotel cap in London?", "$300 per night"),
    (
        "expenses-policy::1",
        "What is the mileage rate for using my own car?",
        "$0.67 per mile",
    ),
    (
        "expenses-policy::1",
        "How far in advance should business travel be booked?",
        "14 days in advance",
    ),
    ("incident-runbook::0", "How do I declare an incident?", "/incident"),
    ("incident-runbook::0", "What counts as a SEV1?", "SEV1 means a full outage"),
    (
        "incident-runbook::2",
        "How often does the communications lead update the status page during a SEV1?",
        "at least every 30 minutes",
    ),
    ("incident-runbook::2", "Who keeps the incident timeline?", "The scribe keeps"),
    ("incident-runbook::4", "When is a postmortem due?", "due within 5 business days"),
    (
        "incident-runbook::4",
        "When are action items from SEV1 incidents due?",
        "due within 30 days",
    ),
    (
        "security-access-policy::0",
        "How long must Keystone passwords be?",
        "at least 14 characters",
    ),
    (
        "security-access-policy::0",
        "Are SMS codes accepted as a second factor?",
        "SMS codes and email codes are not accepted",
    ),
    (
        "security-access-policy::1",
        "What does the break-glass role do?",
        "break-glass role",
    ),
    (
        "security-access-policy::2",
        "How quickly must access be revoked when someone leaves?",
        "within 24 hours",
    ),
    (
        "api-rate-limits::0",
        "What is the burst allowance of the API?",
        "burst allowance of 50",
    ),
    (
        "api-rate-limits::0",
        "What is the workspace ceiling for requests?",
        "workspace ceiling of 3,000",
    ),
    ("api-rate-limits::1", "Are requests rejected with 429 billed?", "are not billed"),
    ("api-rate-limits::1", "How many times do the SDKs retry a 429?", "up to 3 times"),
    (
        "api-authentication::0",
        "How many active API keys can a workspace have?",
        "at most 10 active API keys",
    ),
    (
        "api-authentication::0",
        "How fast do revoked keys stop working?",
        "within 60 seconds",
    ),
    (
        "architecture-overview::0",
        "How long is the events topic retained?",
        "retained for 7 days",
    ),
    ("architecture-overview::1", "Where is delivery metadata stored?", "ClickHouse"),
    (
        "architecture-overview::2",
        "How often are metrics scraped?",
        "scraped every 15 seconds",
    ),
    (
        "architecture-overview::2",
        "At what rate are traces sampled?",
        "sampled at 1 percent",
    ),
    (
        "architecture-overview::3",
        "What is the recovery time objective for a regional failover?",
        "recovery time objective",
    ),
    (
        "support-escalation-guide::0",
        "What is the first-response target for a P1 from an Enterprise customer?",
        "Enterprise customers get a first response within 1 hour",
    ),
    (
        "support-escalation-guide::0",
        "Do automatic replies count as a first response?",
        "automatic replies do not count",
    ),
    ("glossary::0", "What is Gatehouse?", "Gatehouse: the internal tool"),
]


def overlap(question: str | None, parts: Sequence[str]) -> list[float]:
    """The blend's overlap part alone: each sentence's share of the question's
    IDF weight (the IDF over the passage's sentences)."""
    if not question or not parts:
        return [0.0] * len(parts)
    coverage = FEATURES.index("coverage")
    return [row[coverage] for row in sentence_features(question, parts)]


def rank_of_answer(scorer: Scorer, question: str, parts: list[str], answer: int) -> int:
    """Where `scorer` puts the answering sentence (1 = first; ties to the earlier)."""
    scores = scorer(question, parts)
    order = sorted(range(len(parts)), key=lambda i: (-scores[i], i))
    return order.index(answer) + 1


def main() -> None:
    texts = {str(doc.id): doc.page_content for doc in load_sample_corpus()}
    scorers: dict[str, Scorer] = {
        "overlap": overlap,
        "fitted": fitted_relevance,
        "blend": blended_relevance,
    }
    ranks: dict[str, list[int]] = {name: [] for name in scorers}
    positions = []
    for passage, question, phrase in PROBES:
        parts = sentences(texts[passage])
        (answer,) = [i for i, part in enumerate(parts) if phrase in part]
        positions.append(answer / max(len(parts) - 1, 1))
        for name, scorer in scorers.items():
            ranks[name].append(rank_of_answer(scorer, question, parts, answer))
    print(
        f"{len(PROBES)} questions on the sample corpus; the answering sentence's "
        f"relative position in its passage: median {statistics.median(positions):.2f}"
        " (0 first, 1 last)"
    )
    print(f"blend: overlap with {FITTED_SHARE} of the fitted score")
    print(f"{'scorer':8} {'top 1':>6} {'top 2':>6} {'MRR':>6}")
    for name, found in ranks.items():
        top1 = sum(r == 1 for r in found)
        top2 = sum(r <= 2 for r in found)
        mrr = statistics.fmean(1 / r for r in found)
        print(f"{name:8} {top1:>6} {top2:>6} {mrr:>6.3f}")


if __name__ == "__main__":
    main()
