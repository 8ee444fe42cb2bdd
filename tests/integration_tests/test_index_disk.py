"""A real full disk, and a real Ctrl-C, during `ragbudget index`.

The index lives on a tmpfs mounted for the test (skipped, with the reason, where
mounting is not permitted). A small folder is indexed and committed; then a large
one runs the disk full while its vectors are written; the index is then read
in this process. Real processes and parts
(bm25s, embedded Chroma, fastembed ONNX).
"""

import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from at_a_terminal import as_at_a_terminal

from langchain_ragbudget import load_config
from langchain_ragbudget.index import HybridIndex

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

TMPFS_SIZE = "640k"  # the first index takes about 400 KB; the large one cannot fit
CLI = [sys.executable, "-c", "from langchain_ragbudget.cli import run; run()"]
WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima"


def ragbudget(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=cwd,
    )


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of TMPFS_SIZE mounted at a fresh folder, unmounted afterwards."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def write_folder(folder: Path, count: int, words: int) -> None:
    pick = random.Random(count)
    folder.mkdir(parents=True)
    for number in range(count):
        text = " ".join(
            f"{pick.choice(WORDS.split())}{pick.randint(0, 9999)}" for _ in range(words)
        )
        (folder / f"n{number:03d}.md").write_text(f"note {number} {text}", "utf-8")


def test_a_full_disk_is_one_error_and_the_committed_version_still_opens(
    tmp_path: Path, small_disk: Path
) -> None:
    root, index = tmp_path / "docs", small_disk / "ix"
    write_folder(root / "small", 3, 40)
    first = ragbudget("index", str(root), "--index", str(index), cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    write_folder(root / "large", 30, 300)
    full = ragbudget("index", str(root / "large"), "--index", str(index), cwd=root)
    err = full.stderr.strip().splitlines()
    assert full.returncode == 2, full.stdout + full.stderr
    assert len(err) == 1 and err[0].startswith("error: "), full.stderr
    assert "disk is full" in err[0] and "3 document(s)" in err[0], err[0]
    assert "unexpected" not in err[0]
    assert not list(index.glob(".sparse-*.tmp"))  # the half version gave its space back
    found = HybridIndex.inspect(index, load_config())
    assert found.documents == 3 and found.problems == [], found.to_dict()
    with HybridIndex.open(index, load_config(), create=False) as reopened:
        assert sorted(reopened.document_ids) == [f"small/n{n:03d}.md" for n in range(3)]
        hits = reopened.as_retriever(k=3).invoke("note")
        assert {d.metadata["doc_id"] for d in hits} == set(reopened.document_ids)


def test_ctrl_c_during_index_names_the_committed_version(tmp_path: Path) -> None:
    root, index = tmp_path / "docs", tmp_path / "ix"
    write_folder(root / "small", 3, 40)
    first = ragbudget("index", str(root), "--index", str(index), cwd=root)
    assert first.returncode == 0, first.stdout + first.stderr
    write_folder(root / "large", 120, 300)
    database = index / "chroma" / "chroma.sqlite3"
    before = database.stat().st_size
    run = subprocess.Popen(
        [*CLI, "index", str(root / "large"), "--index", str(index)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_at_a_terminal,  # a background job inherits SIGINT ignored
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if database.stat().st_size > before + 200_000:  # vectors being written
            break
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert run.returncode == 130, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0] == (
        f"error: interrupted: the index at {index} holds its last committed version "
        "(3 document(s)); run the same command again to resume (vectors already "
        "written are reused)"
    )
    found = HybridIndex.inspect(index, load_config())
    assert found.documents == 3
