"""Read BEIR-format datasets: corpus.jsonl(.gz), queries.jsonl, qrels/<split>.tsv.

Title and text are joined as BEIR's own baselines index them, so numbers compare
with the published ones. SciFact's original release (in `extra/`) marks each
claim's evidence sentences; they are loaded as `rationales`.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from langchain_core.documents import Document

from langchain_ragbudget.errors import RagBudgetError


class DatasetError(RagBudgetError, ValueError):
    """A BEIR folder is missing a file or holds a malformed line."""


@dataclass(frozen=True)
class BeirDataset:
    """A corpus, the queries of one split, and their relevance judgements.

    Attributes:
        name: The dataset's folder name (e.g. `scifact`).
        corpus: The documents, title and text joined in `page_content`.
        queries: Query id -> text, for the queries judged in the split.
        qrels: Query id -> corpus id -> graded relevance.
        rationales: Query id -> corpus id -> its evidence sentences, where the
            dataset marks them (SciFact).
    """

    name: str
    corpus: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    rationales: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def judged_missing(self) -> list[str]:
        """Judged relevant documents not in the corpus (counted as misses)."""
        ids = {str(d.id) for d in self.corpus}
        return sorted(
            {
                doc
                for docs in self.qrels.values()
                for doc, grade in docs.items()
                if grade > 0 and doc not in ids
            }
        )

    def subset(self, max_queries: int, distractors: int) -> BeirDataset:
        """The first `max_queries` queries over a corpus cut down around them (quick).

        Every judged document stays, plus the first `distractors` others, so
        retrieval still has something to get wrong. Scores are higher than on
        the whole corpus: compare them only with runs on the same subset.

        Raises:
            ValueError: `max_queries` is under 1 or `distractors` is negative.
        """
        if max_queries < 1 or distractors < 0:
            raise ValueError(
                f"subset needs max_queries >= 1 and distractors >= 0, got "
                f"max_queries={max_queries!r}, distractors={distractors!r}"
            )
        queries = dict(list(self.queries.items())[:max_queries])
        qrels = {qid: self.qrels[qid] for qid in queries}
        judged = {doc for docs in qrels.values() for doc in docs}
        others = (d for d in self.corpus if str(d.id) not in judged)
        kept = judged | {str(d.id) for d in itertools.islice(others, distractors)}
        return BeirDataset(
            self.name,
            [d for d in self.corpus if str(d.id) in kept],
            queries,
            qrels,
            {qid: docs for qid, docs in self.rationales.items() if qid in queries},
        )


def load_beir(folder: str | Path, split: str = "test") -> BeirDataset:
    """Load a BEIR folder; only queries judged in `split` (`test`, `dev`...) are kept.

    Raises:
        DatasetError: A file is missing, a line is malformed, or a judged query
            or a cited evidence sentence is missing.
    """
    root = Path(folder)
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    all_queries = {
        str(row["_id"]): str(row.get("text") or "")
        for row in _jsonl(root / "queries.jsonl")
    }
    if empty := [qid for qid, text in all_queries.items() if not text.strip()]:
        raise DatasetError(
            f"{root / 'queries.jsonl'}: {len(empty)} queries have no text, "
            f"e.g. {empty[:3]}"
        )
    missing = [qid for qid in qrels if qid not in all_queries]
    if missing:
        raise DatasetError(
            f"{root / 'queries.jsonl'}: {len(missing)} judged queries are missing, "
            f"e.g. {missing[:3]}"
        )
    queries = {qid: all_queries[qid] for qid in qrels}
    rationales = load_rationales(root / "extra", set(queries))
    return BeirDataset(root.name, load_corpus(root), queries, qrels, rationales)


def load_rationales(
    folder: Path, query_ids: set[str]
) -> dict[str, dict[str, list[str]]]:
    """SciFact's evidence sentences for `query_ids`, from its original release.

    Reads `claims_*.jsonl` (`{"id", "evidence": {doc: [{"sentences": [i, ...]}]}}`)
    and `corpus_sentences.jsonl(.gz)` (`{"doc_id", "abstract": [sentence, ...]}`).
    """
    sentences_file = folder / "corpus_sentences.jsonl"
    if not sentences_file.is_file():
        sentences_file = folder / "corpus_sentences.jsonl.gz"
    claim_files = sorted(folder.glob("claims_*.jsonl")) if folder.is_dir() else []
    if not sentences_file.is_file() or not claim_files:
        return {}
    wanted: dict[str, dict[str, set[int]]] = {}
    for claims in claim_files:
        for row in _jsonl(claims, key="id"):
            query_id = str(row["id"])
            evidence = row.get("evidence") or {}
            if query_id not in query_ids or not isinstance(evidence, dict):
                continue
            for doc_id, sets in evidence.items():
                indices = wanted.setdefault(query_id, {}).setdefault(str(doc_id), set())
                try:
                    for item in sets:
                        indices.update(int(i) for i in item["sentences"])
                except (KeyError, TypeError, ValueError):
                    raise DatasetError(
                        f"{claims}: claim {query_id}, document {doc_id}: expected "
                        f'[{{"sentences": [numbers]}}], got {sets!r}'
                    ) from None
    needed = {doc for docs in wanted.values() for doc in docs}
    abstracts: dict[str, list[str]] = {}
    for row in _jsonl(sentences_file, key="doc_id"):
        if str(row["doc_id"]) in needed:
            abstract = row.get("abstract")
            if not isinstance(abstract, list):
                raise DatasetError(f"{sentences_file}: doc {row['doc_id']} has no list")
            abstracts[str(row["doc_id"])] = [str(s).strip() for s in abstract]
    rationales: dict[str, dict[str, list[str]]] = {}
    for query_id, docs in wanted.items():
        for doc_id, indices in docs.items():
            abstract = abstracts.get(doc_id)
            if abstract is None or max(indices, default=-1) >= len(abstract):
                raise DatasetError(
                    f"{folder}: claim {query_id} cites sentences {sorted(indices)} "
                    f"of document {doc_id}, which {sentences_file.name} lacks"
                )
            if indices:
                rationales.setdefault(query_id, {})[doc_id] = [
                    abstract[i] for i in sorted(indices)
                ]
    return rationales


def judged_id(document: Document) -> str:
    """The id qrels judge a retrieved document by: its source document's id."""
    return str(document.metadata.get("doc_id") or document.id)


def load_corpus(folder: Path) -> list[Document]:
    """corpus.jsonl or corpus.jsonl.gz as Documents with id, doc_id, title, source."""
    path = folder / "corpus.jsonl"
    if not path.is_file():
        path = folder / "corpus.jsonl.gz"
    documents = []
    for row in _jsonl(path):
        doc_id = str(row["_id"])
        title = str(row.get("title") or "").strip()
        text = str(row.get("text") or "")
        documents.append(
            Document(
                id=doc_id,
                page_content=f"{title}\n{text}" if title else text,
                metadata={
                    "chunk_id": doc_id,
                    "doc_id": doc_id,
                    "title": title,
                    "source": f"{folder.name}:{doc_id}",
                },
            )
        )
    return documents


def load_qrels(path: Path) -> dict[str, dict[str, int]]:
    """query-id -> {corpus-id: relevance}; CRLF line endings are fine."""
    if not path.is_file():
        raise DatasetError(f"{path}: qrels file not found")
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for line_number, row in enumerate(reader, start=1):
            if line_number == 1 and row and row[0] == "query-id":
                continue
            try:
                query_id, corpus_id, score = row[0], row[1], int(row[2])
            except (IndexError, ValueError):
                raise DatasetError(
                    f"{path}:{line_number}: expected query-id<TAB>corpus-id<TAB>score, "
                    f"got {row!r}"
                ) from None
            qrels.setdefault(query_id, {})[corpus_id] = score
    return qrels


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _jsonl(path: Path, key: str = "_id") -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    with _open(path) as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    f"{path}:{line_number}: invalid JSON: {exc}"
                ) from exc
            if not isinstance(row, dict) or key not in row:
                raise DatasetError(
                    f"{path}:{line_number}: expected an object with {key}"
                )
            yield row
