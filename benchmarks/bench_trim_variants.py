"""How `trim` shortens passages, measured: sentence caps, relevance, and where
evidence is lost. Reproduces the variant tables of BENCHMARKS.md ("Shortening
passages to whole sentences").

Every variant runs on the same fused top-10 lists of SciFact's test queries (the
corpus index comes from the evaluation cache); only gold passages whose evidence
sentences the dataset marks count. The default relevance is `blend`: IDF-weighted
overlap with 0.3 of the score of `relevance: fitted`, the model fitted on
SciFact's train claims (`benchmarks/fit_sentence_relevance.py`). The caps rows
use the default; the `relevance:` rows put other sentence scorers, defined here,
in the blend's place. The last rows compare two of them with the blend passage
by passage: the gold passages whose evidence one keeps and `blend` does not, and
the reverse, with a two-sided sign test.

`--split train` runs the same rows on SciFact's train claims (the ones the fitted
model learned from): a choice among scorers made there is not made on the test
claims the targets are read on.

    python benchmarks/bench_trim_variants.py [--dense] [--split train]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from functools import cache, partial
from typing import Any
from unittest.mock import patch

import Stemmer
from _common import parser_with_data
from bm25s.stopwords import STOPWORDS_EN
from fit_sentence_relevance import REGULARISATION, training_rows
from langchain_core.documents import Document
from scipy.stats import binomtest

from langchain_ragbudget import build_embeddings
from langchain_ragbudget.budget import _context_budget as budget_module
from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.evaluation import (
    BeirDataset,
    cached_hybrid_retriever,
    judged_id,
    load_beir,
    policy_survival,
)

# The script compares sentence scorers, so it reads the one private runtime module
# that scores sentences (its features, its fitted model and `relevance: fitted`).
from langchain_ragbudget.evidence._sentence_scoring import (
    FEATURES,
    SentenceModel,
    fitted_relevance,
    sentence_features,
    shipped_model,
    terms,
)
from langchain_ragbudget.progress import ProgressBars

BUDGETS = [256, 384, 512, 768, 1024]
ENCODING = "o200k_base"
Case = tuple[str, list[Document], dict[int, list[str]]]


def cases(dataset: BeirDataset) -> list[Case]:
    with ProgressBars(transient=True) as progress:  # embeds SciFact on a first run
        hybrid = cached_hybrid_retriever(
            dataset.corpus, load_config(), name=dataset.name, progress=progress
        )
    out = []
    for query_id, text in dataset.queries.items():
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        rationales = dataset.rationales.get(query_id, {})
        fused = hybrid.fuse([r.invoke(text) for r in hybrid.retrievers], hybrid.k)
        evidence = {
            i: rationales[judged_id(d)]
            for i, d in enumerate(fused)
            if judged_id(d) in relevant and judged_id(d) in rationales
        }
        if evidence:
            out.append((text, list(fused), evidence))
    return out


def evidence_hits(case: Case, policy: str = "trim", **kwargs: Any) -> list[int]:
    """Gold passages of one query whose evidence `policy` keeps, per budget."""
    text, documents, evidence = case
    result = policy_survival(
        documents, policy, BUDGETS, ENCODING, question=text, evidence=evidence, **kwargs
    )
    return [len(kept) for kept in result.evidence]


def percent(all_cases: list[Case], hits: list[list[int]]) -> list[float]:
    total = sum(len(evidence) for _, _, evidence in all_cases)
    return [100 * sum(column) / total for column in zip(*hits, strict=True)]


def evidence_kept(all_cases: list[Case], **kwargs: Any) -> list[float]:
    return percent(all_cases, [evidence_hits(case, **kwargs) for case in all_cases])


Scorer = Callable[[str | None, Sequence[str]], list[float]]


def as_relevance(scorer: Scorer) -> AbstractContextManager[Any]:
    """`scorer` in the place of the default `relevance: blend`, for a `trim` row.

    `ContextBudget` takes no scorer as a parameter (its surface settings choose
    between the shipped ones), so the name the stage looks up is replaced.
    """
    return patch.object(budget_module, "blended_relevance", scorer)


def kept_by(all_cases: list[Case], scorer: Scorer) -> list[float]:
    """Evidence kept by `trim` with `scorer` alone choosing the sentences."""
    with as_relevance(scorer):
        return evidence_kept(all_cases)


COVERAGE = FEATURES.index("coverage")


def overlap_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """The blend's overlap on its own: the IDF-weighted question terms a sentence
    holds, the IDF over the passage's sentences."""
    wanted = terms(question or "")
    found = [terms(s) & wanted for s in sentences]
    frequency = Counter(term for hits in found for term in hits)
    n = len(sentences)
    return [float(sum(math.log(1 + n / frequency[t]) for t in hits)) for hits in found]


def fitted_score(model: SentenceModel, row: Sequence[float]) -> float:
    """As the package scores a sentence: P(evidence), +1 holding a question term."""
    return model.probability(row) + (1.0 if row[COVERAGE] > 0 else 0.0)


def fitted_with(model: SentenceModel) -> Scorer:
    """`relevance: fitted` with another model than the shipped one."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        if not question or not sentences:
            return [0.0] * len(sentences)
        rows = sentence_features(question, sentences)
        return [fitted_score(model, row) for row in rows]

    return scored


def overlap(question: str | None, sentences: Sequence[str]) -> list[float]:
    wanted = terms(question or "")
    return [float(len(terms(s) & wanted)) for s in sentences]


def later_prior(question: str | None, sentences: Sequence[str]) -> list[float]:
    base = overlap_relevance(question, sentences)
    last = max(len(sentences) - 1, 1)
    return [score + 0.3 * i / last for i, score in enumerate(base)]


def corpus_idf(dataset: BeirDataset) -> dict[str, float]:
    """Each term's BM25 (Lucene) IDF over the whole corpus, as bm25s weighs it."""
    frequency: Counter[str] = Counter()
    for document in dataset.corpus:
        frequency.update(terms(document.page_content))
    n = len(dataset.corpus)
    return {t: math.log(1 + (n - df + 0.5) / (df + 0.5)) for t, df in frequency.items()}


def corpus_overlap(idf: dict[str, float]) -> Scorer:
    """IDF-weighted overlap, the IDF over the corpus (the BM25 side's)."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        wanted = terms(question or "")
        return [sum(idf.get(t, 0.0) for t in terms(s) & wanted) for s in sentences]

    return scored


_WORD = re.compile(r"\w\w+")
_STEMMER = Stemmer.Stemmer("english")
_STOPWORDS = frozenset(STOPWORDS_EN)


def stems(text: str) -> list[str]:
    """The terms of `text` with repeats (`_sentence_scoring.terms` keeps a set)."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    found: list[str] = _STEMMER.stemWords(words)
    return found


def bm25_sentences(idf: dict[str, float], k1: float, b: float) -> Scorer:
    """BM25 of each sentence as a document: corpus IDF, term-frequency
    saturation `k1`, length normalised (`b`) by the passage's mean sentence."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        wanted = terms(question or "")
        counts = [Counter(stems(s)) for s in sentences]
        lengths = [sum(c.values()) for c in counts]
        mean = sum(lengths) / max(len(lengths), 1) or 1.0
        return [
            sum(
                idf.get(t, 0.0) * c[t] * (k1 + 1) / (c[t] + k1 * (1 - b + b * n / mean))
                for t in wanted
                if c[t]
            )
            for c, n in zip(counts, lengths, strict=True)
        ]

    return scored


def with_neighbours(base: Scorer, share: float) -> Scorer:
    """A sentence's score plus `share` of each neighbour's."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        own = base(question, sentences)
        last = len(own) - 1
        return [
            x + share * ((own[i - 1] if i else 0.0) + (own[i + 1] if i < last else 0.0))
            for i, x in enumerate(own)
        ]

    return scored


POSITION = ("position", "last", "log_sentences")


def lexical_only_model(folder: str) -> Scorer:
    """The fitted model refitted without its position features (SciFact train)."""
    from sklearn.linear_model import LogisticRegression

    rows, labels = training_rows(load_beir(folder, split="train"))
    keep = [i for i, name in enumerate(FEATURES) if name not in POSITION]
    fitted = LogisticRegression(C=REGULARISATION, max_iter=5000).fit(
        [[row[i] for i in keep] for row in rows], labels
    )
    weights = dict(zip(keep, fitted.coef_[0].tolist(), strict=True))
    model = SentenceModel(
        tuple(weights.get(i, 0.0) for i in range(len(FEATURES))),
        float(fitted.intercept_[0]),
    )
    return fitted_with(model)


def blend_at(share: float) -> Scorer:
    """`relevance: blend` with another fitted share than the shipped one."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        if not question or not sentences:
            return [0.0] * len(sentences)
        rows = sentence_features(question, sentences)
        top = max(row[COVERAGE] for row in rows)
        if not top:
            return [0.0] * len(sentences)
        model = shipped_model()
        return [
            (1 - share) * row[COVERAGE] / top + share * fitted_score(model, row)
            for row in rows
        ]

    return scored


def position_scaled(factor: float) -> Scorer:
    """The fitted model with its position weights (`position`, `last`) times
    `factor`: between `fitted, no position` (0) and the shipped model (1)."""
    shipped = shipped_model()
    weights = list(shipped.coefficients)
    for name in ("position", "last"):
        weights[FEATURES.index(name)] *= factor
    return fitted_with(SentenceModel(tuple(weights), shipped.intercept))


def with_list_idf(all_cases: list[Case]) -> list[float]:
    """`trim` with the IDF over the candidate list, not the passage's sentences."""
    hits = []
    for case in all_cases:
        documents = case[1]
        frequency: Counter[str] = Counter()
        for document in documents:
            frequency.update(terms(document.page_content))

        def scored(
            question: str | None,
            sentences: Sequence[str],
            n: int = len(documents),
            frequency: Counter[str] = frequency,
        ) -> list[float]:
            wanted = terms(question or "")
            return [
                sum(math.log(1 + n / frequency[t]) for t in terms(s) & wanted)
                for s in sentences
            ]

        with as_relevance(scored):
            hits.append(evidence_hits(case))
    return percent(all_cases, hits)


def with_oracle_relevance(all_cases: list[Case]) -> list[float]:
    """`trim` told which sentences hold the evidence: the ceiling of any relevance."""
    hits = []
    for case in all_cases:
        marked = [s for sentences in case[2].values() for s in sentences]

        def scored(
            question: str | None,
            sentences: Sequence[str],
            marked: list[str] = marked,
        ) -> list[float]:
            return [float(any(m in s or s in m for m in marked)) for s in sentences]

        with as_relevance(scored):
            hits.append(evidence_hits(case))
    return percent(all_cases, hits)


Vector = Callable[[str], tuple[float, ...]]


def sentence_vectors() -> Vector:
    """MiniLM vectors of texts, each embedded once per run."""
    embeddings = build_embeddings(load_config())

    @cache
    def vector(text: str) -> tuple[float, ...]:
        return tuple(embeddings.embed_query(text))

    return vector


def cosines(vector: Vector, question: str, sentences: Sequence[str]) -> list[float]:
    wanted = vector(question)
    return [
        sum(a * b for a, b in zip(vector(s), wanted, strict=True)) for s in sentences
    ]


def dense_relevance(vector: Vector, alpha: float, base: Scorer, scale: bool) -> Scorer:
    """`alpha` times each sentence's MiniLM cosine with the question plus `1 - alpha`
    times the `base` score (scaled to a top of 1 when `scale`): what embedding every
    sentence at query time would buy."""

    def scored(question: str | None, sentences: Sequence[str]) -> list[float]:
        own = base(question, sentences)
        if not question or not sentences:
            return own
        top = (max(own) or 1.0) if scale else 1.0
        return [
            alpha * c + (1 - alpha) * x / top
            for c, x in zip(cosines(vector, question, sentences), own, strict=True)
        ]

    return scored


def dense_features(
    vector: Vector, question: str, sentences: Sequence[str]
) -> list[list[float]]:
    """`FEATURES` plus the cosine, its gap to the best sentence, the neighbours'."""
    cos = cosines(vector, question, sentences)
    best, last = max(cos), len(cos) - 1
    return [
        [*row, c, c - best, cos[i - 1] if i else 0.0, cos[i + 1] if i < last else 0.0]
        for i, (row, c) in enumerate(
            zip(sentence_features(question, sentences), cos, strict=True)
        )
    ]


def dense_model(vector: Vector, folder: str) -> Scorer:
    """The fitted model refitted on SciFact train with `dense_features` (same +1
    for a sentence holding a question term)."""
    from sklearn.linear_model import LogisticRegression

    rows, labels = training_rows(
        load_beir(folder, split="train"), partial(dense_features, vector)
    )
    fitted = LogisticRegression(C=REGULARISATION, max_iter=5000).fit(rows, labels)

    def scored(question: str | None, pieces: Sequence[str]) -> list[float]:
        if not question or not pieces:
            return [0.0] * len(pieces)
        rows = dense_features(vector, question, pieces)
        chance = fitted.predict_proba(rows)[:, 1]
        return [float(p) + (row[0] > 0) for p, row in zip(chance, rows, strict=True)]

    return scored


def where_lost(all_cases: list[Case], budget: int) -> Counter[str]:
    outcome: Counter[str] = Counter()
    for text, documents, evidence in all_cases:
        settings = SurfaceSettings(
            max_docs=len(documents),
            max_tokens=budget,
            encoding=ENCODING,
            min_docs=0,
            packing="trim",
        )
        context = ContextBudget(settings=settings).fit(documents, question=text)
        kept = {str(d.id): d.page_content for d in context.documents}
        shortened = {r.key for r in context.report.trimmed}
        for i, sentences in evidence.items():
            key, rank = str(documents[i].id), min(i + 1, 4)
            if key not in kept:
                outcome[f"not in the prompt (rank {rank}{'+' * (rank == 4)})"] += 1
            elif all(s in kept[key] for s in sentences):
                outcome["kept, shortened" if key in shortened else "kept whole"] += 1
            else:
                outcome[f"shortened, evidence missed (rank {rank})"] += 1
    return outcome


def kept_passages(all_cases: list[Case]) -> list[set[tuple[int, int]]]:
    """Per budget, the (query, passage) pairs whose evidence `trim` keeps."""
    kept: list[set[tuple[int, int]]] = [set() for _ in BUDGETS]
    for number, (text, documents, evidence) in enumerate(all_cases):
        result = policy_survival(
            documents, "trim", BUDGETS, ENCODING, question=text, evidence=evidence
        )
        for column, indices in zip(kept, result.evidence, strict=True):
            column.update((number, i) for i in indices)
    return kept


def paired(all_cases: list[Case], name: str, scorer: Scorer) -> None:
    """Gold passages whose evidence `scorer` keeps and the blend does not, and the
    reverse, per budget, with the two-sided sign test's p of the difference."""
    blend = kept_passages(all_cases)
    with as_relevance(scorer):
        other = kept_passages(all_cases)
    cells = []
    for ours, theirs in zip(blend, other, strict=True):
        gained, lost = len(theirs - ours), len(ours - theirs)
        p = binomtest(gained, gained + lost).pvalue if gained + lost else 1.0
        cells.append(f"+{gained}/-{lost} p {p:.2f}")
    print(f"  {name:10}", " | ".join(cells))


def row(name: str, values: list[float]) -> None:
    print(f"{name:38}", " ".join(f"{v:5.1f}" for v in values))


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument(
        "--dense",
        action="store_true",
        help="also score sentences by embedding each one (slow: minutes)",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=("test", "train"),
        help="the claims to measure on (default: test)",
    )
    args = parser.parse_args()
    dataset = load_beir(args.data, split=args.split)
    all_cases = cases(dataset)
    total = sum(len(evidence) for _, _, evidence in all_cases)
    print(
        f"SciFact {args.split}: {total} gold passages with marked evidence; "
        "evidence kept (%) at"
    )
    row("budget", [float(b) for b in BUDGETS])
    row("trim (the default, blend)", evidence_kept(all_cases))
    for cap in (1, 2, 3, 4):
        row(
            f"  at most {cap} sentence(s) a passage",
            evidence_kept(all_cases, max_sentences=cap),
        )
    idf = corpus_idf(dataset)
    old, corpus = overlap_relevance, corpus_overlap(idf)
    for name, scorer in (
        ("  relevance: overlap (blend's part)", old),
        ("  relevance: fitted (the option)", fitted_relevance),
        ("  relevance: term overlap", overlap),
        ("  relevance: + later prior", later_prior),
        ("  relevance: IDF over the corpus", corpus),
        ("  relevance: BM25 per sentence", bm25_sentences(idf, 1.2, 0.75)),
        ("  relevance: BM25, k1 0.5, b 0.5", bm25_sentences(idf, 0.5, 0.5)),
        ("  relevance: old + 0.1 neighbours", with_neighbours(old, 0.1)),
        ("  relevance: old + 0.25 neighbours", with_neighbours(old, 0.25)),
        ("  relevance: corpus + 0.1 neighbours", with_neighbours(corpus, 0.1)),
        ("  relevance: fitted, no position", lexical_only_model(args.data)),
        *(
            (f"  relevance: fitted, position x {factor}", position_scaled(factor))
            for factor in (0.5, 0.75, 1.25)
        ),
        *(
            (f"  relevance: fitted x {share} + overlap", blend_at(share))
            for share in (0.1, 0.2, 0.35, 0.5, 0.65, 0.8)
        ),
    ):
        row(name, kept_by(all_cases, scorer))
    row("  relevance: IDF over the list", with_list_idf(all_cases))
    row("  relevance: oracle (ceiling)", with_oracle_relevance(all_cases))
    if args.dense:
        vector = sentence_vectors()
        for alpha in (1.0, 0.8, 0.5):
            scorer = dense_relevance(vector, alpha, old, True)
            row(f"  relevance: dense x {alpha}", kept_by(all_cases, scorer))
        for alpha in (0.3, 0.5):
            scorer = dense_relevance(vector, alpha, fitted_relevance, False)
            row(f"  relevance: fitted + dense x {alpha}", kept_by(all_cases, scorer))
        scorer = dense_model(vector, args.data)
        row("  relevance: fitted, dense features", kept_by(all_cases, scorer))
    print(
        "against blend, passage by passage (evidence kept only by it / only by "
        f"blend, sign test p) at {', '.join(map(str, BUDGETS))} tokens:"
    )
    paired(all_cases, "overlap", old)
    paired(all_cases, "fitted", fitted_relevance)
    for budget in (384, 1024):
        print(f"where the evidence goes at {budget} tokens:")
        for what, n in sorted(where_lost(all_cases, budget).items()):
            print(f"  {what:40} {n}")


if __name__ == "__main__":
    main()
