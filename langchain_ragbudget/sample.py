"""The sample corpus shipped with the package, for the demo and the tests."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from langchain_core.documents import Document


def _read(name: str) -> str:
    return (
        resources.files("langchain_ragbudget")
        .joinpath("sample_data", name)
        .read_text(encoding="utf-8")
    )


def load_sample_corpus() -> list[Document]:
    """Passages of a small fictional company knowledge base, one Document each."""
    documents = []
    for line in _read("corpus.jsonl").splitlines():
        row = json.loads(line)
        documents.append(
            Document(
                id=row["id"],
                page_content=row["text"],
                metadata={
                    "chunk_id": row["id"],
                    "doc_id": row["doc_id"],
                    "source": row["source"],
                    "title": row["title"],
                },
            )
        )
    return documents


def load_sample_questions() -> list[dict[str, Any]]:
    """Questions about the sample corpus with the passage ids that answer them."""
    questions: list[dict[str, Any]] = json.loads(_read("questions.json"))
    return questions


def demo_config_path() -> Path:
    """The demo's YAML: a chat budget tight enough for the sample's long passages."""
    return (
        Path(str(resources.files("langchain_ragbudget").joinpath("sample_data")))
        / "demo.yml"
    )
