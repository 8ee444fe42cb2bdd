"""A disk that cannot take a write (full, read-only, over quota) is one clear error.

The failure is simulated by patching one write (the vector store's, or the BM25
version's) to raise what a full disk raises there: chromadb's `InternalError`
carrying SQLite's "database or disk is full", or `OSError(ENOSPC)`. The index is
real (bm25s, embedded Chroma, fastembed ONNX). A real full disk (a small tmpfs) is
`tests/integration_tests/test_index_disk.py`.
"""

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from chromadb.errors import InternalError
from langchain_core.documents import Document

from langchain_ragbudget import load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.errors import IndexWriteError
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.index._write_errors import disk_failure

FIRST = {f"first/{n}.md": f"First note {n} about solar panels." for n in range(3)}
LATER = {f"later/{n}.md": f"Later note {n} about wind turbines." for n in range(4)}
INDEX = "langchain_ragbudget.index"
FULL = "Query error: Database error: (code: 13) database or disk is full"


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EROFS, "Read-only file system"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        InternalError(FULL),
        InternalError("returned from database: attempt to write a readonly database"),
        sqlite3.OperationalError("database or disk is full"),
    ],
)
def test_each_way_a_disk_refuses_a_write_is_recognised(error: Exception) -> None:
    assert disk_failure(error)


@pytest.mark.parametrize(
    "error",
    [
        OSError(errno.ENOENT, "No such file or directory"),
        OSError(errno.EACCES, "Permission denied"),
        InternalError("Query error: no such table"),
        ValueError("database or disk is full"),  # neither an OSError nor the store's
    ],
)
def test_other_errors_are_left_alone(error: Exception) -> None:
    assert disk_failure(error) is None


def documents(texts: dict[str, str]) -> list[Document]:
    return [Document(id=key, page_content=text) for key, text in texts.items()]


def vector_write_full(*args: Any, **kwargs: Any) -> None:
    raise InternalError(FULL)


def bm25_write_full(self: Any, folder: Path, *args: Any, **kwargs: Any) -> None:
    Path(folder).mkdir(parents=True)
    (Path(folder) / "half.npy").write_bytes(b"\0" * 100)  # half written
    raise OSError(errno.ENOSPC, "No space left on device", str(folder))


PATCHES = {
    "vectors": (f"{INDEX}._hybrid_index.add_documents", vector_write_full),
    "bm25": (
        "langchain_ragbudget.retrieval._sparse.BM25Retriever.save",
        bm25_write_full,
    ),
}


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("where", sorted(PATCHES))
def test_a_full_disk_during_upsert_keeps_the_committed_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    config = load_config()
    with HybridIndex.open(tmp_path / "ix", config) as index:
        index.upsert(documents(FIRST))
        with monkeypatch.context() as patch:
            patch.setattr(*PATCHES[where])
            with pytest.raises(IndexWriteError) as raised:
                index.upsert(documents(LATER))
        message = str(raised.value)
        assert str(tmp_path / "ix") in message
        assert "3 document(s)" in message and "run the same command again" in message
        assert sorted(index.document_ids) == sorted(FIRST)  # back to the committed
        assert not list((tmp_path / "ix").glob(".sparse-*.tmp"))
    with HybridIndex.open(tmp_path / "ix", config, create=False) as reopened:
        assert sorted(reopened.document_ids) == sorted(FIRST)
        found = reopened.as_retriever(k=3).invoke("solar panels")
        assert {d.metadata["doc_id"] for d in found} == set(FIRST)
        reopened.upsert(documents(LATER))  # with space again, the write goes through
        assert sorted(reopened.document_ids) == sorted(FIRST | LATER)
        assert reopened.sync_report.in_sync


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_ragbudget_index_on_a_full_disk_is_one_error_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    for texts in (FIRST, LATER):
        for key, text in texts.items():
            (root / key).parent.mkdir(parents=True, exist_ok=True)
            (root / key).write_text(text, encoding="utf-8")
        if texts is FIRST:  # the first index records `root` as the ids' root
            assert main(["index", str(root), "--index", str(index)]) == 0
    capsys.readouterr()
    monkeypatch.setattr(*PATCHES["vectors"])
    assert main(["index", str(root / "later"), "--index", str(index)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    assert "the disk is full" in err[0] and "3 document(s)" in err[0]
    monkeypatch.undo()
    with HybridIndex.open(index, load_config(), create=False) as reopened:
        assert sorted(reopened.document_ids) == sorted(FIRST)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_ctrl_c_before_a_first_index_committed_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    root.mkdir()
    (root / "a.md").write_text("A note about solar panels.", encoding="utf-8")

    def interrupted(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(f"{INDEX}._hybrid_index.add_documents", interrupted)
    assert main(["index", str(root), "--index", str(index)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"error: interrupted: no version of the index at {index} was committed yet; "
        "run the same command again to resume (vectors already written are reused)"
    ]
