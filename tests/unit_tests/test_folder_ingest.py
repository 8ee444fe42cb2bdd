"""`HybridIndex.ingest(path)` indexes a folder from Python exactly as `ragbudget
index` does: the same scan, the same ids, the same summary. Real parts throughout
(bm25s, embedded Chroma, fastembed ONNX)."""

from collections.abc import Sequence
from pathlib import Path

import pytest

from langchain_ragbudget.cli._main import main
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.index import HybridIndex, IngestSummary

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def folder(root: Path) -> Path:
    docs = root / "docs"
    files = {
        "good.md": "Refunds are paid within 90 days.",
        "guide/setup.md": "# Setup\nInstall the agent, then restart it.",
        "notes.rst": "Restructured text.",
        "drafts/wip.md": "Work in progress.",
        "empty.txt": "",
        "bad.txt": None,
    }
    for name, text in files.items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        if text is None:  # not UTF-8: unreadable, a failure
            (docs / name).write_bytes(b"\xff\xfe\x00bad")
        else:
            (docs / name).write_text(text, encoding="utf-8")
    (docs / "gone.md").symlink_to("missing.md")
    return docs


def counts(summary: IngestSummary, index: HybridIndex) -> str:
    """The totals `ragbudget index` prints (files, then chunks), from the summary."""
    lists: dict[str, Sequence[object]] = {
        "added": summary.added,
        "updated": summary.updated,
        "unchanged": summary.unchanged,
        "restored": summary.restored,
        "deleted": summary.deleted,
        "refused": summary.errors,
        "skipped": summary.skipped,
    }
    files = ", ".join(f"{len(items)} {name}" for name, items in lists.items())
    return (
        f"files {files} chunks {summary.chunks_added} written, "
        f"{summary.chunks_deleted} removed; now {len(index.document_ids)} "
        f"documents, {index.chunk_count} chunks"
    )


def test_ingest_matches_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = folder(tmp_path)
    cli_ix, py_ix = tmp_path / "cli-ix", tmp_path / "py-ix"
    code = main(["index", str(docs), "--index", str(cli_ix), "--exclude", "drafts"])
    out = capsys.readouterr().out
    with HybridIndex.open(py_ix, create=True) as index:
        summary = index.ingest(docs, exclude=["drafts"])
        row = counts(summary, index)
        py_ids = index.document_ids
    assert code == 1  # bad.txt could not be read
    assert summary.unreadable == ["bad.txt"]
    assert sorted(summary.added) == ["good.md", "guide/setup.md"]
    assert {e.path for e in summary.errors} == {"bad.txt", "empty.txt"}
    assert sorted((s.reason, s.path) for s in summary.skipped) == [
        ("dangling link", "gone.md"),
        ("excluded by --exclude", "drafts/wip.md"),
        ("unsupported type", "notes.rst"),
    ]
    # the CLI printed the same totals, and the two indexes hold the same ids
    assert row in " ".join(out.split()), (row, out)
    with HybridIndex.open(cli_ix, create=False) as index:
        assert index.document_ids == py_ids


def test_ingest_again_reports_missing_then_prunes(tmp_path: Path) -> None:
    docs = folder(tmp_path)
    with HybridIndex.open(tmp_path / "ix", create=True) as index:
        index.ingest(docs)
        (docs / "good.md").unlink()
        again = index.ingest(docs)
        assert again.missing == ["good.md"]
        assert "good.md" in index.document_ids
        pruned = index.ingest(docs, prune=True)
        assert pruned.deleted == ["good.md"]
        assert pruned.missing == []
        assert "good.md" not in index.document_ids
        with pytest.raises(InvalidInputError, match="does not exist"):
            index.ingest(tmp_path / "nowhere")
