"""Which sentences of a passage matter for the question: cheap, offline, explainable.

A sentence scores the IDF-weighted overlap of its stemmed terms with the question's,
IDF taken over the sentences of the same passage: a question term that every sentence
shares tells them apart less than one only a single sentence has. Terms are made the
way the BM25 side makes them (lower case, English stopwords of bm25s, the PyStemmer
English stemmer). With no question every sentence scores 0 and the leading sentences
win, which the budget's record says.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

import Stemmer
from bm25s.stopwords import STOPWORDS_EN

_WORD = re.compile(r"\w\w+")
_STOPWORDS = frozenset(STOPWORDS_EN)
_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=200_000)
def terms(text: str) -> frozenset[str]:
    """The stemmed, lower-cased words of `text`, stopwords left out."""
    words = [w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS]
    return frozenset(_STEMMER.stemWords(words))


def sentence_relevance(question: str | None, sentences: Sequence[str]) -> list[float]:
    """One score per sentence: the IDF-weighted question terms it contains."""
    if not question:
        return [0.0] * len(sentences)
    wanted = terms(question)
    per_sentence = [terms(sentence) & wanted for sentence in sentences]
    count = len(sentences)
    frequency: dict[str, int] = {}
    for found in per_sentence:
        for term in found:
            frequency[term] = frequency.get(term, 0) + 1
    weight = {term: math.log(1 + count / n) for term, n in frequency.items()}
    return [float(sum(weight[term] for term in found)) for found in per_sentence]
