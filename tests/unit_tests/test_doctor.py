"""`ragbudget doctor` and `config` say what is in effect and where it was found.

No model is loaded: the doctor looks for files, so a folder holding an empty
`model.onnx` counts as found, and one without it as missing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_ragbudget.cli._main import main
from langchain_ragbudget.retrieval._embeddings import MODEL_PATH_ENV


def findings(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    data = json.loads(capsys.readouterr().out)
    return {row["name"]: row for row in data["findings"]}


def test_the_model_folder_from_the_environment_is_named_as_such(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    assert main(["doctor", "--json"]) == 0
    found = findings(capsys)
    folder = found["embedding model folder"]
    assert folder["value"] == str(tmp_path) and folder["status"] == "ok"
    assert folder["found"] == f"environment {MODEL_PATH_ENV} (the file says null)"
    assert found["OPENAI_API_KEY"]["value"] == "set"  # never the key itself


def test_a_missing_model_fails_the_doctor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(MODEL_PATH_ENV, str(tmp_path))  # no model.onnx in it
    assert main(["doctor", "--json"]) == 1
    assert findings(capsys)["embedding model folder"]["status"] == "missing"


def test_the_file_s_model_path_wins_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
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
