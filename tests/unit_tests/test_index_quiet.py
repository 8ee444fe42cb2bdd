"""`ragbudget index` for scheduled jobs: .gz files, encodings, the exit-code policy.

On the real parts (bm25s, embedded Chroma, fastembed ONNX). The policy: a file
that cannot be read fails the run (exit 1) the first time; re-run with that file
unchanged, the refusal is still listed, one line says it was reported before, and
the run exits 0; a changed file, or a new unreadable one, fails again.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from langchain_ragbudget.cli._main import main
from langchain_ragbudget.index import read_file
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.index._loaders import GZIP_MAX_BYTES, scan

LATIN1 = "Café menu: crème brûlée is served after 7pm.".encode("latin-1")


def index(tmp_path: Path, folder: Path, *extra: str) -> int:
    return main(["index", str(folder), "--index", str(tmp_path / "ix"), *extra])


def gz(path: Path, text: str | bytes) -> None:
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data))


def test_gz_files_are_scanned_by_their_inner_type(tmp_path: Path) -> None:
    for name in ("a.md.gz", "b.txt.gz", "c.html.gz", "NEWS.gz", "changelog.Debian.gz"):
        gz(tmp_path / name, "text")
    for name in ("ls.1.gz", "x.pdf.gz", "x.tar.gz", "archive.gz", "README.pdf.gz"):
        gz(tmp_path / name, "text")
    found = scan(tmp_path)
    assert sorted(p.name for p in found.files) == [
        "NEWS.gz",
        "a.md.gz",
        "b.txt.gz",
        "c.html.gz",
        "changelog.Debian.gz",
    ]
    details = sorted(item.detail for item in found.skipped)
    assert details == [".1.gz", ".gz", ".pdf.gz", ".pdf.gz", ".tar.gz"]


def test_a_gz_file_is_read_as_its_inner_type(tmp_path: Path) -> None:
    gz(tmp_path / "guide.md.gz", "# Rotating logs\n\nRun logrotate daily.\n")
    gz(tmp_path / "page.html.gz", "<title>Ports</title><p>Port 8080 is open.</p>")
    markdown = read_file(tmp_path / "guide.md.gz")
    assert markdown.title == "Rotating logs" and "logrotate" in markdown.text
    html = read_file(tmp_path / "page.html.gz")
    assert html.title == "Ports" and html.text == "Port 8080 is open."


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"not gzip at all", "unreadable gzip"),
        (gzip.compress(b"cut short" * 100)[:-12], "unreadable gzip"),
        (gzip.compress(b"\0" * (GZIP_MAX_BYTES + 1)), "decompresses to over"),
    ],
    ids=["not-gzip", "truncated", "bomb"],
)
def test_a_bad_gz_is_one_named_error(tmp_path: Path, data: bytes, problem: str) -> None:
    path = tmp_path / "bad.txt.gz"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=problem):
        read_file(path)


def test_encodings_are_tried_in_order(tmp_path: Path) -> None:
    path = tmp_path / "menu.txt"
    path.write_bytes(LATIN1)
    with pytest.raises(ValueError, match=r"not UTF-8 text \(byte 3\).*--encoding"):
        read_file(path)
    assert "crème brûlée" in read_file(path, ("utf-8", "latin-1")).text
    assert read_file(path, ("cp1252",)).text == LATIN1.decode("cp1252")
    utf8 = tmp_path / "plain.txt"
    utf8.write_text("déjà vu", encoding="utf-8")
    assert read_file(utf8, ("utf-8", "latin-1")).text == "déjà vu"  # first wins


def test_an_image_only_pdf_says_so(tmp_path: Path) -> None:
    pypdf = pytest.importorskip("pypdf")
    writer = pypdf.PdfWriter()
    writer.add_blank_page(width=200, height=200)  # pages, but no text layer
    path = tmp_path / "scan.pdf"
    with path.open("wb") as out:
        writer.write(out)
    with pytest.raises(ValueError, match=r"no text layer \(image-only PDF\?\)"):
        read_file(path)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_gz_files_are_indexed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "doc"
    folder.mkdir()
    gz(folder / "logrotate.md.gz", "# Logs\n\nlogrotate runs daily from cron.")
    gz(folder / "NEWS.gz", "Version 2.1 adds the --quiet flag.")
    gz(folder / "ls.1.gz", ".TH LS 1\n.SH NAME\nls \\- list directory")
    assert index(tmp_path, folder) == 0
    out = capsys.readouterr().out
    assert "ls.1.gz" in out and ".1.gz" in out  # skipped, named
    opened = HybridIndex.open(tmp_path / "ix")
    assert opened.document_ids == ["NEWS.gz", "logrotate.md.gz"]
    hit = opened.as_retriever(k=1).invoke("when does logrotate run?")[0]
    assert hit.metadata["doc_id"] == "logrotate.md.gz" and "daily" in hit.page_content
    assert hit.metadata["title"] == "Logs"


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_an_unchanged_refusal_does_not_fail_an_unchanged_rerun(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "doc"
    folder.mkdir()
    (folder / "good.md").write_text("Refunds are paid within 90 days.")
    (folder / "menu.txt").write_bytes(LATIN1)
    assert index(tmp_path, folder) == 1  # reported: a failure the first time
    first = capsys.readouterr().out
    assert "refused: menu.txt: not UTF-8" in first and "reported them" not in first
    assert index(tmp_path, folder) == 0  # unchanged: still said, in one line
    again = capsys.readouterr().out
    assert "refused: menu.txt: not UTF-8" in again
    said = [line for line in again.splitlines() if "last run reported" in line]
    assert len(said) == 1 and "menu.txt" in said[0]
    (folder / "other.txt").write_bytes(b"\xff\xfe bad")  # a new failure fails
    assert index(tmp_path, folder) == 1
    capsys.readouterr()
    assert index(tmp_path, folder) == 0  # both reported and unchanged now
    capsys.readouterr()
    stamp = (folder / "menu.txt").stat().st_mtime_ns + 5_000_000_000
    os.utime(folder / "menu.txt", ns=(stamp, stamp))  # touched: changed again
    assert index(tmp_path, folder) == 1
    capsys.readouterr()
    assert index(tmp_path, folder, "--encoding", "utf-8,latin-1") == 0
    assert "menu.txt" in HybridIndex.open(tmp_path / "ix").document_ids


def test_the_policy_is_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "already reported by the last run and is unchanged since" in out
    assert "x.md.gz" in out and "--encoding" in out
