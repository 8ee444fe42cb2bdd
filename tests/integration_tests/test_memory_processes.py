"""Two real processes write and recall one memory store at the same time.

Each process remembers its own memories (every write one transaction) and recalls
after each write, both started together on one store: a SQLite file, and a
PostgreSQL server (tests/postgres_cluster.py); another process's restatements of
a shared statement land too. Afterwards every write of both is there (none lost),
the shared memory counts every restatement, and neither process saw an error
(`database is locked` would be one). Vectors are given, so no model is needed:
the point is the store.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain_ragbudget.memory._retriever import MemoryStore

WRITES = 150
WORKER = """
import json, sys, time
from pathlib import Path
import numpy as np
from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore

path, name, writes, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4])
while not go.exists():
    time.sleep(0.005)
rng = np.random.default_rng(abs(hash(name)) % 2**32)
store = MemoryStore(path)
retriever = MemoryRetriever(store=store, k=5, supersede=False)
ids, recalled = [], 0
for i in range(writes):
    vector = rng.normal(size=16).tolist()
    ids.append(store.remember(f"{name} fact {i}", embedding=vector).id)
    store.remember("both say this", subject="shared", embedding=[1.0] + [0.0] * 15)
    recalled += len(retriever.recall(vector=vector).kept)
print(json.dumps({"ids": ids, "recalled": recalled}))
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_processes_lose_no_write(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    if kind == "postgresql":
        from postgres_cluster import new_schema

        path: str | Path = new_schema(request.getfixturevalue("postgres_host"))
    else:
        path = tmp_path / "memory.sqlite"
    go = tmp_path / "go"
    MemoryStore(path).close()  # the schema exists before either starts
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path), name, str(WRITES), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("alpha", "beta")
    ]
    time.sleep(0.5)
    go.touch()
    results = []
    for worker in workers:
        out, err = worker.communicate(timeout=240)
        assert worker.returncode == 0, err
        assert "Traceback" not in err and "locked" not in err, err
        results.append(json.loads(out))
    with MemoryStore(path) as store:
        stored = {memory.id: memory for memory in store.list()}
        for result in results:
            assert len(set(result["ids"])) == WRITES
            assert set(result["ids"]) <= set(stored)  # no lost write
            assert result["recalled"] >= WRITES  # each recall found memories
        (shared,) = store.list(subject="shared")
        assert shared.times_said == 2 * WRITES  # every restatement counted
        assert len(stored) == 2 * WRITES + 1
