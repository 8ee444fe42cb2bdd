"""The memory store on a PostgreSQL server, for services run as several replicas.

`MemoryStore` opens a `postgresql://` URL through `ServerConnection`, which speaks
the store's own statements to psycopg: remembering, restating, supersession and
the ranking cache are one code path on both stores, so they cannot drift apart.
Writers serialize on the store's generation row (`SELECT ... FOR UPDATE`), as
SQLite's `BEGIN IMMEDIATE` does; a ranking read is one REPEATABLE READ snapshot.

Plain psycopg rather than LangGraph's `PostgresStore`: its `put` replaces an item
with no transaction around the read a restatement needs, it has no change counter
to refresh cached vectors from, and its vector search needs the pgvector
extension, which Debian's PostgreSQL packages do not ship.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from langchain_ragbudget.errors import MemoryStoreError, require

if TYPE_CHECKING:
    import psycopg

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10  # an unreachable server fails within this
LOCK_TIMEOUT_MS = 30_000  # a writer waits this long for another's write
_SCHEMES = ("postgresql://", "postgres://")
_SCHEMA = """
CREATE TABLE memories (
    rowid BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    text TEXT NOT NULL,
    norm TEXT NOT NULL,
    subject TEXT,
    importance DOUBLE PRECISION NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    said_at DOUBLE PRECISION NOT NULL,
    times_said INTEGER NOT NULL,
    last_recalled_at DOUBLE PRECISION,
    source_id TEXT,
    source_hash TEXT,
    embedding BYTEA NOT NULL,
    changed BIGINT NOT NULL
);
CREATE INDEX memories_changed ON memories (changed);
CREATE INDEX memories_norm ON memories (norm, subject);
CREATE INDEX memories_subject ON memories (subject);
CREATE TABLE meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL);
INSERT INTO meta VALUES ('generation', 0)
"""
# The store's statements that PostgreSQL spells otherwise; every other one differs
# only in its placeholders.
_STATEMENTS = {
    "BEGIN IMMEDIATE": (
        "BEGIN",
        "SELECT value FROM meta WHERE key = 'generation' FOR UPDATE",
    ),
    "BEGIN": ("BEGIN ISOLATION LEVEL REPEATABLE READ",),
    "PRAGMA user_version": ("SELECT value FROM meta WHERE key = 'schema_version'",),
}
# Recall's statistics: a transaction of its own, sent in one round trip, whose
# commit need not wait for the disk (a crash may lose the last few
# `last_recalled_at`, which ranking never reads).
_STATISTICS = "UPDATE memories SET last_recalled_at = ? "
_NULL_SAFE = re.compile(r"\bIS \?")


class Cursor(Protocol):
    """What the store reads of a cursor: `sqlite3.Cursor` and psycopg's have it."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Connection(Protocol):
    """What the store asks of a connection: `sqlite3.Connection` has it."""

    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...

    def close(self) -> None: ...


def is_server_url(location: object) -> bool:
    """Whether a store location names a PostgreSQL server rather than a file."""
    return isinstance(location, str) and location.startswith(_SCHEMES)


def shown(url: str) -> str:
    """`url` as messages show it: its connection parameters, never the password.

    Raises:
        MissingExtraError: psycopg is not installed.
        MemoryStoreError: `url` does not parse (the URL itself is not shown).
    """
    require("psycopg", "postgres", "a memory store on PostgreSQL")
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parameters = conninfo_to_dict(url)
    except psycopg.Error:
        raise MemoryStoreError(
            "memory store: the postgresql:// URL does not parse; write it as "
            "postgresql://user@host:port/database"
        ) from None  # psycopg's message may quote the URL, password and all
    parameters.pop("password", None)
    return f"postgresql ({make_conninfo('', **parameters)})"


@lru_cache(maxsize=4096)
def dialect(sql: str) -> tuple[str, ...]:
    """`sql` (SQLite, as the store writes it) as PostgreSQL statements.

    psycopg's placeholder is `%s`, so a literal `%` doubles; `IS ?` (SQLite's
    null-safe equality) is `IS NOT DISTINCT FROM`. The store writes no `?`
    inside a string literal.
    """
    if sql in _STATEMENTS:
        return _STATEMENTS[sql]
    postgres = _NULL_SAFE.sub("IS NOT DISTINCT FROM ?", sql.replace("%", "%%"))
    return (postgres.replace("?", "%s"),)


class ServerConnection:
    """One psycopg connection that takes the store's SQLite statements.

    Autocommit, so the store's own `BEGIN` and `COMMIT` delimit transactions as
    on SQLite. Results are read in binary, so embeddings travel as raw bytes. A
    connection the server dropped fails its call with MemoryStoreError and is
    opened again by the next one, so a replica outlives a server restart.

    Raises:
        MissingExtraError: psycopg is not installed.
        MemoryStoreError: The server cannot be reached, or its database holds
            tables that are not a memory store of this schema version.
    """

    def __init__(self, url: str, schema_version: int) -> None:

        self.name = shown(url)
        self._url = url
        self._pending: list[str] = []
        self._connection = self._connected()
        self._ensure_schema(schema_version)

    def _connected(self) -> psycopg.Connection[Any]:
        import psycopg

        try:
            connection = psycopg.connect(
                self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
            )
            connection.execute(f"SET lock_timeout = {LOCK_TIMEOUT_MS}")
        except psycopg.Error as exc:
            raise MemoryStoreError(
                f"memory store {self.name}: cannot connect ({_first_line(exc)}); "
                "check that the server is running and that memory.store names "
                "it (host, port, database, user; the password from PGPASSWORD "
                "or ~/.pgpass)"
            ) from exc
        return connection

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        """Run `sql`; a `BEGIN` waits to go with the transaction's first statement.

        Every round trip counts on a busy server, and a `BEGIN` alone does
        nothing, so it is sent in one pipeline with what follows it (a commit
        of a transaction that sent nothing sends nothing).
        """
        if self._connection.broken:
            self._connection = self._connected()
        *before, last = dialect(sql)
        if sql in ("BEGIN", "BEGIN IMMEDIATE"):
            self._pending = [*before, last]
            return self._connection.cursor()
        if sql in ("COMMIT", "ROLLBACK") and self._pending:
            self._pending = []
            return self._connection.cursor()
        after: list[str] = []
        if sql.startswith(_STATISTICS):
            before += ["BEGIN", "SET LOCAL synchronous_commit = off"]
            after = ["COMMIT"]
        return self._sent(
            before,
            lambda: self._connection.execute(last, tuple(parameters), binary=True),
            after,
        )

    def _sent(
        self, before: list[str], send: Callable[[], T], after: Sequence[str] = ()
    ) -> T:
        """`send()` after the pending and `before` statements, `after` after it.

        One round trip; a transaction `after` closes is undone on failure.
        """
        import psycopg

        before, self._pending = [*self._pending, *before], []
        try:
            if not before and not after:
                return send()
            with self._connection.pipeline():
                for statement in before:
                    self._connection.execute(statement)
                sent = send()
                for statement in after:
                    self._connection.execute(statement)
                return sent
        except psycopg.Error as exc:
            if after:
                self._undone()
            raise self._failed(exc) from exc

    def _undone(self) -> None:
        """Roll back a transaction a failed pipeline left open, if it can."""
        import psycopg
        from psycopg.pq import TransactionStatus

        if self._connection.broken:
            return
        if self._connection.info.transaction_status != TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                self._connection.execute("ROLLBACK")

    def close(self) -> None:
        self._connection.close()

    def _failed(self, exc: psycopg.Error) -> MemoryStoreError:
        import psycopg.errors

        if isinstance(exc, psycopg.errors.LockNotAvailable):
            return MemoryStoreError(
                f"memory store {self.name}: another writer held the store for "
                f"{LOCK_TIMEOUT_MS // 1000} s; nothing was written, try again"
            )
        return MemoryStoreError(
            f"memory store {self.name}: the server failed ({_first_line(exc)}); "
            "nothing of this call was written; check the server and try again"
        )

    def _ensure_schema(self, version: int) -> None:
        """Create the tables in an empty database; refuse other tables.

        An advisory lock makes two processes opening a new database at once
        create the schema once.
        """
        self.execute("BEGIN")
        try:
            self.execute("SELECT pg_advisory_xact_lock(hashtext('ragbudget.memory'))")
            tables = {
                row[0]
                for row in self.execute(
                    "SELECT table_name FROM information_schema.tables "
                    "WHERE table_schema = current_schema()"
                ).fetchall()
            }
            if not tables & {"memories", "meta"}:
                for statement in _SCHEMA.split(";"):
                    self.execute(statement)
                self.execute(
                    "INSERT INTO meta VALUES ('schema_version', ?)", (version,)
                )
            else:
                self._check_schema(tables, version)
            self.execute("COMMIT")
        except BaseException:
            self.execute("ROLLBACK")
            raise

    def _check_schema(self, tables: set[str], version: int) -> None:
        found = None
        if {"memories", "meta"} <= tables:
            try:
                rows = self.execute(
                    "SELECT value FROM meta WHERE key = 'schema_version'"
                ).fetchall()
            except MemoryStoreError:  # a `meta` table of another shape
                rows = []
            found = int(rows[0][0]) if rows else None
        if found != version:
            raise MemoryStoreError(
                f"memory store {self.name}: schema version {found} with tables "
                f"{sorted(tables)} is not a memory store this version reads "
                f"(schema version {version}); point memory.store at another "
                "database, or set search_path to a schema of its own (in the "
                "URL: ?options=-csearch_path%3Dmemories)"
            )


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
