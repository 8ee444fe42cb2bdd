"""One writer at a time: an `fcntl.flock` on `write.lock` in the index folder.

Without it two writers would each publish a BM25 version built from what they
read, and the second would drop the first one's documents. The kernel releases
a flock when its process ends, however it ends, so a crashed writer leaves no
stale lock; the file only names the last holder, for messages. Readers never
take it. On Windows (no `fcntl`) writers are not kept apart; a warning says so.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import IO, Any

from langchain_ragbudget.errors import IndexLockedError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

LOCK_FILE = "write.lock"
POLL_SECONDS = 0.1  # how often a waiting writer tries again


def _holder_text() -> str:
    return json.dumps(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": " ".join(sys.argv)[:300],
            "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
    )


def lock_holder(directory: Path) -> dict[str, Any]:
    """The last holder named in the lock file; empty when unreadable or absent."""
    try:
        found = json.loads((directory / LOCK_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def describe_holder(holder: dict[str, Any]) -> str:
    """`pid 123 on host (command), since ...` for messages."""
    if not holder:
        return "another process"
    return (
        f"pid {holder.get('pid')} on {holder.get('host')} "
        f"({holder.get('command')!s}), since {holder.get('since')}"
    )


class WriterLock:
    """The exclusive write lock of one index folder, held by this process.

    Not reentrant: a second flock on a new descriptor would wait on itself.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._file: IO[str] | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock now."""
        return self._file is not None

    def acquire(self, timeout: float) -> WriterLock:
        """Take the lock, waiting up to `timeout` seconds; name the holder if not.

        Raises:
            IndexLockedError: Another writer held it for the whole `timeout`.
        """
        if fcntl is None:  # pragma: no cover - Windows
            logger.warning(
                "no fcntl here: %s is written without a lock", self.directory
            )
            return self
        self.directory.mkdir(parents=True, exist_ok=True)
        handle = open(self.directory / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    handle.close()
                    holder = describe_holder(lock_holder(self.directory))
                    raise IndexLockedError(
                        f"{self.directory} is being written by {holder}; waited "
                        f"{timeout:g} s. Try again when it finishes, or raise "
                        "index.lock_timeout (--lock-timeout)."
                    ) from None
                time.sleep(POLL_SECONDS)
        handle.seek(0)
        handle.truncate()
        handle.write(_holder_text())
        handle.flush()
        self._file = handle
        return self

    def release(self) -> None:
        """Let the next writer in (closing the descriptor drops the flock)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def writer_active(directory: Path) -> bool:
    """Whether some process (another, or another descriptor here) holds the lock."""
    if fcntl is None:  # pragma: no cover - Windows
        return False
    try:
        handle = open(directory / LOCK_FILE, encoding="utf-8")  # noqa: SIM115
    except OSError:
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False
