"""The memory test suite on a real PostgreSQL server, and what only a server has.

Every test of tests/unit_tests/test_memory.py and test_memory_chain.py that opens
its stores through `new_memory_store` is collected here again, with that fixture
giving a new schema on a throwaway cluster (tests/postgres_cluster.py: Debian's
server binaries, a unix socket, no TCP). The tests that only a SQLite file has
(a file that is not SQLite, SQLite's query plans) stay there; their server
counterparts are below: a database of other tables or another schema version,
an unreachable server, a connection lost mid-run, the URL from the YAML file.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import psycopg
import pytest
from postgres_cluster import new_schema, url

from langchain_ragbudget.memory._retriever import (
    MemoryRetriever,
    MemoryStore,
    MemoryStoreError,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "unit_tests"))
import test_memory
import test_memory_chain
from test_memory_chain import embeddings, store  # noqa: F401  (fixtures)


@pytest.fixture(scope="module")
def new_memory_store(postgres_host: str) -> Callable[[], str]:
    """Each call: a `postgresql://` URL of a new, empty schema."""
    return lambda: new_schema(postgres_host)


def _on_a_store(test: Callable[..., object]) -> bool:
    parameters = inspect.signature(test).parameters
    return "new_memory_store" in parameters or "store" in parameters


for _module in (test_memory, test_memory_chain):
    for _name, _test in vars(_module).items():
        if _name.startswith("test_") and callable(_test) and _on_a_store(_test):
            for _mark in getattr(_module, "pytestmark", []):
                _test = _mark(_test)
            globals()[_name] = _test


def test_a_database_of_other_tables_is_refused_by_name(postgres_host: str) -> None:
    location = new_schema(postgres_host)
    schema = location.rsplit("%3D", 1)[1]
    with psycopg.connect(url(postgres_host), autocommit=True) as connection:
        connection.execute(f"CREATE TABLE {schema}.meta (x int)")
    with pytest.raises(MemoryStoreError, match=rf"{schema}.*not a memory store"):
        MemoryStore(location)


def test_another_schema_version_is_refused(postgres_host: str) -> None:
    location = new_schema(postgres_host)
    MemoryStore(location).close()
    schema = location.rsplit("%3D", 1)[1]
    with psycopg.connect(url(postgres_host), autocommit=True) as connection:
        connection.execute(
            f"UPDATE {schema}.meta SET value = 7 WHERE key = 'schema_version'"
        )
    with pytest.raises(MemoryStoreError, match=r"schema version 7.*reads"):
        MemoryStore(location)


def test_an_unreachable_server_is_named_without_its_password(tmp_path: Path) -> None:
    dsn = f"postgresql://agent:hunter2@/memories?host={tmp_path}&connect_timeout=2"
    with pytest.raises(MemoryStoreError) as caught:
        MemoryStore(dsn)
    message = str(caught.value)
    assert "user=agent" in message and "dbname=memories" in message
    assert str(tmp_path) in message and "server is running" in message
    assert "hunter2" not in message and "hunter2" not in repr(caught.value.__cause__)


def test_a_lost_connection_fails_one_call_and_the_next_reconnects(
    postgres_host: str,
) -> None:
    served = MemoryStore(new_schema(postgres_host))
    served.remember("a fact", embedding=[1.0, 0.0])
    (pid,) = served._connection.execute("SELECT pg_backend_pid()").fetchone()
    with psycopg.connect(url(postgres_host), autocommit=True) as connection:
        connection.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(MemoryStoreError, match=r"server failed.*try again"):
        served.remember("another fact", embedding=[0.0, 1.0])
    again = served.remember("another fact", embedding=[0.0, 1.0])  # reconnected
    assert sorted(m.text for m in served.list()) == ["a fact", "another fact"]
    assert again.times_said == 1  # the failed call wrote nothing


def test_recall_statistics_that_fail_leave_no_transaction_open(
    postgres_host: str,
) -> None:
    """`last_recalled_at` is a transaction of its own in one round trip: when the
    server refuses it (here a row lock held past the lock timeout), it is rolled
    back, and the connection serves the next call."""
    location = new_schema(postgres_host)
    served = MemoryStore(location)
    memory = served.remember("a fact", embedding=[1.0, 0.0])
    served._connection.execute("SET lock_timeout = 100")
    with psycopg.connect(location) as holder:
        holder.execute("SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (memory.id,))
        with pytest.raises(MemoryStoreError):
            MemoryRetriever(store=served).recall(vector=[1.0, 0.0])
    assert served.remember("another fact", embedding=[0.0, 1.0]).times_said == 1
    assert len(MemoryRetriever(store=served).recall(vector=[1.0, 0.0]).kept) == 2


def test_memory_store_in_the_yaml_opens_the_server(
    postgres_host: str, tmp_path: Path
) -> None:
    location = new_schema(postgres_host)
    config_file = tmp_path / "ragbudget.yml"
    config_file.write_text(f"memory:\n  store: '{location}'\n  importance: 0.25\n")
    with MemoryStore.from_config(config_file) as opened:
        memory = opened.remember("likes tea", embedding=[1.0, 0.0])
        assert memory.importance == 0.25
        recall = MemoryRetriever(store=opened).recall(vector=[1.0, 0.0])
        assert [item.memory.id for item in recall.kept] == [memory.id]
    with MemoryStore(location) as again:  # another connection reads it back
        (stored,) = again.list()
        assert replace(stored, last_recalled_at=None) == memory
        assert stored.last_recalled_at is not None
