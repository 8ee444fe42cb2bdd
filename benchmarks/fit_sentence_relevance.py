"""Fit the sentence-relevance model on SciFact's train claims; write it as JSON.

Rows are the sentences of every document a train claim cites as evidence (its
rationale documents), split as the budget splits them; a sentence is positive when
it is one of the claim's evidence sentences. Test claims are never read, so
`benchmarks/bench_trim_variants.py` measures the model on claims it has not seen.
scikit-learn's logistic regression fits it; the package applies the coefficients in
pure Python (`_sentence_scoring.SentenceModel`), no pickle.

    python benchmarks/fit_sentence_relevance.py [--data DIR] [--out FILE]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import sklearn
from _common import parser_with_data
from sklearn.linear_model import LogisticRegression

from langchain_ragbudget.evaluation import BeirDataset, load_beir

# The script refits the model the private `_sentence_scoring` module ships, so it
# reads that module's feature list, file name and features; and it splits
# sentences with `_sentences.sentences`, exactly as the budget stage splits them.
from langchain_ragbudget.evidence._sentence_scoring import (
    FEATURES,
    MODEL_FILE,
    sentence_features,
)
from langchain_ragbudget.evidence._sentences import sentences

PACKAGE = Path(__file__).resolve().parent.parent / "langchain_ragbudget"
REGULARISATION = 1.0  # scikit-learn's default C; 0.1 and 10 measured no better


def is_evidence(sentence: str, marked: list[str]) -> bool:
    """Whether a split sentence is one of the marked ones (boundaries may differ)."""
    return any(m in sentence or sentence in m for m in marked)


Features = Callable[[str, Sequence[str]], list[list[float]]]


def training_rows(
    dataset: BeirDataset, features: Features = sentence_features
) -> tuple[list[list[float]], list[int]]:
    """One row of `features` per sentence of each evidence document, and its label."""
    texts = {str(d.id): d.page_content for d in dataset.corpus}
    rows: list[list[float]] = []
    labels: list[int] = []
    for query_id, documents in sorted(dataset.rationales.items()):
        question = dataset.queries[query_id]
        for doc_id, marked in sorted(documents.items()):
            pieces = sentences(texts[doc_id])
            rows += features(question, pieces)
            labels += [int(is_evidence(s, marked)) for s in pieces]
    return rows, labels


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--out", type=Path, default=PACKAGE / MODEL_FILE)
    args = parser.parse_args()
    dataset = load_beir(args.data, split="train")
    rows, labels = training_rows(dataset)
    model = LogisticRegression(C=REGULARISATION, max_iter=5000).fit(rows, labels)
    fitted = {
        "fitted_on": (
            f"SciFact train: {len(dataset.rationales)} claims, {len(rows)} sentences "
            f"of their evidence documents, {sum(labels)} of them evidence"
        ),
        "command": "python benchmarks/fit_sentence_relevance.py",
        "scikit_learn": sklearn.__version__,
        "coefficients": {
            name: round(float(w), 6)
            for name, w in zip(FEATURES, model.coef_[0], strict=True)
        },
        "intercept": round(float(model.intercept_[0]), 6),
    }
    args.out.write_text(json.dumps(fitted, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {fitted['fitted_on']}")


if __name__ == "__main__":
    main()
