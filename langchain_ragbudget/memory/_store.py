"""The memory store: one SQLite file (standard library), safe for several processes.

WAL mode, so readers never wait for a writer; `busy_timeout`, so a second writer
waits its turn instead of failing; every write is one `BEGIN IMMEDIATE`
transaction, so a restatement's read-then-update cannot interleave with another
process's. The schema version is the file's `PRAGMA user_version`.

Ranking reads only `said_at` and `importance` (`last_recalled_at` is statistics).
Every write that changes them moves the store's `generation` and stamps its rows
(`changed`) in the same transaction, so `RankingCache` reads only what changed.
"""

from __future__ import annotations

import builtins
import math
import os
import re
import sqlite3
import threading
import unicodedata
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragbudget.config._memory_settings import MemorySettings
from langchain_ragbudget.config._settings import ConfigLike, as_config, default_of
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.errors import MemoryStoreError as MemoryStoreError
from langchain_ragbudget.memory._postgres import (
    Connection,
    ServerConnection,
    is_server_url,
    shown,
)
from langchain_ragbudget.memory._ranking import Ranking, RankingCache, unit_rows

SCHEMA_VERSION = 1
NORMAL_FORM = 2  # the version of `normalised` the `norm` column holds
BUSY_TIMEOUT_MS = 30_000  # a writer waits this long for another process's write
_SCHEMA = """
CREATE TABLE memories (
    id TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    norm TEXT NOT NULL,
    subject TEXT,
    importance REAL NOT NULL,
    created_at REAL NOT NULL,
    said_at REAL NOT NULL,
    times_said INTEGER NOT NULL,
    last_recalled_at REAL,
    source_id TEXT,
    source_hash TEXT,
    embedding BLOB NOT NULL,
    changed INTEGER NOT NULL
);
CREATE INDEX memories_changed ON memories (changed);
CREATE INDEX memories_norm ON memories (norm, subject);
CREATE INDEX memories_subject ON memories (subject);
CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO meta VALUES ('generation', 0);
"""
_COLUMNS = (
    "id, text, subject, importance, created_at, said_at, times_said, "
    "last_recalled_at, source_id, source_hash"
)
# A restatement of the same text: an index search on (norm, subject), never a scan.
SAME_TEXT = (
    "SELECT id FROM memories WHERE norm = ? AND subject IS ? "
    "ORDER BY said_at DESC LIMIT 1"
)
# Recall's statistics (`mark_recalled`): one statement, committed on its own.
RECALLED = "UPDATE memories SET last_recalled_at = ? WHERE id IN ({})"
_SPACES = re.compile(r"\s+")
# Punctuation that does not join two letters or digits ("10:00", "3.5" and "don't"
# keep theirs: dropping it would make "3.5" restate "35").
_LOOSE_PUNCTUATION = re.compile(r"(?<![^\W_])[^\w\s]+|[^\w\s]+(?![^\W_])")
_WORDS = re.compile(r"\w+(?:[^\w\s]\w+)*")
# Tokens an embedding blurs and a fact turns on: a restatement must repeat them all.
_NEGATIONS = frozenset(
    {"no", "not", "never", "none", "nobody", "nothing", "nowhere", "neither"}
    | {"nor", "without", "cannot"}
)
# Numbers, times and dates written as words (a list as prose: split is clearer here).
_NUMBER_AND_CALENDAR_WORDS = frozenset(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "  # noqa: SIM905
    "fourteen fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty "
    "sixty seventy eighty ninety hundred thousand million billion first second third "
    "fourth fifth sixth seventh eighth ninth tenth half twice once dozen noon midnight "
    "am pm monday tuesday wednesday thursday friday saturday sunday january february "
    "march april may june july august september october november december today "
    "tomorrow yesterday weekly daily monthly yearly".split()
)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def timestamp(moment: datetime) -> float:
    """Epoch seconds of an aware datetime; a naive one is refused."""
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidInputError(
            "the clock must give a timezone-aware datetime (e.g. datetime.now(UTC)); "
            f"got {moment!r}"
        )
    return moment.timestamp()


def moment(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def normalised(text: str) -> str:
    """The same text in one form, so that a restatement finds it by index.

    NFKC, case folded, format characters (zero-width, soft hyphen) removed,
    punctuation that joins no two letters or digits dropped, spacing folded.
    """
    folded = "".join(
        char
        for char in unicodedata.normalize("NFKC", text).casefold()
        if unicodedata.category(char) != "Cf"
    )
    return _SPACES.sub(" ", _LOOSE_PUNCTUATION.sub(" ", folded)).strip()


def visible(text: str) -> bool:
    """Whether `text` has a character that draws, once in NFKC form.

    Spaces, controls and format characters (zero-width, soft hyphen) do not.
    """
    return any(
        unicodedata.category(char)[0] not in "CZ" and not char.isspace()
        for char in unicodedata.normalize("NFKC", text)
    )


def key_tokens(text: str) -> tuple[str, ...]:
    """The tokens a restatement must repeat, sorted (a multiset).

    A word holding a digit, a number word, a weekday or month, any word with a
    capital letter (a name, or a sentence's first word: rather a new memory than a
    swallowed change), a negation (and every `n't`). Embeddings score "10:00" and
    "11:30", or "eats fish" and "never eats fish", as nearly the same sentence;
    these tokens tell them apart.
    """
    keys = []
    for word in _WORDS.findall(unicodedata.normalize("NFKC", text)):
        folded = word.casefold()
        if (
            any(char.isdigit() or char.isupper() for char in word)
            or folded in _NEGATIONS
            or folded in _NUMBER_AND_CALENDAR_WORDS
            or folded.endswith(("n't", "n\u2019t"))
        ):
            keys.append(folded)
    return tuple(sorted(keys))


@dataclass(frozen=True)
class Memory:
    """One remembered statement (its embedding stays in the store).

    Attributes:
        id: Stable for the memory's life (a restatement keeps it).
        text: The statement as first remembered.
        subject: An optional key (e.g. `editor.theme`): memories of one subject
            supersede each other at recall, the most recently said winning.
        importance: 0 to 1, a factor of the score.
        said_at: When it was last stated: the only time the ranking reads.
        last_recalled_at: When a recall last returned it (statistics only).
        source_id: The document it was learned from, if any.
        source_hash: That document's content hash when it was learned.
    """

    id: str
    text: str
    subject: str | None
    importance: float
    created_at: datetime
    said_at: datetime
    times_said: int
    last_recalled_at: datetime | None
    source_id: str | None
    source_hash: str | None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Memory:
        return cls(
            id=row[0],
            text=row[1],
            subject=row[2],
            importance=float(row[3]),
            created_at=moment(row[4]),
            said_at=moment(row[5]),
            times_said=int(row[6]),
            last_recalled_at=None if row[7] is None else moment(row[7]),
            source_id=row[8],
            source_hash=row[9],
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable view (times as ISO 8601 strings)."""
        return {
            "id": self.id,
            "text": self.text,
            "subject": self.subject,
            "importance": self.importance,
            "created_at": self.created_at.isoformat(),
            "said_at": self.said_at.isoformat(),
            "times_said": self.times_said,
            "last_recalled_at": (
                None
                if self.last_recalled_at is None
                else self.last_recalled_at.isoformat()
            ),
            "source_id": self.source_id,
            "source_hash": self.source_hash,
        }


class MemoryStore:
    """Memories in a SQLite file or on a PostgreSQL server: remember, forget, list.

    Thread-safe (one connection behind a lock) and process-safe (one
    transaction per write; SQLite: WAL and a busy timeout). `close` it, or use
    it as a context manager.

    Args:
        path: The SQLite file (created with its schema when absent), or a
            `postgresql://` URL (the schema created in an empty database; see
            `langchain_ragbudget.memory._postgres`). `path` shows the URL
            without its password.
        embeddings: Embeds remembered text and queries; optional when every
            `remember` passes `embedding=` and recall is given vectors.
        clock: Gives "now" as an aware datetime.
        restate_similarity: See `MemorySettings.restate_similarity`.
        default_importance: The importance of a memory remembered without one.

    Raises:
        MemoryStoreError: The file or database is not a memory store (not
            SQLite, another schema, a newer schema version) or cannot be opened
            (the server unreachable).
    """

    def __init__(
        self,
        path: str | Path,
        embeddings: Embeddings | None = None,
        *,
        clock: Clock = utc_now,
        restate_similarity: float = default_of(MemorySettings, "restate_similarity"),
        default_importance: float = default_of(MemorySettings, "importance"),
    ) -> None:
        self._location = path
        self.path: Path | str = shown(str(path)) if is_server_url(path) else Path(path)
        self.embeddings = embeddings
        self.clock = clock
        self.restate_similarity = restate_similarity
        self.default_importance = default_importance
        self._lock = threading.RLock()
        self._cache = RankingCache()
        self._connection = self._connect()

    @classmethod
    def from_config(
        cls,
        config: ConfigLike = None,
        *,
        path: str | Path | None = None,
        embeddings: Embeddings | None = None,
        **options: Any,
    ) -> MemoryStore:
        """The store `memory.store` names, with the configuration's `memory` settings.

        Args:
            config: A loaded configuration, a YAML file, or None for the shipped
                defaults (`memory.store`, `memory.restate_similarity`,
                `memory.importance`).
            path: Instead of `memory.store`: the SQLite file (created when
                absent) or a `postgresql://` URL.
            embeddings: Embeds text (e.g. `build_embeddings(config)`).
            **options: Other `MemoryStore` keywords (`clock`).

        Raises:
            ConfigError: The file is invalid (before the store is opened).
            InvalidInputError: Neither `path` nor `memory.store` is given.
            MemoryStoreError: As the constructor.
        """
        settings = as_config(config).memory
        location = settings.store if path is None else path
        if location is None:
            raise InvalidInputError(
                "no memory store: set memory.store in the configuration (a SQLite "
                "file or a postgresql:// URL) or give path="
            )
        return cls(
            location,
            embeddings,
            restate_similarity=settings.restate_similarity,
            default_importance=settings.importance,
            **options,
        )

    def _connect(self) -> Connection:
        self.read_only = False
        if isinstance(self.path, str):
            return ServerConnection(str(self._location), SCHEMA_VERSION)
        if self.path.is_dir():
            raise MemoryStoreError(f"memory store {self.path}: is a folder, not a file")
        self.read_only = self.path.is_file() and not _writable_file(self.path)
        with self._errors():
            if self.read_only:
                return self._connect_read_only()
            connection = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = NORMAL")
            _ensure_schema(connection, self.path)
            return connection

    def _connect_read_only(self) -> sqlite3.Connection:
        """The file opened for reading only (`mode=ro`).

        On a read-only file system, where SQLite cannot make the WAL's
        shared-memory file, as `immutable` (no locks: nothing can write there).
        """
        uri = Path(self.path).resolve().as_uri()
        for flags in ("mode=ro", "mode=ro&immutable=1"):
            connection = sqlite3.connect(
                f"{uri}?{flags}",
                uri=True,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            try:
                _check_schema(connection, self.path)
            except sqlite3.OperationalError:
                connection.close()
                if flags.endswith("immutable=1"):
                    raise
                continue
            return connection
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's errors as a `MemoryStoreError` naming the file and what to do."""
        try:
            yield
        except sqlite3.Error as exc:
            raise MemoryStoreError(
                f"memory store {self.path}: {_what_to_do(exc, self.path)} ({exc})"
            ) from exc

    def _writable(self) -> None:
        if self.read_only:
            raise MemoryStoreError(
                f"memory store {self.path}: is read-only (the file or its folder "
                "cannot be written), so it can be listed and recalled but not "
                "changed; copy it to a writable folder, or make it writable"
            )

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def now(self) -> datetime:
        """The store's clock, checked to be timezone-aware."""
        current = self.clock()
        timestamp(current)
        return current

    @contextmanager
    def _transaction(self) -> Iterator[Connection]:
        """One write: `BEGIN IMMEDIATE` (waits for another writer), commit or undo."""
        self._writable()
        with self._lock, self._errors():
            connection = self._connection
            connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
                connection.execute("COMMIT")
            except BaseException:
                connection.execute("ROLLBACK")
                raise

    @contextmanager
    def _snapshot(self) -> Iterator[None]:
        """One read transaction: every query in it sees the same committed state."""
        with self._lock, self._errors():
            self._connection.execute("BEGIN")
            try:
                yield
            finally:
                self._connection.execute("COMMIT")

    def _query(self, sql: str, parameters: Sequence[Any] = ()) -> list[Any]:
        with self._lock, self._errors():
            return self._connection.execute(sql, parameters).fetchall()

    def embed(self, text: str) -> np.ndarray:
        """`text`'s embedding as a document."""
        if self.embeddings is None:
            raise InvalidInputError(
                f"memory store {self.path} has no embeddings to embed text with: "
                "give MemoryStore(embeddings=...) or pass embedding="
            )
        return _vector(self.embeddings.embed_documents([text])[0], "the embedding")

    def embed_query(self, text: str) -> np.ndarray:
        if self.embeddings is None:
            raise InvalidInputError(
                f"memory store {self.path} has no embeddings to embed a query with: "
                "give MemoryStore(embeddings=...) or recall with a vector"
            )
        return _vector(self.embeddings.embed_query(text), "the query embedding")

    def remember(
        self,
        text: str,
        *,
        subject: str | None = None,
        importance: float | None = None,
        source_id: str | None = None,
        source_hash: str | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
    ) -> Memory:
        """Store a statement, or restate the memory it repeats.

        A restatement is the same statement: the same normalised text (case,
        spacing, punctuation, Unicode form) and subject, or, on the same subject,
        an embedding at least `restate_similarity` alike with the same numbers,
        dates, times, names and negations (`key_tokens`). It updates that
        memory's `said_at` and `times_said`, and its importance when one is
        given (the latest word on how much it matters). Any other statement is
        a new memory; on a subject, recall serves the most recently said.

        Returns:
            The memory as stored: new (`times_said == 1`) or restated.

        Raises:
            InvalidInputError: Text with nothing visible, an importance outside
                0..1, an embedding of another dimension than the store's.
            MemoryStoreError: The store is read-only or damaged.
        """
        if not isinstance(text, str) or not visible(text):
            raise InvalidInputError(
                f"a memory needs text with a visible character; got {text!r}"
            )
        self._writable()
        weight = self.default_importance if importance is None else importance
        if not isinstance(weight, int | float) or not 0 <= weight <= 1:
            raise InvalidInputError(f"importance must be within 0..1; got {weight!r}")
        vector = (
            self.embed(text) if embedding is None else _vector(embedding, "embedding=")
        )
        now = timestamp(self.now())
        with self._transaction() as connection:
            _check_dimension(connection, self.path, len(vector))
            same = _restated(connection, text, subject, vector, self)
            if same is not None:
                connection.execute(
                    "UPDATE memories SET said_at = ?, times_said = times_said + 1, "
                    "importance = coalesce(?, importance), changed = ? WHERE id = ?",
                    (
                        now,
                        None if importance is None else float(weight),
                        _bump(connection),
                        same,
                    ),
                )
                memory_id = same
            else:
                memory_id = f"mem-{uuid.uuid4().hex[:16]}"
                connection.execute(
                    f"INSERT INTO memories ({_COLUMNS}, norm, embedding, changed) "
                    "VALUES (?, ?, ?, ?, ?, ?, 1, NULL, ?, ?, ?, ?, ?)",
                    (
                        memory_id,
                        text,
                        subject,
                        float(weight),
                        now,
                        now,
                        source_id,
                        source_hash,
                        normalised(text),
                        vector.astype(np.float32).tobytes(),
                        _bump(connection),
                    ),
                )
            row = connection.execute(
                f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
            ).fetchone()
        return Memory.from_row(row)

    def forget(self, memory_id: str) -> bool:
        """Delete one memory; whether it existed.

        Raises:
            MemoryStoreError: The store is read-only or damaged.
        """
        with self._transaction() as connection:
            deleted = connection.execute(
                "DELETE FROM memories WHERE id = ?", (memory_id,)
            ).rowcount
            if deleted:
                _bump(connection)
        return bool(deleted)

    def get(self, memory_id: str) -> Memory | None:
        rows = self._query(
            f"SELECT {_COLUMNS} FROM memories WHERE id = ?", (memory_id,)
        )
        return Memory.from_row(rows[0]) if rows else None

    def get_many(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The memories with these ids, by id; missing ones left out."""
        rows = self._rows_of(_COLUMNS, ids)
        return {row[0]: Memory.from_row(row) for row in rows}

    def _rows_of(self, columns: str, ids: Sequence[str]) -> builtins.list[Any]:
        rows = []
        for part, marks in _id_batches(ids):
            sql = f"SELECT {columns} FROM memories WHERE id IN ({marks})"
            rows += self._query(sql, part)
        return rows

    def list(self, subject: str | None = None) -> builtins.list[Memory]:
        """Every memory (or those of one subject), most recently said first."""
        where, parameters = (
            ("WHERE subject = ?", (subject,)) if subject is not None else ("", ())
        )
        rows = self._query(
            f"SELECT {_COLUMNS} FROM memories {where} ORDER BY said_at DESC, id",
            parameters,
        )
        return [Memory.from_row(row) for row in rows]

    def __len__(self) -> int:
        return int(self._query("SELECT count(*) FROM memories")[0][0])

    def mark_recalled(self, ids: Sequence[str], at: datetime) -> None:
        """Note when memories were recalled (statistics).

        One statement, committed on its own (on PostgreSQL without waiting for
        the disk). Ranking never reads `last_recalled_at`, so the generation
        does not move. A read-only store keeps none (recall still works, as on
        a read-only index).
        """
        if not ids or self.read_only:
            return
        when = timestamp(at)
        with self._lock, self._errors():
            for part, marks in _id_batches(ids):
                self._connection.execute(RECALLED.format(marks), (when, *part))

    def ranking(self) -> Ranking:
        """Ranking's arrays, up to date, read as one committed state of the file."""
        with self._lock, self._errors():
            return self._cache.read(
                self._query,
                lambda ids: dict(self._rows_of("id, embedding", ids)),
                self._snapshot,
            )

    def schema_version(self) -> int:
        return int(self._query("PRAGMA user_version")[0][0])

    def dimension(self) -> int | None:
        """The embeddings' dimension, once a memory is stored (else None)."""
        rows = self._query("SELECT value FROM meta WHERE key = 'dimension'")
        return int(rows[0][0]) if rows else None

    def __repr__(self) -> str:
        return f"MemoryStore({str(self.path)!r}, {len(self)} memories)"


def _id_batches(ids: Sequence[str]) -> Iterator[tuple[Sequence[str], str]]:
    """`ids` in parts of 500 (SQLite's bound-parameter limit), with their `?` marks."""
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        yield part, ", ".join("?" * len(part))


def _ensure_schema(connection: sqlite3.Connection, path: Path) -> None:
    """Create the schema in a new file; refuse a file of another kind or version."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        if not _check_schema(connection, path, new_ok=True):
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        _renormalise(connection)
        connection.execute("COMMIT")
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def _renormalise(connection: sqlite3.Connection) -> None:
    """Bring the `norm` column to this version's `normalised`, once per file.

    Stores written before it folded inner punctuation and format characters
    hold older forms, which a restatement would no longer find.
    """
    row = connection.execute(
        "SELECT value FROM meta WHERE key = 'normal_form'"
    ).fetchone()
    if row is not None and int(row[0]) >= NORMAL_FORM:
        return
    rows = connection.execute("SELECT id, text FROM memories").fetchall()
    connection.executemany(
        "UPDATE memories SET norm = ? WHERE id = ?",
        [(normalised(text), memory_id) for memory_id, text in rows],
    )
    connection.execute(
        "INSERT OR REPLACE INTO meta VALUES ('normal_form', ?)", (NORMAL_FORM,)
    )


def _check_schema(
    connection: sqlite3.Connection, path: Path | str, *, new_ok: bool = False
) -> bool:
    """Whether the file holds this version's schema.

    False for an empty file when `new_ok`; else MemoryStoreError.
    """
    version = connection.execute("PRAGMA user_version").fetchone()[0]
    tables = {
        row[0]
        for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    if new_ok and version == 0 and not tables:
        return False
    if version != SCHEMA_VERSION or not {"memories", "meta"} <= tables:
        raise MemoryStoreError(
            f"memory store {path}: schema version {version} with tables "
            f"{sorted(tables)} is not a memory store this version reads "
            f"(schema version {SCHEMA_VERSION})"
        )
    return True


def _writable_file(path: Path) -> bool:
    """Whether SQLite can write `path` and make its journal beside it.

    The permission bits count even for root (who may write anything): a file
    made read-only says "do not write here".
    """
    folder = path.parent
    return (
        os.access(path, os.W_OK)
        and os.access(folder, os.W_OK)
        and bool(path.stat().st_mode & 0o222)
    )


def _what_to_do(error: sqlite3.Error, path: Path | str) -> str:
    """What SQLite's error means for the user of a memory store, and the remedy."""
    message = str(error).lower()
    if "malformed" in message or "not a database" in message or "corrupt" in message:
        return (
            "is damaged: restore it from a backup, or save what is readable into "
            f"a new file with `sqlite3 {path} .recover | sqlite3 recovered.sqlite`"
        )
    if "readonly" in message or "read-only" in message:
        return "is read-only: make the file and its folder writable to change it"
    if "locked" in message or "busy" in message:
        return (
            f"is locked by another process (waited {BUSY_TIMEOUT_MS // 1000} s); "
            "try again when it has finished"
        )
    return "cannot be opened or read; check the file and its folder"


def _vector(values: Sequence[float] | np.ndarray, what: str) -> np.ndarray:
    """A finite, non-empty, non-zero 1-d float vector, else InvalidInputError."""
    try:
        vector = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{what} is not a list of numbers ({exc})") from exc
    if vector.ndim != 1 or not len(vector) or not np.all(np.isfinite(vector)):
        raise InvalidInputError(
            f"{what} must be a non-empty list of finite numbers; got shape "
            f"{vector.shape}"
        )
    if not math.isfinite(float(np.linalg.norm(vector))) or not vector.any():
        raise InvalidInputError(f"{what} is all zeros: it has no direction")
    return vector


def _check_dimension(connection: Connection, path: Path | str, size: int) -> None:
    row = connection.execute(
        "SELECT value FROM meta WHERE key = 'dimension'"
    ).fetchone()
    if row is None:
        connection.execute("INSERT INTO meta VALUES ('dimension', ?)", (size,))
    elif int(row[0]) != size:
        raise InvalidInputError(
            f"memory store {path} holds {row[0]}-dimensional embeddings; got one of "
            f"{size} dimensions (another embedding model?)"
        )


def _bump(connection: Connection) -> int:
    """Move the generation; the new one stamps the rows this write changes."""
    row = connection.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'generation' RETURNING value"
    ).fetchone()
    return int(row[0])


def _restated(
    connection: Connection,
    text: str,
    subject: str | None,
    vector: np.ndarray,
    store: MemoryStore,
) -> str | None:
    """The id of the memory this statement restates, or None."""
    row = connection.execute(SAME_TEXT, (normalised(text), subject)).fetchone()
    if row is not None:
        return str(row[0])
    if subject is None:
        return None
    keys = key_tokens(text)
    rows = [
        row
        for row in connection.execute(
            "SELECT id, embedding, text FROM memories WHERE subject = ? "
            "ORDER BY said_at DESC",
            (subject,),
        ).fetchall()
        if key_tokens(row[2]) == keys
    ]
    if not rows:
        return None
    others = unit_rows(
        np.stack([np.frombuffer(r[1], dtype=np.float32) for r in rows]).astype(
            np.float64
        )
    )
    similarity = others @ (vector / np.linalg.norm(vector))
    best = int(np.argmax(similarity))
    return str(rows[best][0]) if similarity[best] >= store.restate_similarity else None
