"""One smoke test of the memory store on a real PostgreSQL server.

The whole memory suite runs on the server in
tests/integration_tests/test_memory_postgres.py (starting a cluster costs seconds);
this one keeps `make test` honest about the server path: a throwaway cluster from
the Debian binaries (tests/postgres_cluster.py), skipped with the reason when
they or psycopg are absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from postgres_cluster import new_schema

from langchain_ragbudget.errors import InvalidInputError, MemoryStoreError
from langchain_ragbudget.memory._postgres import dialect, shown
from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore
from langchain_ragbudget.memory._store import SAME_TEXT


def test_a_server_store_remembers_restates_and_recalls(postgres_host: str) -> None:
    location = new_schema(postgres_host)
    writer, reader = MemoryStore(location), MemoryStore(location)
    first = writer.remember("prefers tea", subject="drink", embedding=[1.0, 0.0])
    again = writer.remember("Prefers  tea.", subject="drink", embedding=[1.0, 0.0])
    other = writer.remember("uses vim", embedding=[0.6, 0.8])
    assert again.id == first.id and again.times_said == 2 and len(reader) == 2
    assert reader.get(first.id) == again  # the other connection sees the restatement
    recall = MemoryRetriever(store=reader).recall(vector=[1.0, 0.0])
    assert [item.memory.id for item in recall.kept] == [first.id, other.id]
    with pytest.raises(InvalidInputError, match=r"2-dimensional.*3 dimensions"):
        writer.remember("x", embedding=[1.0, 0.0, 0.0])
    assert writer.forget(other.id) and not reader.forget(other.id)
    assert [
        item.memory.id
        for item in MemoryRetriever(store=reader).recall(vector=[1.0, 0.0]).kept
    ] == [first.id]
    assert reader.schema_version() == 1 and "postgresql (" in repr(reader)
    writer.close()
    reader.close()


def test_the_store_s_statements_in_postgresql_s_dialect() -> None:
    """Placeholders, null-safe equality, a literal % (psycopg reads it as one)."""
    assert dialect(SAME_TEXT) == (
        "SELECT id FROM memories WHERE norm = %s AND subject IS NOT DISTINCT FROM "
        "%s ORDER BY said_at DESC LIMIT 1",
    )
    assert dialect("SELECT 1 WHERE 'a%' LIKE ?") == ("SELECT 1 WHERE 'a%%' LIKE %s",)
    assert dialect("PRAGMA user_version")[0].startswith("SELECT value FROM meta")


def test_a_server_is_shown_without_its_password() -> None:
    shown_url = shown("postgresql://agent:hunter2@db.internal:6432/memories")
    assert "hunter2" not in shown_url
    assert all(
        part in shown_url
        for part in ("user=agent", "host=db.internal", "port=6432", "dbname=memories")
    )
    with pytest.raises(MemoryStoreError, match="does not parse") as caught:
        MemoryStore("postgresql://agent:hunter2@db/x?nonsense=1")
    assert "hunter2" not in str(caught.value)


def test_memory_store_in_the_configuration_names_the_store(tmp_path: Path) -> None:
    """`memory.store` opens a SQLite file as it opens a server; none is refused."""
    config_file = tmp_path / "ragbudget.yml"
    config_file.write_text(f"memory:\n  store: '{tmp_path / 'memory.sqlite'}'\n")
    with MemoryStore.from_config(config_file) as store:
        store.remember("likes tea", embedding=[1.0, 0.0])
        assert store.path == tmp_path / "memory.sqlite" and len(store) == 1
    with pytest.raises(InvalidInputError, match=r"memory\.store.*path="):
        MemoryStore.from_config(None)
