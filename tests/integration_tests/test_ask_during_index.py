"""`ragbudget ask` while `ragbudget index` writes: answers from the committed version
(or, during a first index, says that one is being built).

A real writer process embeds a large folder over a committed small one; `ask`
runs in another process meanwhile (no chat model: the prompt is the answer's
input) and must exit 0 with evidence only from the committed documents, though the
vector store already holds the writer's uncommitted chunks, which match the
question as well. Real bm25s, embedded Chroma, fastembed ONNX.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

CLI = [sys.executable, "-c", "from langchain_ragbudget.cli import run; run()"]
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"


def write_folder(folder: Path, count: int, words: int) -> None:
    pick = random.Random(count)
    folder.mkdir(parents=True)
    for number in range(count):
        text = " ".join(pick.choice(WORDS.split()) for _ in range(words))
        (folder / f"n{number:03d}.md").write_text(f"note {number} {text}", "utf-8")


def test_ask_during_an_index_run_answers_from_the_committed_version(
    tmp_path: Path,
) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n", encoding="utf-8")
    settings = ["--index", str(index), "--config", str(config)]
    env = {**os.environ, "RAGBUDGET_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("OPENAI_API_KEY", None)
    write_folder(root / "small", 3, 60)
    first = subprocess.run(
        [*CLI, "index", str(root), *settings],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    write_folder(root / "large", 200, 300)
    database = index / "chroma" / "chroma.sqlite3"
    before = database.stat().st_size
    writer = subprocess.Popen(
        [*CLI, "index", str(root / "large"), *settings],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and writer.poll() is None:
            if database.stat().st_size > before + 200_000:  # vectors being written
                break
            time.sleep(0.05)
        asked = subprocess.run(
            [*CLI, "ask", "alpha bravo charlie note", "--json", *settings],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=180,
        )
        still_writing = writer.poll() is None
    finally:
        writer.send_signal(signal.SIGINT)
        writer.wait(timeout=60)
    assert still_writing, "the index run ended before `ask` did: nothing was shown"
    assert asked.returncode == 0, asked.stderr
    evidence = json.loads(asked.stdout)["evidence"]
    sources = {row["key"].split("::")[0] for row in evidence}
    assert sources == {f"small/n{n:03d}.md" for n in range(3)}, sources


def test_ask_during_a_first_index_says_one_is_being_built(tmp_path: Path) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n", encoding="utf-8")
    settings = ["--index", str(index), "--config", str(config)]
    env = {**os.environ, "RAGBUDGET_CACHE_DIR": str(tmp_path / "cache")}
    write_folder(root, 200, 300)
    writer = subprocess.Popen(
        [*CLI, "index", str(root), *settings],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        database = index / "chroma" / "chroma.sqlite3"
        while time.monotonic() < deadline and writer.poll() is None:
            if database.exists() and database.stat().st_size > 200_000:
                break
            time.sleep(0.05)
        asked = subprocess.run(
            [*CLI, "ask", "alpha bravo", *settings],
            capture_output=True,
            text=True,
            check=False,
            env=env,
            timeout=180,
        )
        still_writing = writer.poll() is None
    finally:
        writer.kill()
        writer.wait(timeout=60)
    assert still_writing, "the index run ended before `ask` did: nothing was shown"
    assert asked.returncode == 2, asked.stdout + asked.stderr
    said = " ".join(asked.stderr.split())
    assert said.startswith("error: ") and said.count("error:") == 1
    assert "a first index is being built by pid" in said, said
    assert "no version is committed yet" in said and "Try again" in said
