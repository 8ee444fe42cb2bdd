"""Read BEIR-format datasets: corpus.jsonl(.gz), queries.jsonl, qrels/<split>.tsv.

Title and text are joined into `page_content`, as BEIR's own BM25 and dense baselines
index them ("flat"), so numbers compare with the published ones.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from langchain_core.documents import Document

from langchain_ragbudget.errors import RagBudgetError


class DatasetError(RagBudgetError, ValueError):
    """A BEIR folder is missing a file or holds a malformed line."""


@dataclass(frozen=True)
class BeirDataset:
    """A corpus, the queries of one split, and their relevance judgements."""

    name: str
    corpus: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]


def load_beir(folder: str | Path, split: str = "test") -> BeirDataset:
    """Load a BEIR folder; only queries judged in `split` are kept."""
    root = Path(folder)
    qrels = load_qrels(root / "qrels" / f"{split}.tsv")
    all_queries = {
        str(row["_id"]): str(row["text"]) for row in _jsonl(root / "queries.jsonl")
    }
    missing = [qid for qid in qrels if qid not in all_queries]
    if missing:
        raise DatasetError(
            f"{root / 'queries.jsonl'}: {len(missing)} judged queries are missing, "
            f"e.g. {missing[:3]}"
        )
    queries = {qid: all_queries[qid] for qid in qrels}
    return BeirDataset(root.name, load_corpus(root), queries, qrels)


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


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
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
            if not isinstance(row, dict) or "_id" not in row:
                raise DatasetError(f"{path}:{line_number}: expected an object with _id")
            yield row
