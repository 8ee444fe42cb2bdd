"""A write that runs out of disk (full, read-only, over quota) as one clear error.

It may surface as our own `OSError` or as a chromadb error carrying SQLite's
words, which would leave the user unsure whether the index is lost. It is not
(a version is published only after everything is written); `IndexWriteError`
says so, with what to do.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langchain_ragbudget.errors import IndexWriteError

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EROFS, errno.EDQUOT})
# How SQLite (inside chromadb) words the same causes.
_STORE_SIGNS = {
    "database or disk is full": "the disk is full",
    "disk quota exceeded": "the disk quota is exceeded",
    "readonly database": "the folder is read-only",
    "read-only file system": "the folder is read-only",
    "no space left on device": "the disk is full",
}


def disk_failure(error: BaseException) -> str | None:
    """Why `error` is a disk that cannot take the write; None if it is not one."""
    if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
        return os.strerror(error.errno)
    if isinstance(error, sqlite3.Error) or _from_chromadb(error):
        text = str(error).lower()
        for sign, reason in _STORE_SIGNS.items():
            if sign in text:
                return reason
    return None


def _from_chromadb(error: BaseException) -> bool:
    """Whether chromadb raised `error` (checked by name: importing it is slow)."""
    return any(kind.__module__.startswith("chromadb") for kind in type(error).__mro__)


FULL_BELOW_BYTES = 1 << 20


def _full_after_store_error(error: BaseException, directory: Path) -> str | None:
    """A chromadb error raised with (almost) no space left: the disk is full.

    A write failing during chromadb's log compaction does not say "disk is full";
    the free space tells.
    """
    if not _from_chromadb(error):
        return None
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return None
    return "the disk is full" if free < FULL_BELOW_BYTES else None


@contextmanager
def disk_errors_named(directory: Path, committed: int | None) -> Iterator[None]:
    """Turn a disk that cannot take the write into `IndexWriteError`.

    `committed` (documents in the last committed version) is named if known.
    """
    try:
        yield
    except Exception as error:
        reason = disk_failure(error) or _full_after_store_error(error, directory)
        if reason is None:
            raise
        held = f" ({committed} document(s))" if committed is not None else ""
        raise IndexWriteError(
            f"{directory}: the index could not be written: {reason} "
            f"({type(error).__name__}: {error}). Nothing of this run was committed: "
            f"the index still holds its last committed version{held}. Free space "
            "(or make the folder writable) and run the same command again; the "
            "vectors already written are reused."
        ) from error
