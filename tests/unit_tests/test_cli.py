"""`ragbudget inspect`, `config`, `ask --json/--k/--no-prompt` and the evidence table
at 80 and 100 columns, on a real index of the bundled sample corpus (bm25s, embedded
Chroma, fastembed ONNX). No FlashRank model here: rerank is skipped, and reported."""

import hashlib
import json
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config._settings import DEFAULT_SURFACE
from langchain_ragbudget.index._chroma import CHROMA_DIR
from langchain_ragbudget.index._versions import CURRENT, MANIFEST, RECORDS
from langchain_ragbudget.sample import load_sample_corpus

QUESTION = "How quickly must a SEV1 page be acknowledged?"
HEADERS = ("#", "passage / source", "bm25 / dense / fused / rerank", "tokens")
STATUS_HEADER = "in the prompt?"


def write_sample_files(folder: Path) -> None:
    """The sample corpus as files, one per source document (passages joined)."""
    texts: dict[str, list[str]] = defaultdict(list)
    for doc in load_sample_corpus():
        texts[doc.metadata["source"]].append(doc.page_content)
    for source, passages in texts.items():
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        (folder / source).write_text("\n\n".join(passages), encoding="utf-8")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(index folder, offline config) built once for the module; copy to change."""
    root = tmp_path_factory.mktemp("sample")
    write_sample_files(root / "docs")
    config = root / "offline.yml"
    config.write_text("rerank:\n  download: false\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGBUDGET_CACHE_DIR", str(root / "cache"))
        code = main(["index", str(root / "docs"), "--index", str(root / "ix")])
    assert code == 0
    return root / "ix", config


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))  # no FlashRank
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def snapshot(folder: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under `folder`: kind, content hash (files), size and mtime."""
    out = {}
    for path in sorted(folder.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""
        out[str(path.relative_to(folder))] = (digest, stat.st_size, stat.st_mtime_ns)
    return out


pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


# --- inspect -------------------------------------------------------------------


def test_inspect_reports_a_healthy_index_and_changes_nothing(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    index, _ = built
    before = snapshot(index)
    assert main(["inspect", "--index", str(index), "--json"]) == 0
    out, err = capsys.readouterr()
    found = json.loads(out)
    assert snapshot(index) == before
    sources = {doc.metadata["source"] for doc in load_sample_corpus()}
    assert found["documents"] == len(sources)
    assert found["chunks"]["bm25"] == found["chunks"]["vector_store"] > len(sources)
    assert found["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert found["chunking"] == {
        "chunk_size": 256,
        "chunk_overlap": 32,
        "chunker": "sentences",
        "encoding": "cl100k_base",
    }
    assert found["sync"]["in_sync"] and found["healthy"] and not found["problems"]
    assert found["versions"]["committed_bm25_version"] == (index / CURRENT).read_text()
    on_disk = sum(p.stat().st_size for p in index.rglob("*") if p.is_file())
    assert found["size_bytes"]["total"] == on_disk
    assert "Traceback" not in err
    # the same facts for a reader
    assert main(["inspect", "--index", str(index)]) == 0
    text = capsys.readouterr().out
    assert "sparse and dense sides are in sync" in text and "healthy" in text
    assert snapshot(index) == before


def _remove_current(index: Path) -> str:
    (index / CURRENT).unlink()
    return f"{index / CURRENT} is missing or damaged"


def _remove_bm25(index: Path) -> str:
    version = index / (index / CURRENT).read_text()
    shutil.rmtree(version / "bm25")
    return str(version / "bm25")


def _corrupt_manifest(index: Path) -> str:
    (index / MANIFEST).write_text('{"format": 1, "embedding')
    return f"{index / MANIFEST} is damaged"


def _remove_vectors(index: Path) -> str:
    shutil.rmtree(index / CHROMA_DIR)
    return "the vector side is gone"


def _corrupt_records(index: Path) -> str:
    version = index / (index / CURRENT).read_text()
    (version / RECORDS).write_text("{not json")
    return str(version / RECORDS)


@pytest.mark.parametrize(
    "damage",
    [
        _remove_current,
        _remove_bm25,
        _corrupt_manifest,
        _remove_vectors,
        _corrupt_records,
    ],
)
def test_inspect_reports_damage_without_repairing_it(
    built: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage: object,
) -> None:
    index = tmp_path / "ix"
    shutil.copytree(built[0], index)
    assert callable(damage)
    named = damage(index)
    before = snapshot(index)
    assert main(["inspect", "--index", str(index), "--json"]) == 1
    out, err = capsys.readouterr()
    found = json.loads(out)
    assert not found["healthy"]
    assert any(named in problem for problem in found["problems"]), found["problems"]
    assert "Traceback" not in err
    assert snapshot(index) == before  # no repair, no recovery, no clean-up
    assert main(["inspect", "--index", str(index)]) == 1
    text = capsys.readouterr().out
    assert "not healthy" in text and "problem:" in text
    assert snapshot(index) == before


def test_inspect_names_chunks_on_one_side_only(
    built: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langchain_ragbudget.index._hybrid_index import HybridIndex

    index = tmp_path / "ix"
    shutil.copytree(built[0], index)
    with HybridIndex.open(index, create=False) as opened:
        victim = opened.vectorstore.get(limit=1)["ids"][0]
        opened.vectorstore.delete(ids=[victim])
    before = snapshot(index)
    assert main(["inspect", "--index", str(index), "--json"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert found["sync"]["only_in_bm25"] == [victim]
    assert found["chunks"]["bm25"] == found["chunks"]["vector_store"] + 1
    assert snapshot(index) == before


@pytest.mark.parametrize("kind", ["missing", "file", "empty folder"])
def test_inspect_without_an_index_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    target = tmp_path / "ix"
    if kind == "file":
        target.write_text("not a folder")
    elif kind == "empty folder":
        target.mkdir()
    before = snapshot(tmp_path)
    assert main(["inspect", "--index", str(target), "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert str(target) in err
    assert snapshot(tmp_path) == before  # nothing created


# --- config --------------------------------------------------------------------


def test_config_shows_every_value_with_its_origin(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "240")  # wide enough that no cell folds
    path = tmp_path / "ragbudget.yml"
    path.write_text("retrieval: {k: 7}\nsurfaces:\n  voice:\n    max_tokens: 300\n")
    assert main(["config", "--config", str(path), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    settings = shown["settings"]
    assert settings["retrieval.k"] == {
        "value": 7,
        "origin": "file",
        "source": str(path),
    }
    assert settings["retrieval.rrf_c"] == {
        "value": 60.0,
        "origin": "built-in",
        "source": "built-in default",
    }
    assert settings["surfaces.search.max_docs"]["origin"] == "default"
    assert settings["surfaces.voice.max_docs"]["origin"] == "inherited"
    assert settings["surfaces.voice.max_tokens"]["value"] == 300
    assert main(["config", "--config", str(path), "--surface", "voice"]) == 0
    text = capsys.readouterr().out
    rows = [line.split() for line in text.splitlines() if "surfaces.voice." in line]
    assert rows and all(row[0].startswith("surfaces.voice.") for row in rows)
    assert "retrieval.k" not in text
    assert ["surfaces.voice.max_tokens", "300", "your", "file"] in rows
    assert f"your file = {path};" in " ".join(text.split())  # the caption names it


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--surface", "nope"], "surfaces.nope"),
        (["--config", "{bad}"], "surfaces.chat.max_tokens"),
    ],
)
def test_config_errors_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("surfaces:\n  chat:\n    max_tokens: -5\n")
    argv = [str(bad) if item == "{bad}" else item for item in argv]
    assert main(["config", *argv, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and named in err and len(err.strip().splitlines()) == 1


# --- ask -----------------------------------------------------------------------


def ask_json(
    built: tuple[Path, Path], capsys: pytest.CaptureFixture[str], *extra: str
) -> dict[str, Any]:
    index, config = built
    argv = ["ask", QUESTION, "--index", str(index), "--config", str(config)]
    assert main([*argv, "--json", *extra]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)  # the whole of stdout is one JSON object
    assert isinstance(result, dict)
    return result


def test_ask_json_is_one_object_with_every_candidate(
    built: tuple[Path, Path], offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ask_json(built, capsys)
    evidence = result["evidence"]
    assert isinstance(evidence, list) and evidence
    report = result["report"]
    assert isinstance(report, dict)
    kept = [row["key"] for row in evidence if row["outcome"] in ("kept", "shortened")]
    assert sorted(kept) == sorted(report["kept_ids"])
    dropped = [row for row in evidence if row["outcome"] == "dropped"]
    assert dropped and all(row["detail"] for row in dropped)
    over = [row for row in dropped if row["reason"] == "over_max_tokens"]
    assert all("left of" in row["detail"] for row in over)
    assert any(row["header_tokens"] for row in evidence)  # headers cost tokens
    assert result["prompt"] and result["answer"] is None
    assert any("rerank stage skipped" in w for w in result["warnings"])
    assert ask_json(built, capsys, "--no-prompt")["prompt"] is None


def test_ask_k_sets_the_candidates_of_each_retriever(
    built: tuple[Path, Path], offline: None, capsys: pytest.CaptureFixture[str]
) -> None:
    result = ask_json(built, capsys, "--k", "3", "--surface", "search")
    assert result["retrieval"] == {"k": 10, "fetch_k": {"sparse": 3, "dense": 3}}
    report = result["report"]
    assert isinstance(report, dict)
    seen = len(report["kept_ids"]) + len(report["dropped"])
    assert 3 <= seen <= 6  # at most 3 from each side, nothing lost
    wide = ask_json(built, capsys, "--surface", "search")["report"]
    assert isinstance(wide, dict)
    assert len(wide["kept_ids"]) + len(wide["dropped"]) > 6


def _header_block(lines: list[str]) -> tuple[list[str], int]:
    """The header lines of the evidence table and the index of its rule line."""
    rule = next(i for i, line in enumerate(lines) if line.strip().startswith("────"))
    start = next(i for i in range(rule, -1, -1) if not lines[i - 1].strip())
    return lines[start:rule], rule


def _column(lines: list[str], rule: int, first: int, start: int, end: int) -> list[str]:
    """The cells of one column, wrapped lines joined; a row starts at its `#`
    (the text before `first`, where the second column starts)."""
    cells: list[str] = []
    for line in lines[rule + 1 :]:
        if not line.strip():
            break
        rank, piece = line[:first].strip(), line[start:end].strip()
        if rank.isdigit():
            cells.append(piece)
        elif cells:
            cells[-1] += piece
    return cells


@pytest.mark.parametrize("columns", [80, 100])
@pytest.mark.parametrize("surface", [DEFAULT_SURFACE, "search"])
def test_the_evidence_table_keeps_every_column(
    built: tuple[Path, Path],
    offline: None,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    columns: int,
    surface: str,
) -> None:
    index, config = built
    monkeypatch.setenv("COLUMNS", str(columns))
    argv = ["ask", QUESTION, "--index", str(index), "--config", str(config)]
    assert main([*argv, "--surface", surface, "--no-prompt"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert "…" not in out and "..." not in out
    header, rule = _header_block(lines)
    words = " ".join(header).split()
    for name in (*HEADERS, STATUS_HEADER):
        assert all(word in words for word in name.split()), (name, header)
    # the passage ids, folded over lines, are whole: the same as --json reports,
    # each followed by its source unless the id starts with it
    start = min(line.index("passage") for line in header if "passage" in line)
    end = min(line.index("bm25") for line in header if "bm25" in line)
    cells = _column(lines, rule, start, start, end)
    expected = ask_json(built, capsys, "--surface", surface)["evidence"]
    assert isinstance(expected, list)
    assert len(cells) == len(expected)
    for row, cell in zip(expected, cells, strict=True):
        assert cell.startswith(row["key"]), (cell, row["key"])
        rest = cell.removeprefix(row["key"]).removeprefix(" *")
        assert rest in ("", row["source"]), (cell, row)
        if len(row["key"]) <= 32:  # one that fits the column is never broken
            assert any(row["key"] in line for line in lines), row["key"]
    # a drop shows its detail; a passage that opened a citation shows its header
    status_at = min(  # "in the prompt?", or "in the" over "prompt?" when narrow
        line.index(word)
        for line in header
        for word in ("in the", "prompt")
        if word in line
    )
    status = _column(lines, rule, start, status_at, columns)
    tokens = _column(lines, rule, start, end, status_at)
    assert any("+" in cell for cell in tokens)
    dropped = [row for row in expected if row["outcome"] == "dropped"]
    for row, cell in zip(expected, status, strict=True):
        if row["outcome"] == "dropped":
            assert cell.replace(" ", "").endswith(row["detail"].replace(" ", ""))
    if surface == DEFAULT_SURFACE:
        assert dropped  # the small chat budget drops some of this corpus
