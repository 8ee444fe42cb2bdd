"""One writer at a time; readers answer from the committed version; a stopped
first index resumes by itself.

Real processes (`ragbudget index` run twice at once, a reader querying while a
writer publishes, a first index killed with SIGKILL or SIGINT) over real parts
(bm25s, embedded Chroma, fastembed ONNX).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain_ragbudget.index._lock import LOCK_FILE, WriterLock

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"


def write_docs(folder: Path, prefix: str, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        text = f"{prefix} note {number}: " + " ".join(
            WORDS.split()[(number + i) % 12] for i in range(40)
        )
        (folder / f"{prefix}-{number:03d}.md").write_text(text, encoding="utf-8")


def ragbudget(*args: str) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from langchain_ragbudget.cli import run; run()",
        *args,
    ]


def inspect(index: Path) -> dict:
    done = subprocess.run(
        ragbudget("inspect", "--index", str(index), "--json"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


def test_two_index_runs_at_once_keep_every_document(tmp_path: Path) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    write_docs(root, "seed", 1)
    first = subprocess.run(
        ragbudget("index", str(root / "seed-000.md"), "--index", str(index)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    write_docs(root / "a", "a", 30)
    write_docs(root / "b", "b", 30)
    runs = [
        subprocess.Popen(
            ragbudget("index", str(root / side), "--index", str(index)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for side in ("a", "b")
    ]
    for run in runs:
        out, err = run.communicate(timeout=300)
        assert run.returncode == 0, out + err
        assert "30" in out
    found = inspect(index)
    assert found["documents"] == 61
    assert found["chunks"]["bm25"] == found["chunks"]["vector_store"] >= 61
    assert found["sync"]["in_sync"] is True


def test_a_second_writer_gives_up_naming_the_holder(tmp_path: Path) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    write_docs(root, "n", 2)
    with WriterLock(index).acquire(1):
        started = time.monotonic()
        done = subprocess.run(
            ragbudget("index", str(root), "--index", str(index), "--lock-timeout", "1"),
            capture_output=True,
            text=True,
            check=False,
        )
        waited = time.monotonic() - started
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"pid {os.getpid()}" in done.stderr
    assert "being written" in done.stderr
    assert waited >= 1
    holder = json.loads((index / LOCK_FILE).read_text(encoding="utf-8"))
    assert holder["pid"] == os.getpid()


READER = """
import json, sys, time
from pathlib import Path
from langchain_ragbudget.index import HybridIndex
path, stop = Path(sys.argv[1]), Path(sys.argv[2])
failures, queries, kept = [], 0, HybridIndex.open(path, create=False)
while not stop.exists():
    for fresh in (True, False):
        try:
            index = HybridIndex.open(path, create=False) if fresh else kept
            docs = index.as_retriever(k=3).invoke("alpha bravo note")
            assert docs, "no answer"
            if fresh:
                index.close()
            queries += 1
        except BaseException as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"queries": queries, "failures": failures}))
"""


def test_a_reader_never_fails_while_a_writer_publishes(tmp_path: Path) -> None:
    from langchain_core.documents import Document

    from langchain_ragbudget.index import HybridIndex

    index_dir, stop = tmp_path / "ix", tmp_path / "stop"
    with HybridIndex.open(index_dir) as index:
        index.upsert([Document(id="seed", page_content="alpha bravo seed note")])
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(index_dir), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(3)  # the reader is querying
    publishes = 0
    with HybridIndex.open(index_dir) as index:
        for number in range(20):
            text = f"alpha bravo note {number} " + WORDS
            index.upsert([Document(id=f"d{number}", page_content=text)])
            publishes += 1
    stop.touch()
    out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, err
    result = json.loads(out.strip().splitlines()[-1])
    assert publishes == 20
    assert result["queries"] > 0
    assert result["failures"] == []


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGINT])
def test_a_stopped_first_index_resumes_with_plain_index(
    tmp_path: Path, how: signal.Signals
) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    write_docs(root, "p", 120)
    run = subprocess.Popen(
        ragbudget("index", str(root), "--index", str(index)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    database = index / "chroma" / "chroma.sqlite3"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if database.exists() and database.stat().st_size > 300_000:
            break
        time.sleep(0.05)
    run.send_signal(how)
    out, _ = run.communicate(timeout=60)
    assert run.returncode != 0, "the run ended before it was stopped: " + out
    assert not (index / "CURRENT").exists() or how == signal.SIGINT
    again = subprocess.run(
        ragbudget("index", str(root), "--index", str(index)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "repair" not in again.stdout + again.stderr
    found = inspect(index)
    assert found["documents"] == 120
    assert found["sync"]["in_sync"] is True
