"""An index past chromadb's first HNSW resize and past a page of reads reopens.

Real parts (bm25s, embedded Chroma, fastembed ONNX). Found by the chunked SciFact
evaluation: a 38,000-chunk index failed to reopen, once because the HNSW files were
checked against the segment's capacity instead of what it holds, once because an
unpaged read passed every id to SQLite.
"""

import struct
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.index import _chroma as index_module
from langchain_ragbudget.index._hybrid_index import HybridIndex

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def test_a_grown_index_reopens_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index_module, "GET_PAGE", 1000)  # several pages of reads
    directory = tmp_path / "ix"
    notes = [
        Document(
            id=f"note{i}",
            page_content=f"Note {i}: item {i} weighs {i * 7} grams.",
            metadata={"source": f"note{i}"},
        )
        for i in range(3500)
    ]
    with HybridIndex.open(directory) as index:
        index.upsert(notes)
    (header,) = (directory / "chroma").glob("*/header.bin")
    capacity, count, _ = struct.unpack_from("<12xQQQ", header.read_bytes())
    assert count > 0 and capacity > count  # the layout that used to be refused
    with HybridIndex.open(directory, create=False) as index:
        assert index.chunk_count == 3500 and index.sync_report.in_sync
        assert index.as_retriever(k=1).invoke("item 1234 weighs")[0].id == (
            "note1234::0"
        )
