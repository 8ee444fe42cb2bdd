"""Which sentences of a passage matter for the question: cheap, offline, explainable.

Two parts, read off one pass over the passage's sentences (`sentence_features`):

- the overlap: the IDF-weighted question terms a sentence holds, IDF over the
  passage's own sentences; it assumes nothing about where a passage puts its point;
- the fitted score: a logistic model's probability that a sentence is evidence,
  plus 1 when it holds a question term. Its coefficients are data
  (`sentence_relevance.json`, fitted by `benchmarks/fit_sentence_relevance.py` on
  SciFact train); it learned that abstracts state their findings late.

`blended_relevance` (the default) is the overlap scaled to a top of 1 plus a
`FITTED_SHARE` of the fitted score: the overlap decides, the model mostly breaks
near-ties. `fitted_relevance` alone keeps more of abstracts at small budgets but
prefers a later sentence in text that states its point first (BENCHMARKS.md,
Budget). Terms are made as the BM25 side makes them (bm25s stopwords, PyStemmer).
With no question every sentence scores 0 and the leading ones win.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

from langchain_ragbudget.errors import ConfigError

_WORD = re.compile(r"\w\w+")
MODEL_FILE = "sentence_relevance.json"

# `coverage` is the IDF weight of the question terms a sentence holds over that of
# all; its neighbours' count because evidence often runs over adjacent sentences.
# No feature marks the first sentence: fitted with one, the model learned to pass
# over an abstract's opening, and so over a runbook's or FAQ's, where answers stand.
FEATURES = (
    "coverage",
    "gap_to_best",
    "previous_coverage",
    "next_coverage",
    "question_share",
    "log_terms",
    "position",
    "last",
    "log_sentences",
)

_COVERAGE = FEATURES.index("coverage")

# Chosen on SciFact train among the shares that rank the sample corpus's answering
# sentences as well as the overlap alone (BENCHMARKS.md, Budget).
FITTED_SHARE = 0.3


@cache
def _term_rules() -> tuple[frozenset[str], Callable[[list[str]], list[str]]]:
    """bm25s's English stopwords and PyStemmer's stemmer, imported on first use.

    So importing the budget loads neither bm25s (numpy, scipy) nor the stemmer
    until a passage is shortened.
    """
    import Stemmer
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN), Stemmer.Stemmer("english").stemWords


@lru_cache(maxsize=200_000)
def terms(text: str) -> frozenset[str]:
    """The stemmed, lower-cased words of `text`, stopwords left out."""
    stopwords, stem = _term_rules()
    return frozenset(
        stem([w for w in _WORD.findall(text.lower()) if w not in stopwords])
    )


def _passage_idf(per_sentence: Sequence[frozenset[str]]) -> dict[str, float]:
    count = len(per_sentence)
    frequency: dict[str, int] = {}
    for found in per_sentence:
        for term in found:
            frequency[term] = frequency.get(term, 0) + 1
    return {term: math.log(1 + count / n) for term, n in frequency.items()}


def sentence_features(question: str, sentences: Sequence[str]) -> list[list[float]]:
    """One row of `FEATURES` per sentence of one passage (`question` non-empty)."""
    wanted = terms(question)
    per_sentence = [terms(sentence) for sentence in sentences]
    found = [sentence_terms & wanted for sentence_terms in per_sentence]
    weight = _passage_idf(found)
    unseen = math.log(1 + len(sentences))  # a question term no sentence holds
    total = sum(weight.get(term, unseen) for term in wanted) or 1.0
    coverage = [sum(weight[term] for term in hits) / total for hits in found]
    best = max(coverage, default=0.0)
    count = len(sentences)
    last = count - 1
    rows = []
    for i, hits in enumerate(found):
        rows.append(
            [
                coverage[i],
                coverage[i] - best,
                coverage[i - 1] if i else 0.0,
                coverage[i + 1] if i < last else 0.0,
                len(hits) / max(len(wanted), 1),
                math.log1p(len(per_sentence[i])),
                i / last if last else 0.0,
                float(i == last),
                math.log(count),
            ]
        )
    return rows


@dataclass(frozen=True)
class SentenceModel:
    """A logistic model over `FEATURES`: P(evidence) = sigmoid(intercept + w . x)."""

    coefficients: tuple[float, ...]
    intercept: float

    @classmethod
    def from_mapping(cls, data: Mapping[str, object], source: str) -> SentenceModel:
        """The model in `data` (`{"coefficients": {feature: w}, "intercept": b}`).

        Raises:
            ConfigError: A feature is missing or unknown, or a value is not a
                finite number; the message names `source`.
        """
        weights = data.get("coefficients")
        if not isinstance(weights, Mapping) or set(weights) != set(FEATURES):
            got = sorted(weights) if isinstance(weights, Mapping) else weights
            raise ConfigError(
                source,
                "coefficients",
                got,
                f"must map exactly the features {list(FEATURES)}",
            )
        values = [*(weights[name] for name in FEATURES), data.get("intercept")]
        for name, value in zip([*FEATURES, "intercept"], values, strict=True):
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or not math.isfinite(value):
                key = name if name == "intercept" else f"coefficients.{name}"
                raise ConfigError(source, key, value, "must be a finite number")
        numbers = [float(v) for v in values]
        return cls(tuple(numbers[:-1]), numbers[-1])

    def probability(self, row: Sequence[float]) -> float:
        z = self.intercept + sum(
            w * x for w, x in zip(self.coefficients, row, strict=True)
        )
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


@cache
def shipped_model() -> SentenceModel:
    text = resources.files("langchain_ragbudget").joinpath(MODEL_FILE).read_text()
    return SentenceModel.from_mapping(json.loads(text), MODEL_FILE)


def fitted_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """P(evidence), plus 1 for a sentence holding a question term: in [0, 2).

    The model learned from abstracts that findings come late; alone it would
    prefer a late sentence unrelated to the question to an early one that answers
    it, so a sentence with no question term never outranks one with some.
    """
    if not question or not sentences:
        return [0.0] * len(sentences)
    model = shipped_model()
    return [_fitted_score(model, row) for row in sentence_features(question, sentences)]


def _fitted_score(model: SentenceModel, row: Sequence[float]) -> float:
    return model.probability(row) + (1.0 if row[_COVERAGE] > 0 else 0.0)


def blended_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """`1 - FITTED_SHARE` of the overlap scaled to 1, plus `FITTED_SHARE` of the fitted.

    The overlap alone ties sentences holding the same terms; the model alone
    prefers late sentences. A passage where no sentence holds a question term
    scores 0 throughout, so its leading sentences win rather than the model's
    pick by position.
    """
    if not question or not sentences:
        return [0.0] * len(sentences)
    rows = sentence_features(question, sentences)
    top = max(row[_COVERAGE] for row in rows)
    if not top:
        return [0.0] * len(sentences)
    model = shipped_model()
    return [
        (1 - FITTED_SHARE) * row[_COVERAGE] / top
        + FITTED_SHARE * _fitted_score(model, row)
        for row in rows
    ]
