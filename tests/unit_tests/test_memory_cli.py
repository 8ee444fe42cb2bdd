"""`ragbudget memory add|list|forget|inspect --store FILE`, run in-process.

Real embeddings (the all-MiniLM-L6-v2 ONNX folder) and a real SQLite file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_ragbudget.cli import main

pytestmark = pytest.mark.needs_embedding_model


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_add_list_forget_inspect(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "memory.sqlite")
    code, out, _ = run(
        capsys,
        "memory",
        "add",
        "Prefers the dark theme",
        "--subject",
        "editor.theme",
        "--importance",
        "0.8",
        "--store",
        store,
        "--json",
    )
    first = json.loads(out)
    assert code == 0 and first["action"] == "remembered"
    code, out, _ = run(
        capsys,
        "memory",
        "add",
        "prefers the  dark theme.",
        "--subject",
        "editor.theme",
        "--store",
        store,
        "--json",
    )
    again = json.loads(out)
    assert (again["action"], again["id"], again["times_said"]) == (
        "restated",
        first["id"],
        2,
    )
    run(capsys, "memory", "add", "Works from Lisbon", "--store", store)
    code, out, _ = run(
        capsys, "memory", "list", "--store", store, "--query", "which theme?", "--json"
    )
    rows = json.loads(out)["memories"]
    assert code == 0 and rows[0]["id"] == first["id"]
    for row in rows:  # every factor of the score, and the score is their product
        assert row["score"] == pytest.approx(
            row["similarity"] * row["importance"] * row["recency"]
        )
    code, out, _ = run(capsys, "memory", "inspect", "--store", store, "--json")
    report = json.loads(out)
    assert (code, report["schema_version"], report["memories"]) == (0, 1, 2)
    assert report["stale"] is None  # not checked without --index
    code, out, _ = run(capsys, "memory", "forget", first["id"], "--store", store)
    assert code == 0 and first["id"] in out
    code, _, err = run(capsys, "memory", "forget", first["id"], "--store", store)
    assert code == 2 and "no memory" in err and first["id"] in err


def test_a_missing_store_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.sqlite"
    code, _, err = run(capsys, "memory", "list", "--store", str(missing))
    assert code == 2 and f"no memory store at {missing}" in err
    assert not missing.exists()


def test_forget_takes_a_unique_prefix_and_names_an_ambiguous_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "memory.sqlite")
    ids = [
        json.loads(run(capsys, "memory", "add", text, "--store", store, "--json")[1])[
            "id"
        ]
        for text in ("Prefers tea", "Works from Lisbon", "Has a cat named Io")
    ]
    code, _, err = run(capsys, "memory", "forget", "mem-", "--store", store)
    assert code == 2
    assert f"'mem-' is the start of 3 memory ids in {store}: " in err
    assert all(memory_id in err for memory_id in ids)
    target = ids[0]
    unique = next(
        target[:n]
        for n in range(5, len(target))
        if sum(other.startswith(target[:n]) for other in ids) == 1
    )
    code, out, _ = run(capsys, "memory", "forget", unique, "--store", store)
    assert (code, out) == (0, f"forgot {target}\n")
    code, _, err = run(capsys, "memory", "forget", "mem-zz", "--store", store)
    assert code == 2 and "no memory 'mem-zz'" in err


def test_list_and_inspect_mark_the_superseded_and_a_restatement_says_its_importance(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = str(tmp_path / "memory.sqlite")
    add = ("memory", "add", "--store", store, "--json")
    run(capsys, *add[:2], "Prefers the light theme", "--subject", "theme", *add[2:])
    run(capsys, *add[:2], "Prefers the dark theme", "--subject", "theme", *add[2:])
    run(capsys, *add[:2], "Works from Lisbon", "--importance", "0.9", *add[2:])
    code, out, _ = run(
        capsys,
        "memory",
        "add",
        "Works from Lisbon",
        "--importance",
        "0.2",
        "--store",
        store,
    )
    assert code == 0 and out.startswith("restated mem-")
    assert out.endswith("(said 2 time(s)); importance 0.9 -> 0.2\n")
    rows = json.loads(run(capsys, "memory", "list", "--store", store, "--json")[1])
    by_text = {row["text"]: row for row in rows["memories"]}
    dark = by_text["Prefers the dark theme"]["id"]
    assert by_text["Prefers the light theme"]["superseded_by"] == dark
    assert by_text["Prefers the dark theme"]["superseded_by"] is None
    assert by_text["Works from Lisbon"]["superseded_by"] is None
    report = json.loads(run(capsys, "memory", "inspect", "--store", store, "--json")[1])
    assert report["superseded"] == 1


@pytest.mark.needs_tiktoken
def test_ask_with_a_memory_store_puts_its_memories_in_the_prompt(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  enabled: false\n", encoding="utf-8")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "office.md").write_text("The Lisbon office opens at 9am.")
    index = ["--index", str(tmp_path / "ix"), "--config", str(config)]
    assert main(["index", str(folder), *index]) == 0
    store = str(tmp_path / "memory.sqlite")
    run(
        capsys,
        "memory",
        "add",
        "The user works from the Lisbon office",
        "--store",
        store,
    )
    code, out, _ = run(
        capsys, "ask", "When does my office open?", *index, "--memory", store, "--json"
    )
    data = json.loads(out)
    assert code == 0
    assert "The user works from the Lisbon office" in json.dumps(data["prompt"])
    code, _, err = run(
        capsys, "ask", "When?", *index, "--memory", str(tmp_path / "none.sqlite")
    )
    assert code == 2 and "no memory store at" in err
    assert not (tmp_path / "none.sqlite").exists()
