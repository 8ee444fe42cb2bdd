"""Which sentences of a passage matter for the question: cheap, offline, explainable.

Two scorers, chosen per surface (`relevance`), both built from two parts read off
one pass over the passage's sentences (`sentence_features`):

- the overlap: the IDF-weighted question terms a sentence holds, the IDF taken over
  the passage's own sentences. It assumes nothing about where a passage puts its
  point;
- the fitted score: the probability, by a logistic model, that a sentence is
  evidence for the question, plus 1 when the sentence holds a question term. The
  model reads nine cheap features of the sentence within its passage (how much of
  the question it covers, the same for its neighbours, its length, where it
  stands); its coefficients are data (`sentence_relevance.json`), fitted on
  SciFact's *train* claims by `benchmarks/fit_sentence_relevance.py`. It learned
  that abstracts state their findings late.

`blended_relevance` (the default) is the overlap, scaled to a top of 1, with a
`FITTED_SHARE` of the fitted score: the overlap decides, the model mostly breaks
near-ties. It ranks the answering sentence of documentation as the overlap alone
does and keeps more evidence of abstracts. `fitted_relevance` is the fitted score
alone: on abstracts it keeps more evidence than the blend at small budgets, and on
text that states its point first it prefers a later sentence (BENCHMARKS.md).

Both need only the passage and the question. Terms are made the way the BM25 side
makes them (lower case, English stopwords of bm25s, the PyStemmer English stemmer).
With no question every sentence scores 0 and the leading sentences win, which the
budget's record says.
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
"""The model's inputs, per sentence of one passage.

`coverage`: the IDF weight of the question terms the sentence holds over that of all
question terms; `gap_to_best`: its coverage minus the passage's best; previous and
next: the neighbours' coverage (evidence often runs over adjacent sentences);
`question_share`: the share of question terms it holds, unweighted; `log_terms`:
log(1 + its distinct terms); `position`: 0 for the first sentence to 1 for the last;
`last`: 1 or 0; `log_sentences`: log of the passage's sentence count.

No feature marks the first sentence: fitted with one, the model learned to pass over
an abstract's opening background, and so over the first sentence of a runbook or an
FAQ, where the answer usually stands.
"""

_COVERAGE = FEATURES.index("coverage")  # where a feature row holds it

FITTED_SHARE = 0.3
"""The fitted score's share in `blended_relevance`.

Chosen on SciFact's *train* claims, among the shares that rank the answering
sentence of the sample corpus's 30 questions as well as the overlap alone does (0
to 0.35, `benchmarks/bench_relevance_docs.py`): evidence kept by `trim` is flat
over 0.1 to 0.35 there, 0.3 the highest (`benchmarks/bench_trim_variants.py
--split train`).
"""


@cache
def _term_rules() -> tuple[frozenset[str], Callable[[list[str]], list[str]]]:
    """bm25s's English stopwords and PyStemmer's English stemmer, loaded on first use.

    Imported here rather than at the top so that importing the budget loads neither
    bm25s (with numpy and scipy) nor the stemmer until a passage is shortened.
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
    """log(1 + n / df) of each term, df counted over the passage's sentences."""
    count = len(per_sentence)
    frequency: dict[str, int] = {}
    for found in per_sentence:
        for term in found:
            frequency[term] = frequency.get(term, 0) + 1
    return {term: math.log(1 + count / n) for term, n in frequency.items()}


def sentence_features(question: str, sentences: Sequence[str]) -> list[list[float]]:
    """The `FEATURES` of each sentence of one passage, in that order.

    Args:
        question: The question (non-empty).
        sentences: The passage's sentences, in order.

    Returns:
        One row per sentence.
    """
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
    """A logistic model over `FEATURES`: P(evidence) = sigmoid(intercept + w . x).

    Attributes:
        coefficients: One weight per feature, in `FEATURES` order.
        intercept: The bias term.
    """

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
        """P(evidence) for one feature row."""
        z = self.intercept + sum(
            w * x for w, x in zip(self.coefficients, row, strict=True)
        )
        return 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z))


@cache
def shipped_model() -> SentenceModel:
    """The fitted model shipped with the package, read once."""
    text = resources.files("langchain_ragbudget").joinpath(MODEL_FILE).read_text()
    return SentenceModel.from_mapping(json.loads(text), MODEL_FILE)


def fitted_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """One score per sentence: whether it holds a question term, then P(evidence).

    A sentence that holds none of the question's terms never outranks one that
    does: the model learned from abstracts that findings come late, and alone it
    would prefer a late sentence unrelated to the question to an early one that
    answers it (a runbook's first sentence, say). So the score is the shipped
    model's probability, plus 1 for a sentence holding a question term.

    Args:
        question: The question, or None (every sentence then scores 0).
        sentences: The passage's sentences, in order.

    Returns:
        One score per sentence, in [0, 2).
    """
    if not question or not sentences:
        return [0.0] * len(sentences)
    model = shipped_model()
    return [_fitted_score(model, row) for row in sentence_features(question, sentences)]


def _fitted_score(model: SentenceModel, row: Sequence[float]) -> float:
    """P(evidence), plus 1 when the sentence holds a question term."""
    return model.probability(row) + (1.0 if row[_COVERAGE] > 0 else 0.0)


def blended_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """One score per sentence: mostly the overlap, partly the fitted model.

    `1 - FITTED_SHARE` times the overlap scaled to a top of 1, plus
    `FITTED_SHARE` times the `fitted_relevance` score (a sentence's coverage is
    its overlap over the question's whole IDF weight, so coverage over the best
    coverage is the scaled overlap). Alone, the overlap ties sentences that hold
    the same question terms and the model prefers late sentences wherever the
    point comes first; blended, the overlap still leads. A sentence holding no
    question term never outranks one that holds some, and a passage where no
    sentence holds one scores 0 throughout, so its leading sentences win (the
    model alone would pick by position, as abstracts taught it).

    Args:
        question: The question, or None (every sentence then scores 0).
        sentences: The passage's sentences, in order.

    Returns:
        One score per sentence, in [0, 1 + FITTED_SHARE).
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
