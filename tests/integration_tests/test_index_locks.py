"""One writer at a time; readers answer from the committed version; a stopped
first index resumes by itself.

Real processes (`ragbudget index` run twice at once, a reader querying while a
writer publishes, a first index stopped by SIGINT or SIGKILL at three points:
while embedding, while saving BM25, and before CURRENT names the new version)
over real parts (bm25s, embedded Chroma, fastembed ONNX).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from at_a_terminal import as_at_a_terminal

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
            if queries == 1:
                print("QUERYING", flush=True)
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
    assert reader.stdout is not None
    first = reader.stdout.readline()  # the reader has answered once: publish now
    assert first.strip() == "QUERYING", first + reader.communicate()[1]
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


# Runs `ragbudget index` unchanged, except that it pauses (and says so) at one
# point of a first index, so the test can stop it exactly there.
PAUSING_INDEX = """
import sys, time
from langchain_ragbudget.retrieval import _dense as dense
from langchain_ragbudget.index import _hybrid_index, _versions
from langchain_ragbudget.retrieval._sparse import BM25Retriever

where = sys.argv.pop(1)

def pause():
    print("PAUSED", flush=True)
    time.sleep(120)

if where == "embedding":  # some vectors written, most not
    original_add = dense.add_documents
    def add_documents(store, documents, batch_size=None, on_batch=None):
        def after_batch(size):
            if on_batch is not None:
                on_batch(size)
            pause()
        original_add(store, documents, 16, after_batch)
    _hybrid_index.add_documents = add_documents
elif where == "saving":  # every vector written; BM25 half saved in its staging folder
    original_save = BM25Retriever.save
    def save(self, directory):
        original_save(self, directory)
        pause()
    BM25Retriever.save = save
else:  # "publishing": the version folder is published, CURRENT not yet written
    original_write = _versions.atomic_write_text
    def atomic_write_text(path, text):
        if path.name == _versions.CURRENT:
            pause()
        original_write(path, text)
    _versions.atomic_write_text = atomic_write_text

from langchain_ragbudget.cli import run
run()
"""


@pytest.mark.parametrize("where", ["embedding", "saving", "publishing"])
@pytest.mark.parametrize(
    "how", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"]
)
def test_a_stopped_first_index_resumes_with_plain_index(
    tmp_path: Path, how: signal.Signals, where: str
) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    write_docs(root, "p", 60)
    script = tmp_path / "pausing_index.py"
    script.write_text(PAUSING_INDEX, encoding="utf-8")
    run = subprocess.Popen(
        [sys.executable, str(script), where, "index", str(root), "--index", str(index)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_at_a_terminal,
    )
    assert run.stdout is not None
    said: list[str] = []
    while (line := run.stdout.readline()) not in ("PAUSED\n", ""):
        said.append(line)
    assert line, f"the run ended before the pause: {said} {run.communicate()}"
    run.send_signal(how)
    _, err = run.communicate(timeout=60)
    assert not (index / "CURRENT").exists()  # nothing was committed: a first index
    if how == signal.SIGINT:
        assert run.returncode == 130
        assert "no version of the index" in err and "was committed yet" in err, err
        assert "run the same command again to resume" in err
    else:
        assert run.returncode == -signal.SIGKILL
    again = subprocess.run(
        ragbudget("index", str(root), "--index", str(index)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "repair" not in again.stdout + again.stderr
    found = inspect(index)
    assert found["documents"] == 60
    assert found["chunks"] == {"bm25": 60, "vector_store": 60}  # each once
    assert found["sync"]["in_sync"] is True
    committed = index / (index / "CURRENT").read_text()
    records = json.loads((committed / "records.json").read_text())["documents"]
    assert sorted(records) == sorted(path.name for path in root.iterdir())
