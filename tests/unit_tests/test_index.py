"""HybridIndex on the real parts (bm25s, embedded Chroma, fastembed ONNX)."""

import os
from pathlib import Path

import pytest
from langchain_core.documents import Document
from pdf_files import minimal_pdf

from langchain_ragbudget import IndexLoadError, load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config import _disk as files_module
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.retrieval._sparse import BM25Retriever

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def doc(doc_id: str, text: str) -> Document:
    return Document(id=doc_id, page_content=text, metadata={"source": doc_id})


REFUNDS_180 = "Refunds are paid within 180 days of the request. " * 40
REFUNDS_90 = "Refunds are paid within 90 days of the request. " * 40


def sparse_texts(index: HybridIndex) -> list[str]:
    bm25 = index.as_retriever().retrievers[0]
    assert isinstance(bm25, BM25Retriever)
    return [d.page_content for d in bm25.documents]


def all_texts(index: HybridIndex) -> tuple[list[str], list[str]]:
    """Chunk texts on the dense side (from Chroma) and the sparse side (BM25)."""
    return index.vectorstore.get(include=["documents"])["documents"], sparse_texts(
        index
    )


def config_with(**index_settings: object) -> RagBudgetConfig:
    config = load_config()
    return config.model_copy(
        update={"index": config.index.model_copy(update=index_settings)}
    )


def test_chunks_carry_id_source_position_and_tokens(tmp_path: Path) -> None:
    index = HybridIndex.open(
        tmp_path / "ix", config_with(chunk_size=64, chunk_overlap=8)
    )
    summary = index.upsert([doc("policy.md", REFUNDS_180)])
    assert (
        summary.added == ["policy.md"] and summary.chunks_added == index.chunk_count > 3
    )
    chunk = index.as_retriever(k=1).invoke("refund request")[0]
    assert (
        chunk.metadata["doc_id"] == "policy.md"
        and chunk.metadata["source"] == "policy.md"
    )
    assert chunk.id == f"policy.md::{chunk.metadata['position']}"
    assert 0 < chunk.metadata["tokens"] <= 64


def test_update_replaces_every_chunk_on_both_sides(tmp_path: Path) -> None:
    index = HybridIndex.open(
        tmp_path / "ix", config_with(chunk_size=64, chunk_overlap=8)
    )
    index.upsert(
        [doc("policy.md", REFUNDS_180), doc("faq.md", "The office opens at 9am.")]
    )
    summary = index.upsert([doc("policy.md", REFUNDS_90 + "Shorter now.")])
    assert summary.updated == ["policy.md"] and summary.chunks_deleted > 0
    for side in all_texts(index):
        assert not any("180" in text for text in side)  # no stale chunk still answers
        assert any("90 days" in text for text in side)
    reopened = HybridIndex.open(
        tmp_path / "ix", config_with(chunk_size=64, chunk_overlap=8)
    )
    assert reopened.sync_report.in_sync and reopened.chunk_count == index.chunk_count
    assert not any("180" in text for side in all_texts(reopened) for text in side)


def test_delete_leaves_both_sides(tmp_path: Path) -> None:
    index = HybridIndex.open(tmp_path / "ix")
    index.upsert(
        [doc("a.md", "Alpha text about solar."), doc("b.md", "Beta text about bread.")]
    )
    assert index.delete(["a.md", "missing.md"]) == ["a.md"]
    dense, sparse = all_texts(index)
    assert dense == sparse == ["Beta text about bread."]
    assert HybridIndex.open(tmp_path / "ix").document_ids == ["b.md"]


def test_reingesting_unchanged_content_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = HybridIndex.open(tmp_path / "ix")
    index.upsert([doc("a.md", "Alpha text.")])
    writes: list[int] = []
    monkeypatch.setattr(
        index.vectorstore, "add_documents", lambda docs, **kw: writes.append(len(docs))
    )
    summary = index.upsert([doc("a.md", "Alpha text.")])
    assert summary.unchanged == ["a.md"] and not summary.added and not summary.updated
    assert writes == []


def test_blank_and_placeholder_documents(tmp_path: Path) -> None:
    index = HybridIndex.open(tmp_path / "ix")
    index.upsert([doc("a.md", "Alpha text."), doc("b.md", "Beta text.")])
    summary = index.upsert(
        [
            doc("a.md", "  \n "),
            doc("b.md", "__debezium_unavailable_value"),
            doc("c.md", "TBD"),
        ]
    )
    problems = {error.path: error.problem for error in summary.errors}
    assert (
        problems["a.md"].startswith("empty") and "has been removed" in problems["a.md"]
    )
    assert (
        problems["b.md"].startswith("only a placeholder")
        and "removed" in problems["b.md"]
    )
    assert (
        problems["c.md"].startswith("only a placeholder")
        and "removed" not in problems["c.md"]
    )
    assert summary.deleted == ["a.md", "b.md"] and index.document_ids == []
    with pytest.raises(IndexLoadError, match="empty"):
        index.as_retriever()


def test_another_embedding_model_is_refused(tmp_path: Path) -> None:
    HybridIndex.open(tmp_path / "ix").upsert([doc("a.md", "Alpha text.")])
    config = load_config()
    other = config.model_copy(
        update={
            "embedding": config.embedding.model_copy(
                update={"model": "BAAI/bge-small-en-v1.5"}
            )
        }
    )
    with pytest.raises(
        IndexLoadError,
        match="built with embedding model 'sentence-transformers/all-MiniLM-L6-v2'",
    ):
        HybridIndex.open(tmp_path / "ix", other)
    with pytest.raises(IndexLoadError, match="chunking"):
        HybridIndex.open(tmp_path / "ix", config_with(chunk_size=999))


def test_the_index_s_chroma_takes_ef_search_from_the_config(tmp_path: Path) -> None:
    HybridIndex.open(tmp_path / "ix").upsert([doc("a.md", "Alpha text.")])
    config = load_config()
    wider = config.model_copy(
        update={
            "vector_store": config.vector_store.model_copy(update={"ef_search": 180})
        }
    )
    index = HybridIndex.open(tmp_path / "ix", wider)
    store = index.vectorstore
    collection = store._client.get_collection(store._collection.name)
    assert collection.configuration_json["hnsw"]["ef_search"] == 180
    assert index.as_retriever().invoke("alpha")[0].metadata["source"] == "a.md"


def test_one_sided_ids_are_reported_and_repaired(tmp_path: Path) -> None:
    index = HybridIndex.open(tmp_path / "ix")
    index.upsert([doc("a.md", "Alpha text."), doc("b.md", "Beta text.")])
    index.vectorstore.delete(ids=["a.md::0"])
    index.vectorstore.add_documents(
        [Document(page_content="stray", metadata={"x": 1})], ids=["ghost::0"]
    )
    reopened = HybridIndex.open(tmp_path / "ix")
    report = reopened.sync_report
    assert (report.only_sparse, report.only_dense) == (["a.md::0"], ["ghost::0"])
    assert "run `ragbudget repair`" in report.summary()
    reopened.repair()
    assert reopened.sync_report.in_sync
    # a vector only the store held is the only copy: kept, and added back to BM25
    assert sorted(reopened.vectorstore.get()["ids"]) == [
        "a.md::0",
        "b.md::0",
        "ghost::0",
    ]
    assert reopened.document_ids == ["a.md", "b.md", "ghost"]
    assert "stray" in sparse_texts(reopened)


def test_cli_index_goes_on_past_bad_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "good.md").write_text("# Refunds\nRefunds are paid within 90 days.")
    (folder / "sub" / "page.html").write_text(
        "<p>The office opens at 9am.</p><script>var x;</script>"
    )
    (folder / "empty.txt").write_text("\n")
    (folder / "todo.md").write_text("TODO")
    (folder / "binary.txt").write_bytes(b"\xff\xfe\x00")
    code = main(["index", str(folder), "--index", str(tmp_path / "ix")])
    out = capsys.readouterr().out
    assert code == 1
    assert (
        "refused: empty.txt: empty" in out
        and "refused: todo.md: only a placeholder" in out
    )
    assert "refused: binary.txt: binary, not text (a NUL byte at byte 2)" in out
    index = HybridIndex.open(tmp_path / "ix")
    assert index.document_ids == ["good.md", "sub/page.html"]
    page = index.as_retriever(k=1).invoke("office opens")[0]
    assert "var x" not in page.page_content and "9am" in page.page_content
    assert main(["repair", "--index", str(tmp_path / "ix")]) == 0
    (folder / "good.md").unlink()
    main(["index", str(folder), "--index", str(tmp_path / "ix")])
    assert "1 indexed document(s) have no file" in capsys.readouterr().out
    main(["index", str(folder), "--index", str(tmp_path / "ix"), "--prune"])
    assert HybridIndex.open(tmp_path / "ix").document_ids == ["sub/page.html"]


def test_pdf_files_are_read(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "policy.pdf").write_bytes(minimal_pdf("Refunds are paid within 90 days."))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    assert main(["index", str(folder), "--index", str(tmp_path / "ix")]) == 1
    index = HybridIndex.open(tmp_path / "ix")
    assert index.document_ids == ["policy.pdf"]
    assert "90 days" in index.as_retriever(k=1).invoke("refunds")[0].page_content


def test_cli_ask_shows_evidence_and_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("Refunds are paid within 90 days.")
    (folder / "office.md").write_text("The office opens at 9am.")
    index_args = ["--index", str(tmp_path / "ix"), "--config", str(config)]
    assert main(["index", str(folder), *index_args]) == 0
    capsys.readouterr()
    assert main(["ask", "When are refunds paid?", *index_args]) == 0
    out = capsys.readouterr().out
    assert "refunds.md::0" in out and "kept" in out
    assert "Question: When are refunds paid?" in out
    assert "[warning: rerank stage skipped" in out
    assert main(["ask", "x", *index_args, "--surface", "voice"]) == 2


def test_every_file_is_flushed_before_the_rename_that_publishes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A power cut cannot be simulated here; what is checked is the order that makes
    # one harmless: fsync of every file and folder of a version, then its rename.
    directory = tmp_path / "ix"
    index = HybridIndex.open(directory)
    events: list[tuple[str, Path]] = []
    real_fsync, real_rename, real_replace = files_module.fsync, os.rename, os.replace

    def fsync(path: Path) -> None:
        events.append(("fsync", Path(path)))
        real_fsync(path)

    def rename(source: str | Path, target: str | Path) -> None:
        events.append(("rename", Path(source)))
        real_rename(source, target)

    def replace(source: str | Path, target: str | Path) -> None:
        events.append(("rename", Path(source)))
        real_replace(source, target)

    monkeypatch.setattr(files_module, "fsync", fsync)
    monkeypatch.setattr(files_module.os, "rename", rename)
    monkeypatch.setattr(files_module.os, "replace", replace)
    index.upsert([doc("policy.md", REFUNDS_90)])

    published = [
        source
        for kind, source in events
        if kind == "rename" and source.parent == directory
    ]
    staging_folder = next(p for p in published if p.name.startswith(".sparse-"))
    version = directory / (directory / "CURRENT").read_text()
    files = [p for p in version.rglob("*") if p.is_file()]
    assert len(files) >= 4  # bm25 arrays, settings, documents, records
    flushed_before: set[Path] = set()
    for kind, path in events:
        if kind == "rename" and path == staging_folder:
            break
        if kind == "fsync":
            flushed_before.add(path)
    for file in files:
        assert staging_folder / file.relative_to(version) in flushed_before
    assert staging_folder in flushed_before
    current_staging = next(p for p in published if "CURRENT" in p.name)
    position = events.index(("rename", current_staging))
    assert ("fsync", current_staging) in events[:position]
    assert ("fsync", directory) in events[position:]


def sparse_config(**sparse_settings: object) -> RagBudgetConfig:
    config = load_config()
    return config.model_copy(
        update={"sparse": config.sparse.model_copy(update=sparse_settings)}
    )


def test_bm25_saved_with_other_settings_is_rebuilt_as_configured(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A BM25 setting changed since the last commit applies at once, and is named."""
    report = Document(
        id="report.md",
        page_content="Rates rose by a tenth in the second quarter.",
        metadata={"source": "report.md", "title": "Cobalt pricing"},
    )
    index = HybridIndex.open(tmp_path / "ix", sparse_config(index_title=False))
    index.upsert([report])
    index.close()

    def opened(config: RagBudgetConfig) -> tuple[BM25Retriever, list[str]]:
        caplog.clear()
        with caplog.at_level("WARNING"):
            reopened = HybridIndex.open(tmp_path / "ix", config)
        bm25 = reopened.as_retriever().retrievers[0]
        assert isinstance(bm25, BM25Retriever)
        reopened.close()
        return bm25, [r.getMessage() for r in caplog.records]

    bm25, warned = opened(sparse_config(index_title=False))
    assert bm25.invoke("cobalt") == [] and warned == []
    bm25, warned = opened(load_config())  # the default indexes titles
    assert [d.id for d in bm25.invoke("cobalt")] == ["report.md::0"]
    assert len(warned) == 1
    assert "index_title False" in warned[0] and "index_title True" in warned[0]
    assert "rebuilt in memory (1 chunks" in warned[0]
    bm25, warned = opened(sparse_config(index_title=False, k1=1.2))
    assert bm25.k1 == 1.2 and "k1 1.5" in warned[0] and "k1 1.2" in warned[0]
