"""Every file the index writes, deleted or truncated one at a time.

For each: `HybridIndex.open` recovers with nothing lost or raises `IndexLoadError`
naming the file (no other exception type); `repair` then brings back every document
indexed before, on both sides. Real parts: bm25s, embedded Chroma, fastembed ONNX.
"""

import shutil
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragbudget import build_embeddings, load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.errors import IndexLoadError, IndexRepairError
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.retrieval._sparse import BM25Retriever

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

DOCUMENTS = {
    "guide/install.md": "Installing needs pip and a virtual environment. " * 8,
    "guide/upgrade.md": "Upgrading replaces the old wheel with the new one.",
    "faq.md": "Refunds are paid within ninety days of the request.",
    "notes/solar.md": "Solar panels convert sunlight into electricity.",
}
KEYWORDS = {
    "guide/install.md": "virtual environment",
    "guide/upgrade.md": "wheel",
    "faq.md": "refunds",
    "notes/solar.md": "solar panels",
}
BM25_FILES = [
    "data.csc.index.npy",
    "indices.csc.index.npy",
    "indptr.csc.index.npy",
    "params.index.json",
    "vocab.index.json",
    "ragbudget_bm25.json",
    "documents.jsonl",
]
HNSW_FILES = ["header.bin", "data_level0.bin", "length.bin", "link_lists.bin"]
TARGETS = [
    "manifest.json",
    "CURRENT",
    "records.json",
    *(f"bm25/{name}" for name in BM25_FILES),
    "chroma.sqlite3",
    *(f"hnsw/{name}" for name in HNSW_FILES),
]

RECOVERED = {"manifest.json", "CURRENT"}  # open restores these with nothing lost
# chromadb does not read link_lists.bin for a collection this small, and its size
# follows from no other file: a changed one opens, and is checked with the rest.
UNREAD = {("hnsw/link_lists.bin", "truncate")}


def config() -> RagBudgetConfig:
    base = load_config()
    return base.model_copy(
        update={
            "index": base.index.model_copy(
                update={"chunk_size": 32, "chunk_overlap": 0}
            )
        }
    )


@pytest.fixture(scope="module")
def embeddings() -> Embeddings:
    return build_embeddings(load_config())


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, embeddings: Embeddings
) -> tuple[Path, dict[str, str]]:
    """An index of DOCUMENTS (closed), and its chunk texts by id."""
    directory = tmp_path_factory.mktemp("faults") / "ix"
    with HybridIndex.open(directory, config(), embeddings) as index:
        index.upsert(
            Document(id=key, page_content=text, metadata={"source": key})
            for key, text in DOCUMENTS.items()
        )
        chunks = {
            str(chunk.id): chunk.page_content
            for chunk in index.as_retriever().retrievers[0].documents  # type: ignore[attr-defined]
        }
    assert len(chunks) > len(DOCUMENTS)  # install.md spans several chunks
    return directory, chunks


def locate(directory: Path, target: str) -> Path:
    version = directory / (directory / "CURRENT").read_text()
    if target == "records.json":
        return version / "records.json"
    if target.startswith("bm25/"):
        return version / target
    if target == "chroma.sqlite3":
        return directory / "chroma" / "chroma.sqlite3"
    if target.startswith("hnsw/"):
        (segment,) = [p for p in (directory / "chroma").iterdir() if p.is_dir()]
        return segment / target.split("/")[1]
    return directory / target


def damage(path: Path, how: str) -> None:
    if how == "delete":
        path.unlink()
        return
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if data else b"\x00")


def assert_nothing_lost(index: HybridIndex, chunks: dict[str, str]) -> None:
    """Both sides hold every chunk with its text; each document answers its query."""
    assert index.document_ids == sorted(DOCUMENTS)
    assert index.sync_report.in_sync
    bm25, dense = index.as_retriever().retrievers
    assert isinstance(bm25, BM25Retriever)
    assert {str(d.id): d.page_content for d in bm25.documents} == chunks
    found = index.vectorstore.get(include=["documents"])
    assert dict(zip(found["ids"], found["documents"], strict=True)) == chunks
    every = dense.invoke("anything", k=len(chunks))
    assert {d.metadata["chunk_id"] for d in every} == set(chunks)  # HNSW answers
    retriever = index.as_retriever(k=3)
    for doc_id, keyword in KEYWORDS.items():
        assert doc_id in {d.metadata["doc_id"] for d in retriever.invoke(keyword)}


def test_the_targets_cover_every_file_the_index_writes(
    built: tuple[Path, dict[str, str]],
) -> None:
    directory, _ = built
    written = {p for p in directory.rglob("*") if p.is_file()}
    written.remove(directory / "write.lock")  # no index data: the last writer's name
    assert written == {locate(directory, target) for target in TARGETS}


@pytest.mark.parametrize("how", ["delete", "truncate"])
@pytest.mark.parametrize("target", TARGETS)
def test_one_damaged_file(
    tmp_path: Path,
    built: tuple[Path, dict[str, str]],
    embeddings: Embeddings,
    target: str,
    how: str,
) -> None:
    source, chunks = built
    directory = tmp_path / "ix"
    shutil.copytree(source, directory)
    path = locate(directory, target)
    damage(path, how)
    opened = False
    try:
        with HybridIndex.open(directory, config(), embeddings, create=False) as index:
            assert_nothing_lost(index, chunks)  # recovered, nothing lost
            opened = True
    except IndexLoadError as error:
        message = str(error)
        assert str(path) in message and "ragbudget repair" in message, message
    if target in RECOVERED:
        assert opened  # restored from a copy, or the newest complete version
    elif (target, how) not in UNREAD:
        assert not opened  # damage is never passed over
    repaired, report = HybridIndex.repair_directory(directory, config(), embeddings)
    with repaired:
        assert_nothing_lost(repaired, chunks)
        assert not report.needs_reingest  # records restored with their hashes
    with HybridIndex.open(directory, config(), embeddings, create=False) as index:
        assert_nothing_lost(index, chunks)
        summary = index.upsert(
            Document(id=key, page_content=text, metadata={"source": key})
            for key, text in DOCUMENTS.items()
        )
        assert summary.unchanged == list(DOCUMENTS)  # nothing to re-add


def tree(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in directory.rglob("*")
        if p.name != "write.lock"  # names the last writer to try, repair included
    }


def test_repair_refuses_when_neither_side_can_be_read(
    tmp_path: Path, built: tuple[Path, dict[str, str]], embeddings: Embeddings
) -> None:
    source, _ = built
    directory = tmp_path / "ix"
    shutil.copytree(source, directory)
    damage(locate(directory, "bm25/documents.jsonl"), "truncate")
    damage(locate(directory, "chroma.sqlite3"), "truncate")
    before = tree(directory)
    with pytest.raises(IndexRepairError, match=r"neither side .* Nothing was changed"):
        HybridIndex.repair_directory(directory, config(), embeddings)
    assert tree(directory) == before


def test_a_missing_current_keeps_the_committed_version(
    tmp_path: Path, built: tuple[Path, dict[str, str]], embeddings: Embeddings
) -> None:
    source, chunks = built
    directory = tmp_path / "ix"
    shutil.copytree(source, directory)
    committed = (directory / "CURRENT").read_text()
    (directory / "CURRENT").unlink()
    with HybridIndex.open(directory, config(), embeddings, create=False) as index:
        assert_nothing_lost(index, chunks)
    assert (directory / committed).is_dir()
    assert (directory / "CURRENT").read_text() == committed


def test_the_advice_given_for_a_lost_bm25_folder_restores_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The hostile report: `open` says repair; repair used to delete every vector."""
    docs, ix = tmp_path / "docs", tmp_path / "ix"
    for key, text in DOCUMENTS.items():
        (docs / key).parent.mkdir(parents=True, exist_ok=True)
        (docs / key).write_text(text)
    assert main(["index", str(docs), "--index", str(ix)]) == 0
    for version in ix.glob("sparse-*"):
        shutil.rmtree(version)
    capsys.readouterr()
    assert main(["ask", "refunds", "--index", str(ix)]) == 2
    assert "ragbudget repair" in capsys.readouterr().err
    assert main(["repair", "--index", str(ix)]) == 0
    out = capsys.readouterr().out
    assert "added 4 chunk(s) only the vector store held back to BM25" in out
    assert main(["index", str(docs), "--index", str(ix)]) == 0
    assert "│ unchanged │" in capsys.readouterr().out
    with HybridIndex.open(ix, create=False) as index:
        assert index.document_ids == sorted(DOCUMENTS)
        assert index.sync_report.in_sync and index.chunk_count == 4
