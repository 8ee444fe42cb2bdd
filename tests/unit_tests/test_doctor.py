"""`ragbudget doctor` and `config` say what is in effect and where it was found.

No model is loaded: the doctor looks for the files each model needs, so a folder
holding empty files of the right names counts as found, and one lacking any of
them as missing (exit 1).
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from langchain_ragbudget.cli._doctor import (
    EMBEDDING_FILES,
    TIKTOKEN_FILES,
    Finding,
    _table,
)
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.config._disk import CACHE_DIR_ENV
from langchain_ragbudget.retrieval._embeddings import MODEL_PATH_ENV

RERANK_MODEL = ("ms-marco-MiniLM-L-12-v2", "flashrank-MiniLM-L-12-v2_Q.onnx")


def findings(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    data = json.loads(capsys.readouterr().out)
    return {row["name"]: row for row in data["findings"]}


def embedding_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in EMBEDDING_FILES:
        (folder / name).write_bytes(b"")
    return folder


@pytest.fixture
def healthy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every file the shipped configuration's models need, empty, in `tmp_path`."""
    monkeypatch.setenv(MODEL_PATH_ENV, str(embedding_folder(tmp_path / "embed")))
    tiktoken = tmp_path / "tiktoken"
    tiktoken.mkdir()
    for name in ("cl100k_base", "o200k_base"):
        for url in TIKTOKEN_FILES[name]:
            (tiktoken / hashlib.sha1(url.encode()).hexdigest()).write_bytes(b"")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tiktoken))
    rerank = tmp_path / "cache" / "flashrank" / RERANK_MODEL[0]
    rerank.mkdir(parents=True)
    for name in (RERANK_MODEL[1], "tokenizer.json"):
        (rerank / name).write_bytes(b"")
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    return tmp_path


def test_every_model_file_found_exits_0(
    healthy: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--json"]) == 0
    found = findings(capsys)
    for name in ("embedding model folder", "rerank model", "tiktoken cache"):
        assert found[name]["status"] == "ok", found[name]


@pytest.mark.parametrize(
    ("remove", "finding", "lacks"),
    [
        ("embed/tokenizer.json", "embedding model folder", "tokenizer.json"),
        ("embed/model.onnx", "embedding model folder", "model.onnx"),
        ("tiktoken", "tiktoken cache", "cl100k_base, o200k_base"),
        ("cache/flashrank", "rerank model", RERANK_MODEL[1]),
    ],
)
def test_each_missing_model_file_is_named_and_exits_1(
    healthy: Path,
    capsys: pytest.CaptureFixture[str],
    remove: str,
    finding: str,
    lacks: str,
) -> None:
    path = healthy / remove
    if path.is_dir():
        for child in sorted(path.rglob("*"), reverse=True):
            child.unlink() if child.is_file() else child.rmdir()
    else:
        path.unlink()
    assert main(["doctor", "--json"]) == 1
    row = findings(capsys)[finding]
    assert row["status"] == "missing" and f"lacks {lacks}" in row["value"]


def test_the_model_folder_from_the_environment_is_named_as_such(
    healthy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = embedding_folder(healthy / "elsewhere")
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    assert main(["doctor", "--json"]) == 0
    found = findings(capsys)
    folder = found["embedding model folder"]
    assert folder["value"] == str(tmp_path) and folder["status"] == "ok"
    assert folder["found"] == f"environment {MODEL_PATH_ENV} (the file says null)"
    assert found["OPENAI_API_KEY"]["value"] == "set"  # never the key itself


def test_a_missing_model_fails_the_doctor(
    healthy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MODEL_PATH_ENV, str(healthy))  # no model.onnx in it
    assert main(["doctor", "--json"]) == 1
    assert findings(capsys)["embedding model folder"]["status"] == "missing"


def test_the_file_s_model_path_wins_and_is_named(
    healthy: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tmp_path = embedding_folder(healthy / "mine")
    monkeypatch.setenv(MODEL_PATH_ENV, "/elsewhere")
    mine = tmp_path / "mine.yml"
    mine.write_text(f"embedding:\n  model_path: {tmp_path}\n", encoding="utf-8")
    assert main(["doctor", "--json", "--config", str(mine)]) == 0
    folder = findings(capsys)["embedding model folder"]
    assert folder["value"] == str(tmp_path) and folder["found"] == str(mine)


def test_config_says_what_the_environment_puts_in_effect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))
    assert main(["config", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["settings"]["embedding.model_path"]["value"] is None
    assert data["environment"] == {
        "embedding.model_path": [MODEL_PATH_ENV, str(tmp_path)]
    }
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["config"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"in effect: {MODEL_PATH_ENV}={tmp_path}" in out


def test_the_doctor_at_80_columns_never_breaks_a_path() -> None:
    shown = [
        Finding("embedding model folder", "/opt/models/all-MiniLM-L6-v2/onnx", "env"),
        Finding(
            "rerank model",
            "ms-marco-MiniLM-L-12-v2 in /home/someone/.cache/langchain-ragbudget/"
            "flashrank (lacks tokenizer.json: fetched on first use, online)",
            "the package cache (below)",
            "missing",
        ),
        Finding("tiktoken cache", "/var/cache/tiktoken", "TIKTOKEN_CACHE_DIR", "ok"),
    ]
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(_table(shown))
    assert [line.rstrip() for line in out.getvalue().splitlines()] == [
        "in effect (ragbudget doctor)",
        "-       embedding model folder",
        "        /opt/models/all-MiniLM-L6-v2/onnx",
        "        found in: env",
        "missing rerank model",
        "        ms-marco-MiniLM-L-12-v2 in",
        "        /home/someone/.cache/langchain-ragbudget/flashrank (lacks",
        "        tokenizer.json: fetched on first use, online)",
        "        found in: the package cache (below)",
        "ok      tiktoken cache",
        "        /var/cache/tiktoken",
        "        found in: TIKTOKEN_CACHE_DIR",
    ]
