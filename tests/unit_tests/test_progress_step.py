"""The embedding bar moves every `EMBEDDED_STEP` chunks, not every 256.

Real fastembed and embedded Chroma; 70 short notes. With a progress callback the
reports come 32 embeddings at a time, and the writes stay one per 256 chunks (a
write a full disk cuts short stays one write: `test_index_disk`).
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragbudget import build_embeddings, build_vector_store, load_config
from langchain_ragbudget.retrieval import _dense as dense
from langchain_ragbudget.retrieval._embeddings import EMBEDDED_STEP

pytestmark = [pytest.mark.needs_embedding_model]


def notes(count: int) -> list[Document]:
    return [
        Document(id=f"note-{i}", page_content=f"Note {i} says topic{i} matters.")
        for i in range(count)
    ]


def counted_store() -> tuple[Any, list[int]]:
    config = load_config()
    store = build_vector_store(config, build_embeddings(config))
    writes: list[int] = []
    add = store.add_documents

    def counting(documents: list[Document], **kwargs: Any) -> list[str]:
        writes.append(len(documents))
        return add(documents, **kwargs)

    store.add_documents = counting  # type: ignore[method-assign]
    return store, writes


def test_a_progress_callback_gets_a_report_every_step() -> None:
    store, writes = counted_store()
    reported: list[int] = []
    dense.add_documents(store, notes(70), on_batch=reported.append)
    assert EMBEDDED_STEP == 32 < dense.ADD_BATCH_SIZE
    assert reported == [32, 32, 6]
    assert writes == [70]
    assert len(store.get()["ids"]) == 70


def test_without_a_callback_the_writes_stay_large() -> None:
    store, writes = counted_store()
    dense.add_documents(store, notes(70))
    assert writes == [70]
