"""`ragbudget index` on real files: stable ids, scoped --prune, no silent skip.

Real parts throughout (bm25s, embedded Chroma, fastembed ONNX), small corpora.
"""

import json
import os
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget import load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.index._loaders import is_blank, scan

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")


def corpus(folder: Path, per_folder: int = 4) -> list[str]:
    """Files in two subfolders and the top, each with its own keyword; their ids."""
    files = {}
    for sub in ("pip", "guide"):
        for number in range(per_folder):
            files[f"{sub}/page{number}.md"] = (
                f"# {sub} {number}\nPage {number} of {sub} is about "
                f"keyword{sub}{number}."
            )
    files["index.md"] = "# Home\nThe home page links every section."
    write(folder, files)
    return sorted(files)


def stored(index_dir: Path) -> tuple[list[str], list[str], list[str]]:
    """(document ids, BM25 chunk ids, vector ids) as a fresh open sees them."""
    with HybridIndex.open(index_dir, create=False) as index:
        assert index.sync_report.in_sync
        sparse = [str(d.id) for d in index.as_retriever().retrievers[0].documents]  # type: ignore[attr-defined]
        dense = index.vectorstore.get()["ids"]
        return index.document_ids, sorted(sparse), sorted(dense)


def test_a_file_or_subfolder_is_reindexed_in_place_with_prune(tmp_path: Path) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    ids = corpus(docs)
    assert main(["index", str(docs), "--index", ix]) == 0
    before = stored(Path(ix))
    assert before[0] == ids and len(before[1]) == len(ids)
    manifest = json.loads((Path(ix) / "manifest.json").read_text())
    assert manifest["root"] == str(docs.resolve())
    # one file, then one subfolder (edited), each with --prune: nothing else goes
    assert (
        main(["index", str(docs / "pip" / "page1.md"), "--index", ix, "--prune"]) == 0
    )
    assert stored(Path(ix)) == before
    (docs / "guide" / "page2.md").write_text("Page two of guide now says keywordnew.")
    assert main(["index", str(docs / "guide"), "--index", ix, "--prune"]) == 0
    after = stored(Path(ix))
    assert after[0] == ids  # every document once, under the same ids
    assert after[1] == after[2] == before[1]
    with HybridIndex.open(ix, create=False) as index:
        hit = index.as_retriever(k=1).invoke("keywordnew")[0]
        assert hit.metadata["doc_id"] == "guide/page2.md"
    # a relative path from inside the tree resolves to the same ids
    cwd = Path.cwd()
    try:
        os.chdir(docs / "pip")
        assert main(["index", ".", "--index", ix, "--prune"]) == 0
    finally:
        os.chdir(cwd)
    assert stored(Path(ix))[0] == ids


def test_prune_is_scoped_to_the_path_given(tmp_path: Path) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    ids = corpus(docs)
    assert main(["index", str(docs), "--index", ix]) == 0
    (docs / "pip" / "page0.md").unlink()
    (docs / "guide" / "page0.md").unlink()
    assert main(["index", str(docs / "pip"), "--index", ix, "--prune"]) == 0
    remaining = stored(Path(ix))[0]
    assert "pip/page0.md" not in remaining and "guide/page0.md" in remaining
    assert len(remaining) == len(ids) - 1


def test_prune_over_the_threshold_needs_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    ids = corpus(docs, per_folder=4)
    for number in range(4, 8):  # 8 pages in pip, 4 in guide, index.md: 13
        write(docs, {f"pip/page{number}.md": f"Extra page {number} of pip."})
    assert main(["index", str(docs), "--index", ix]) == 0
    for page in (docs / "pip").iterdir():
        page.unlink()
    capsys.readouterr()
    assert main(["index", str(docs), "--index", ix, "--prune"]) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert "--prune would remove 8 of the 13 indexed documents" in out
    assert "--yes" in out and "nothing was indexed or removed" in out
    assert len(stored(Path(ix))[0]) == 13  # refused: nothing removed
    assert main(["index", str(docs), "--index", ix, "--prune", "--yes"]) == 0
    assert stored(Path(ix))[0] == [i for i in ids if not i.startswith("pip/")]


def test_a_few_removals_need_no_yes(tmp_path: Path) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    corpus(docs)
    assert main(["index", str(docs), "--index", ix]) == 0
    (docs / "index.md").unlink()  # 1 of 9: under the threshold
    assert main(["index", str(docs), "--index", ix, "--prune"]) == 0
    assert "index.md" not in stored(Path(ix))[0]


def test_a_path_outside_the_root_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, other, ix = tmp_path / "docs", tmp_path / "other", str(tmp_path / "ix")
    corpus(docs)
    write(other, {"x.md": "Outside text."})
    assert main(["index", str(docs), "--index", ix]) == 0
    capsys.readouterr()
    assert main(["index", str(other), "--index", ix]) == 2
    out = " ".join(capsys.readouterr().err.split())
    assert f"{other} is outside {docs.resolve()}" in out
    assert "x.md" not in stored(Path(ix))[0]


def test_a_manifest_without_root_gets_one(tmp_path: Path) -> None:
    docs, ix = tmp_path / "docs", tmp_path / "ix"
    ids = corpus(docs)
    assert main(["index", str(docs), "--index", str(ix)]) == 0
    manifest = json.loads((ix / "manifest.json").read_text())
    del manifest["root"]  # an index made before roots were recorded
    (ix / "manifest.json").write_text(json.dumps(manifest))
    assert main(["index", str(docs), "--index", str(ix)]) == 0
    assert json.loads((ix / "manifest.json").read_text())["root"] == str(docs.resolve())
    assert stored(ix)[0] == ids


def test_the_summary_names_and_counts_every_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    write(
        docs,
        {
            "good.md": "Refunds are paid within 90 days.",
            "notes.rst": "Restructured text.",
            "README": "No extension, read by its name.",
            "drafts/wip.md": "Work in progress.",
            "empty.txt": "",
            "blank.md": " \n\t \u00a0\n",
            "invisible.md": "\u200b\u200d\ufeff\n",
        },
    )
    (docs / "archive.gz").write_bytes(b"\x1f\x8b\x08\x00")
    (docs / "loop-a").symlink_to("loop-b")
    (docs / "loop-b").symlink_to("loop-a")
    (docs / "drafts" / "up").symlink_to("..")
    (docs / "gone.md").symlink_to("missing.md")
    code = main(["index", str(docs), "--index", ix, "--exclude", "drafts"])
    out = capsys.readouterr().out
    assert code == 0  # empty and blank files are refused as expected, not failures
    rows = {
        " ".join(line.strip("│ ").split()): line
        for line in out.splitlines()
        if line.startswith("│")
    }
    expected_rows = [
        "added 2 README, good.md",
        "refused empty 3 blank.md, empty.txt, invisible.md",
        "skipped unsupported type 2 archive.gz, notes.rst",
        "skipped dangling link 1 gone.md",
        "skipped symlink loop 2 loop-a, loop-b",
        "skipped excluded by --exclude 2 drafts/up, drafts/wip.md",
    ]
    flat = {" ".join(key.replace("│", " ").split()) for key in rows}
    for row in expected_rows:
        assert row in flat, (row, flat)
    assert "refused: invisible.md: empty: only whitespace" in out
    assert "skipped (dangling link): gone.md -> missing.md" in out
    # counted in the totals: 2 added, 3 refused, 7 skipped
    totals = (
        "files 2 added, 0 updated, 0 unchanged, 0 restored, 0 deleted, 3 refused, "
        "7 skipped"
    )
    assert totals in " ".join(out.split())
    assert stored(Path(ix))[0] == ["README", "good.md"]


def test_expected_skips_alone_exit_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, ix = tmp_path / "docs", str(tmp_path / "ix")
    write(docs, {"good.md": "Refunds are paid.", "notes.rst": "rst"})
    assert main(["index", str(docs), "--index", ix]) == 0
    assert "skipped (unsupported type): notes.rst .rst" in capsys.readouterr().out


def test_a_link_loop_in_a_subfolder_is_not_followed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    corpus(docs)
    (docs / "pip" / "up").symlink_to("..")
    found = scan(docs / "pip")
    assert [s.reason for s in found.skipped] == ["symlink loop"]
    assert len(found.files) == 4  # the pip pages, not the whole tree again


@pytest.mark.parametrize("command", ["ask", "repair"])
def test_read_only_commands_never_create_an_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    missing = tmp_path / "typo" / "ix"
    argv = [command, "--index", str(missing)]
    if command == "ask":
        argv.insert(1, "When are refunds paid?")
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "no index here" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "typo").exists()
    (tmp_path / "empty").mkdir()
    assert main([*argv[:-1], str(tmp_path / "empty")]) == 2
    assert list((tmp_path / "empty").iterdir()) == []


def test_an_index_path_that_is_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    corpus(docs)
    (tmp_path / "ix").write_text("not a folder")
    assert main(["index", str(docs), "--index", str(tmp_path / "ix")]) == 2
    assert "is a file, not an index folder" in capsys.readouterr().err


def config_with(**index_settings: object) -> RagBudgetConfig:
    config = load_config()
    return config.model_copy(
        update={"index": config.index.model_copy(update=index_settings)}
    )


@pytest.mark.parametrize("chunker", ["recursive", "sentences"])
def test_blank_chunks_are_never_indexed(tmp_path: Path, chunker: str) -> None:
    text = "Refunds are paid within 90 days. " * 6 + "\u200b " * 200 + "The end."
    with HybridIndex.open(
        tmp_path / "ix", config_with(chunk_size=16, chunk_overlap=0, chunker=chunker)
    ) as index:
        summary = index.upsert([Document(id="a.md", page_content=text)])
        if chunker == "recursive":  # its blank pieces are left out, with a note
            assert summary.notes
            assert "whitespace or invisible" in summary.notes[0].problem
        else:  # a run of whole sentences never is blank: nothing to leave out
            assert not summary.notes
        texts = index.vectorstore.get()["documents"]
        assert texts and not any(is_blank(t) for t in texts)
        positions = sorted(
            c.metadata["position"]
            for c in index.as_retriever().retrievers[0].documents  # type: ignore[attr-defined]
        )
        assert positions == list(range(len(texts)))
        summary = index.upsert([Document(id="b.md", page_content="\u200b\n\u2060")])
        assert summary.errors[0].problem.startswith("empty")
        assert "b.md" not in index.document_ids


def test_reindexing_after_damage_re_adds_what_is_missing(tmp_path: Path) -> None:
    documents = [
        Document(id=f"{name}.md", page_content=f"Text about {name}.")
        for name in ("alpha", "beta")
    ]
    with HybridIndex.open(tmp_path / "ix") as index:
        index.upsert(documents)
        index.vectorstore.delete(ids=["alpha.md::0"])  # lost from one side
    with HybridIndex.open(tmp_path / "ix") as index:
        summary = index.upsert(documents)
        assert summary.restored == ["alpha.md"] and summary.unchanged == ["beta.md"]
        assert index.sync_report.in_sync
        assert sorted(index.vectorstore.get()["ids"]) == ["alpha.md::0", "beta.md::0"]
