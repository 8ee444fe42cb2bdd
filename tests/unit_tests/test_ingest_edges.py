"""What `ragbudget index` reads: the files its help promises, whole, and never junk.

By-name text files with or without an extension, every member of a gzip,
binary files refused as binary (no encoding can make them text), and codecs that
are not text encodings refused before the index folder exists. Real files, the
real CLI; the index-building tests need the embedding model.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

import langchain_ragbudget.index._hybrid_index as hybrid_module
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config import load_config
from langchain_ragbudget.index import read_file
from langchain_ragbudget.index._hybrid_index import EMBEDDING, HybridIndex
from langchain_ragbudget.index._loaders import PLAIN_NAMES, UNSUPPORTED, scan
from langchain_ragbudget.retrieval._dense import ADD_BATCH_SIZE

README = Path(__file__).parents[2] / "README.md"
BY_NAME = (
    *("README", "README.Debian", "README.dns", "copyright", "AUTHORS", "TODO"),
    *("FAQ", "NEWS", "ChangeLog", "THANKS", "INSTALL", "LICENSE", "NOTICE"),
    *("BUGS", "COPYING", "CREDITS", "HISTORY", "CHANGES", "CONTRIBUTING"),
    *("README.source", "TODO.Debian", "changelog.Debian.amd64", "README-hacking"),
)


def test_by_name_files_are_read_with_or_without_an_extension(tmp_path: Path) -> None:
    for name in BY_NAME:
        (tmp_path / name).write_text(f"The {name} file says hello.", "utf-8")
        gz(tmp_path / f"{name}.gz", f"The gzipped {name} says hello.")
    for name in ("Makefile", "ls.1", "configure.ac", "READMEish", "notes.rst"):
        (tmp_path / name).write_text("not read by name", "utf-8")
    found = scan(tmp_path)
    read = sorted(path.name for path in found.files)
    assert read == sorted([*BY_NAME, *(f"{name}.gz" for name in BY_NAME)])
    assert sorted((s.path, s.reason) for s in found.skipped) == [
        (name, UNSUPPORTED)
        for name in ("Makefile", "READMEish", "configure.ac", "ls.1", "notes.rst")
    ]
    assert read_file(tmp_path / "copyright").text == "The copyright file says hello."


def test_the_help_and_the_readme_name_exactly_the_names_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["index", "--help"])
    shown = capsys.readouterr().out
    readme = README.read_text("utf-8")
    files_read = readme[readme.index("Files read:") :].split("\n\n")[0]
    for text in (shown, files_read):
        listed = re.search(r"\): ?(AUTHORS[A-Z ,\n]*TODO)\.", text)
        assert listed is not None, text
        assert re.split(r"[ ,\n]+", listed.group(1)) == list(PLAIN_NAMES)
    assert "ls.1.gz" in shown and "binary" in shown


def gz(path: Path, text: str | bytes) -> None:
    data = text.encode("utf-8") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data))


def test_every_member_of_a_gzip_is_read(tmp_path: Path) -> None:
    path = tmp_path / "NEWS.gz"
    first = gzip.compress(b"Version 2 adds --quiet.\n")
    path.write_bytes(first + gzip.compress(b"Version 1 was the first release.\n"))
    assert read_file(path).text == (
        "Version 2 adds --quiet.\nVersion 1 was the first release.\n"
    )


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        (b"garbage", r"7 byte\(s\) after member 1 are not gzip data"),
        (b"\0" * 16, r"16 byte\(s\) after member 1 are not gzip data"),
        (
            gzip.compress(b"second" * 50)[:-6],
            r"unreadable gzip \(member 2\): truncated",
        ),
    ],
    ids=["garbage", "zero-padding", "truncated-second-member"],
)
def test_bytes_after_the_last_gzip_member_are_refused(
    tmp_path: Path, tail: bytes, problem: str
) -> None:
    path = tmp_path / "changelog.gz"
    path.write_bytes(gzip.compress(b"first member") + tail)
    with pytest.raises(ValueError, match=problem):
        read_file(path)


def elf_bytes() -> bytes:
    with Path(sys.executable).resolve().open("rb") as executable:
        return executable.read(4096)


@pytest.mark.skipif(not elf_bytes().startswith(b"\x7fELF"), reason="not an ELF host")
@pytest.mark.parametrize("encodings", [("utf-8",), ("utf-8", "latin-1"), ("latin-1",)])
def test_a_binary_is_named_binary_whatever_the_encodings(
    tmp_path: Path, encodings: tuple[str, ...]
) -> None:
    executable = tmp_path / "notes.txt"
    executable.write_bytes(elf_bytes())
    with pytest.raises(ValueError, match=r"^binary, not text \(an ELF executable\)"):
        read_file(executable, encodings)
    nul = tmp_path / "README"
    nul.write_bytes(b"A short line of real text" + b"\0\x01\x02tail")
    with pytest.raises(ValueError) as refused:
        read_file(nul, encodings)
    assert str(refused.value) == "binary, not text (a NUL byte at byte 25): not indexed"


def test_utf16_text_is_not_binary_when_its_encoding_is_given(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes("Café au lait.".encode("utf-16"))
    with pytest.raises(ValueError, match="--encoding utf-16"):
        read_file(path)
    assert read_file(path, ("utf-16",)).text == "Café au lait."


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_following_the_advice_indexes_no_binary_junk(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "doc"
    folder.mkdir()
    (folder / "good.md").write_text("Refunds are paid within 90 days.", "utf-8")
    (folder / "dump.txt").write_bytes(b"x" * 24 + b"\0" + b"\x7fELF\x02\x01" * 300)
    argv = ["index", str(folder), "--index", str(tmp_path / "ix")]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "dump.txt: binary, not text (a NUL byte at byte 24)" in out
    assert "--encoding" not in out
    assert main([*argv, "--encoding", "utf-8,latin-1"]) == 0  # reported before
    assert "\0" not in capsys.readouterr().out
    assert HybridIndex.open(tmp_path / "ix").document_ids == ["good.md"]


@pytest.mark.parametrize("codec", ["rot13", "base64", "hex", "bz2", "zlib"])
def test_a_codec_that_is_not_a_text_encoding_is_refused_before_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], codec: str
) -> None:
    folder = tmp_path / "doc"
    folder.mkdir()
    (folder / "a.txt").write_text("text", "utf-8")
    index = tmp_path / "ix"
    assert main(["index", str(folder), "--index", str(index), "--encoding", codec]) == 2
    err = capsys.readouterr().err
    assert f"error: --encoding '{codec}': not a text encoding" in err
    assert "Traceback" not in err and not index.exists()


def listed(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    capsys.readouterr()
    assert main(["inspect", "--documents", *argv]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_inspect_documents_lists_every_file_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "doc"
    (folder / "man").mkdir(parents=True)
    (folder / "README").write_text("Run the installer as root.", "utf-8")
    (folder / "[bold]x.md").write_text("Markup in a name is a name.", "utf-8")
    (folder / "empty.txt").write_text("", "utf-8")
    (folder / "core.txt").write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 40)
    for number in range(23):
        gz(folder / "man" / f"tool{number:02d}.1.gz", ".TH TOOL 1")
    ix = str(tmp_path / "ix")
    assert main(["index", str(folder), "--index", ix]) == 1  # the binary: new
    out = capsys.readouterr().out
    assert "... and 3 more (all: ragbudget inspect --documents)" in out
    lines = listed(capsys, "--index", ix)
    files = lines[lines.index("healthy") + 1 :]
    assert files == [
        "indexed: README (1 chunk(s))",
        "indexed: [bold]x.md (1 chunk(s))",
        *(f"skipped (unsupported type): man/tool{n:02d}.1.gz .1.gz" for n in range(23)),
        "refused: core.txt: binary, not text (an ELF executable): not indexed",
        "refused: empty.txt: empty: no text to index",
        "2 indexed, 23 skipped, 2 refused (as the last ingest of each folder found "
        "them)",
    ]
    capsys.readouterr()
    assert main(["inspect", "--documents", "--json", "--index", ix]) == 0
    shown = json.loads(capsys.readouterr().out)["files"]
    assert [f["id"] for f in shown["indexed"]] == ["README", "[bold]x.md"]
    assert len(shown["skipped"]) == 23 and shown["skipped"][0] == {
        "id": "man/tool00.1.gz",
        "reason": UNSUPPORTED,
        "detail": ".1.gz",
    }
    assert {f["id"] for f in shown["refused"]} == {"core.txt", "empty.txt"}
    for name in ("core.txt", "empty.txt"):
        (folder / name).unlink()
    shutil.rmtree(folder / "man")
    (folder / "man").mkdir()
    (folder / "man" / "ls.1").write_text(".TH LS 1", "utf-8")
    (folder / "man" / "ls.txt").write_text("ls lists a directory.", "utf-8")
    assert main(["index", str(folder / "man"), "--index", ix]) == 0  # man/ only
    lines = listed(capsys, "--index", ix)
    files = lines[lines.index("healthy") + 1 :]
    assert files[2:] == [  # man/ as found now; the rest as the last run found it
        "indexed: man/ls.txt (1 chunk(s))",
        "skipped (unsupported type): man/ls.1 .1",
        "refused: core.txt: binary, not text (an ELF executable): not indexed",
        "refused: empty.txt: empty: no text to index",
        "3 indexed, 1 skipped, 2 refused (as the last ingest of each folder found "
        "them)",
    ]


@pytest.mark.needs_embedding_model
def test_inspect_during_a_first_build_says_a_build_is_in_progress(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ix = tmp_path / "ix"
    with HybridIndex.open(ix, create=True, write=True):  # a writer, nothing committed
        capsys.readouterr()
        assert main(["inspect", "--index", str(ix)]) == 0
        out = capsys.readouterr().out
        assert "not healthy" not in out and "problem" not in out
        said = " ".join(out.split())
        assert f"a first build by pid {os.getpid()} on " in said
        assert "is in progress: no version is committed yet" in said
        found = HybridIndex.inspect(ix)
        assert found.healthy and found.building and not found.problems
    capsys.readouterr()
    assert main(["inspect", "--index", str(ix)]) == 1  # no writer: nothing committed
    assert "no committed BM25 version found" in capsys.readouterr().out


class Interrupt:
    """A progress callback that stops the run, as Ctrl-C would, after `after`
    chunks were embedded; counts what each stage embedded."""

    def __init__(self, after: int | None = None) -> None:
        self.after = after
        self.embedded = 0

    def __call__(self, stage: str, done: int, total: int | None) -> None:
        if stage != EMBEDDING:
            return
        self.embedded = done
        if self.after is not None and done >= self.after:
            raise KeyboardInterrupt


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_repair_after_an_interrupted_first_build_reuses_what_a_rerun_would(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for number in range(90):
        sentences = (
            f"Note {number} says fact {k} about item {number}." for k in range(9)
        )
        (folder / f"n{number:02d}.md").write_text(" ".join(sentences), "utf-8")
    config = load_config()
    small = config.index.model_copy(update={"chunk_size": 32, "chunk_overlap": 0})
    config = config.model_copy(update={"index": small})
    first = tmp_path / "ix"
    with (
        pytest.raises(KeyboardInterrupt),
        HybridIndex.open(first, config, write=True) as index,
    ):
        index.ingest(folder, progress=Interrupt(after=ADD_BATCH_SIZE + 32))
    shutil.copytree(first, tmp_path / "copy")
    rerun = Interrupt()
    with HybridIndex.open(tmp_path / "copy", config, write=True) as index:
        index.ingest(folder, progress=rerun)
        chunks = index.chunk_count
    assert 0 < rerun.embedded < chunks - ADD_BATCH_SIZE // 2  # the first batch reused
    repaired, report = HybridIndex.repair_directory(first, config)
    with repaired:
        assert report.re_embedded == [] and report.needs_reingest
    after_repair = Interrupt()
    with HybridIndex.open(first, config, write=True) as index:
        summary = index.ingest(folder, progress=after_repair)
        assert index.chunk_count == chunks and index.sync_report.in_sync
    assert summary.updated == report.needs_reingest
    assert after_repair.embedded == rerun.embedded


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_a_version_published_mid_read_is_read_again_not_called_damage(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("Refunds are paid within 90 days.", "utf-8")
    ix = tmp_path / "ix"
    with HybridIndex.open(ix, write=True) as index:
        index.ingest(folder)
    (folder / "b.md").write_text("The office opens at 9am.", "utf-8")
    real_open = hybrid_module.open_vector_store
    published: list[str] = []

    def writer_publishes_first(*args: Any, **kwargs: Any) -> Any:
        if not published:  # the reader has read version 1; a writer commits 2
            published.append("b.md")
            with HybridIndex.open(ix, write=True) as writer:
                writer.ingest(folder)
        return real_open(*args, **kwargs)

    monkeypatch.setattr(hybrid_module, "open_vector_store", writer_publishes_first)
    with caplog.at_level(logging.WARNING), HybridIndex.open(ix) as reader:
        assert published and reader.sync_report.in_sync
        assert reader.document_ids == ["a.md", "b.md"]
    assert "out of sync" not in caplog.text


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_ask_over_sides_out_of_sync_says_so_once(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n", "utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "refunds.md").write_text("Refunds are paid within 90 days.", "utf-8")
    settings = ["--index", str(tmp_path / "ix"), "--config", str(config)]
    assert main(["index", str(folder), *settings]) == 0
    with HybridIndex.open(tmp_path / "ix", write=True) as index:  # a stray vector
        stray = Document(id="x.md::0", page_content="x", metadata={"doc_id": "x.md"})
        index.vectorstore.add_documents([stray], ids=["x.md::0"])
    capsys.readouterr()
    with caplog.at_level(logging.WARNING):  # the console script prints these
        assert main(["ask", "When are refunds paid?", "--no-prompt", *settings]) == 0
    said = capsys.readouterr()
    warned = [r.getMessage() for r in caplog.records if "out of sync" in r.getMessage()]
    assert len(warned) == 1 and "1 chunk(s) only in the vector store" in warned[0]
    assert "out of sync" not in said.out  # the console does not say it again
    assert "refunds.md::0" in said.out


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_inspect_during_an_update_reports_the_write_not_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.md").write_text("Refunds are paid within 90 days.", "utf-8")
    ix = tmp_path / "ix"
    with HybridIndex.open(ix, write=True) as index:
        index.ingest(folder)
    with HybridIndex.open(ix, write=True) as writer:  # vectors written, unpublished
        new = Document(id="b.md::0", page_content="b", metadata={"doc_id": "b.md"})
        writer.vectorstore.add_documents([new], ids=["b.md::0"])
        capsys.readouterr()
        assert main(["inspect", "--index", str(ix)]) == 0
        said = " ".join(capsys.readouterr().out.split())
        assert f"a write by pid {os.getpid()} on " in said
        assert "(1 new chunk(s) not yet published)" in said
        assert "not healthy" not in said
