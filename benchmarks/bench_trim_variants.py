"""How `trim` shares the budget, measured: caps, shares, relevance, and where
evidence is lost. Reproduces the variant tables of BENCHMARKS.md ("Shortening
passages to whole sentences").

Every variant runs on the same fused top-10 lists of SciFact's test queries (the
corpus index comes from the evaluation cache); only gold passages whose evidence
sentences the dataset marks count. The default relevance is `blend`: IDF-weighted
overlap (`relevance: overlap`) with 0.3 of the score of `relevance: fitted`, the
model fitted on SciFact's train claims (`benchmarks/fit_sentence_relevance.py`).
The caps and shares rows use the default; the `relevance:` rows swap other sentence
scorers in for the overlap, with no fitted share.

`--split train` runs the same rows on SciFact's train claims (the ones the fitted
model learned from): a choice among scorers made there is not made on the test
claims the targets are read on.

    python benchmarks/bench_trim_variants.py [--dense] [--split train]
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache, partial
from typing import Any

import Stemmer
from _common import parser_with_data
from bm25s.stopwords import STOPWORDS_EN
from fit_sentence_relevance import REGULARISATION, training_rows
from langchain_core.documents import Document

from langchain_ragbudget import build_embeddings
from langchain_ragbudget.budget import _context_budget as budget_module
from langchain_ragbudget.budget import _packing as packing
from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.evaluation import (
    BeirDataset,
    cached_hybrid_retriever,
    judged_id,
    load_beir,
    policy_survival,
)
from langchain_ragbudget.evidence import _sentence_scoring as scoring

# The script compares sentence scorers, so it reads the one private runtime module
# that scores sentences (its features, fitted model and the two shipped scorers).
from langchain_ragbudget.evidence._sentence_scoring import (
    FEATURES,
    SentenceModel,
    blended_relevance,
    fitted_relevance,
    overlap_relevance,
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


@contextmanager
def patched(name: str, value: Any, module: Any = budget_module) -> Iterator[None]:
    """`module.<name>` replaced by `value` for the block.

    The variants swap the budget stage's packer or a sentence scorer, and
    `ContextBudget` takes neither as a parameter (its surface settings choose
    among the shipped ones): the names the stage looks up are replaced instead.
    """
    original = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, original)


def as_overlap(scorer: Scorer) -> Any:
    """`scorer` in the place of `relevance: overlap`'s, for a `trim, overlap` row."""
    return patched("overlap_relevance", scorer, scoring)


def kept_by(all_cases: list[Case], scorer: Scorer) -> list[float]:
    """Evidence kept by `trim` with `scorer` alone choosing the sentences."""
    with as_overlap(scorer):
        return evidence_kept(all_cases, policy="trim, overlap")


def share_of_budget(fraction: float) -> Callable[..., packing.PackResult]:
    def pack(items: Sequence[packing.PackItem], **kwargs: Any) -> packing.PackResult:
        kwargs["max_passage_tokens"] = int(fraction * kwargs["max_tokens"])
        return packing.pack(items, **kwargs)

    return pack


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
    return partial(fitted_relevance, model=model)


def blend_at(share: float) -> Scorer:
    """`relevance: blend` with another fitted share than the shipped one."""
    return partial(blended_relevance, share=share)


def position_scaled(factor: float) -> Scorer:
    """The fitted model with its position weights (`position`, `last`) times
    `factor`: between `fitted, no position` (0) and the shipped model (1)."""
    shipped = shipped_model()
    weights = list(shipped.coefficients)
    for name in ("position", "last"):
        weights[FEATURES.index(name)] *= factor
    model = SentenceModel(tuple(weights), shipped.intercept)
    return partial(fitted_relevance, model=model)


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

        with as_overlap(scored):
            hits.append(evidence_hits(case, "trim, overlap"))
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

        with as_overlap(scored):
            hits.append(evidence_hits(case, "trim, overlap"))
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
    for fraction in (0.75, 0.5, 0.33):
        with patched("pack", share_of_budget(fraction)):
            row(f"  a passage takes <= {fraction} of it", evidence_kept(all_cases))
    idf = corpus_idf(dataset)
    old, corpus = overlap_relevance, corpus_overlap(idf)
    for name, scorer in (
        ("  relevance: overlap (the option)", old),
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
    for budget in (384, 1024):
        print(f"where the evidence goes at {budget} tokens:")
        for what, n in sorted(where_lost(all_cases, budget).items()):
            print(f"  {what:40} {n}")


if __name__ == "__main__":
    main()
