"""A folder (or one file) planned for an ingest: scan, ids, reads, refusals.

The one path behind `HybridIndex.ingest` and `ragbudget index`, so both index the
same files under the same ids: paths relative to the index's root folder, so a
subfolder can be indexed again under the same ids.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.config._disk import atomic_write_text
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.index._loaders import (
    DEFAULT_ENCODINGS,
    FileError,
    Scan,
    Skipped,
    load_file,
    scan,
)
from langchain_ragbudget.progress import ProgressCallback, StageProgress

READING = "reading files"  # a progress stage
NOT_INDEXED = "not_indexed.json"  # in the index folder: files refused and skipped


@dataclass
class FolderPlan:
    """What an ingest of `given` will touch, known before anything is read.

    Attributes:
        given: The folder or file given.
        files: Document id -> file, for every file the scan found.
        skipped: Files the scan passed over, by document id.
        gone: Indexed documents under `given` whose file is gone.
        scope: The document id of `given` itself ("." for the root folder).
        encodings: Text encodings to try, in order.
    """

    given: Path
    files: dict[str, Path]
    skipped: list[Skipped]
    gone: list[str]
    scope: str
    encodings: tuple[str, ...] = DEFAULT_ENCODINGS


def scan_path(given: Path, exclude: Sequence[str] = ()) -> Scan:
    """The scan of `given`, which must exist.

    Raises:
        InvalidInputError: `given` does not exist.
    """
    if not given.exists():
        raise InvalidInputError(f"{given} does not exist")
    return scan(given, exclude)


def check_found(found: Scan, given: Path, *, prune: bool = False) -> None:
    """Refuse a scan with no file to index, unless pruning (which may need none).

    Raises:
        InvalidInputError: No file to index under `given`.
    """
    if not found.files and not prune:
        raise InvalidInputError(
            f"nothing to index under {given}: no .txt, .md, .html or .pdf file, "
            "no README, NEWS, changelog, copyright... (`ragbudget index --help` "
            f"lists the names), nor a .gz of one ({len(found.skipped)} skipped)"
        )


def plan_folder(
    given: Path,
    found: Scan,
    root: Path,
    indexed: Sequence[str],
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
) -> FolderPlan:
    """Ids for the scanned files, and the `indexed` documents gone from `given`.

    Raises:
        InvalidInputError: `given` is outside `root`.
    """
    doc_id = ids_under(given, root)
    files = {doc_id(path.relative_to(given).as_posix()): path for path in found.files}
    scope = doc_id("")
    gone = [d for d in indexed if _in_scope(d, scope) and d not in files]
    skipped = [
        Skipped(doc_id(item.path), item.reason, item.detail) for item in found.skipped
    ]
    return FolderPlan(given, files, skipped, gone, scope, tuple(encodings))


def read_files(
    plan: FolderPlan, progress: ProgressCallback | None = None
) -> tuple[list[Document], list[FileError]]:
    """Every file of `plan` as a document, and the files that could not be read.

    All are read before any is chunked, so each progress stage has a true total.
    """
    errors: list[FileError] = []
    documents: list[Document] = []
    read = StageProgress(progress, READING, len(plan.files)).start()
    for key, path in plan.files.items():
        try:
            documents.append(load_file(path, plan.given, key, plan.encodings))
        except ValueError as exc:
            errors.append(FileError(key, str(exc)))
        read.advance()
    return documents, errors


def remember_outcomes(
    directory: Path, plan: FolderPlan, errors: Sequence[FileError]
) -> list[str]:
    """Record this run's refused and skipped files; return refusals made before.

    The record (`NOT_INDEXED`) lists every file of the last ingest of each path
    that is not indexed, and why, for `ragbudget inspect --documents`; this
    run's scope replaces what an earlier run recorded under it. Reported before
    means the same reason, size and modification time, so a scheduled re-run
    over a file nobody fixed exits 0. A record that cannot be read or written
    counts every refusal as new.
    """
    previous = read_outcomes(directory)
    old_refused: dict[str, Any] = previous["refused"]
    refused = {k: v for k, v in old_refused.items() if not _in_scope(k, plan.scope)}
    skipped = {
        key: value
        for key, value in previous["skipped"].items()
        if not _in_scope(key, plan.scope)
    }
    known: list[str] = []
    for error in errors:
        entry = {"problem": error.problem, **_fingerprint(plan.files[error.path])}
        if old_refused.get(error.path) == entry:
            known.append(error.path)
        refused[error.path] = entry
    for item in plan.skipped:
        skipped[item.path] = {"reason": item.reason, "detail": item.detail}
    now = {"refused": refused, "skipped": skipped}
    if now != previous:
        # the record is a courtesy: without it, every refusal is new
        with contextlib.suppress(OSError):
            text = json.dumps(now, indent=1, sort_keys=True)
            atomic_write_text(directory / NOT_INDEXED, text)
    return known


def read_outcomes(directory: Path) -> dict[str, dict[str, Any]]:
    """The record of files not indexed: `refused` and `skipped`, by document id."""
    try:
        found = json.loads((directory / NOT_INDEXED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = {}
    if not isinstance(found, dict):
        found = {}
    return {
        part: found[part] if isinstance(found.get(part), dict) else {}
        for part in ("refused", "skipped")
    }


def not_indexed(directory: Path) -> tuple[list[FileError], list[Skipped]]:
    """The files the last ingest of each path refused and skipped, and why."""
    record = read_outcomes(directory)
    refused = [
        FileError(key, str(entry.get("problem", "")))
        for key, entry in sorted(record["refused"].items())
        if isinstance(entry, dict)
    ]
    skipped = [
        Skipped(key, str(entry.get("reason", "")), str(entry.get("detail", "")))
        for key, entry in sorted(record["skipped"].items())
        if isinstance(entry, dict)
    ]
    return refused, skipped


def _fingerprint(path: Path) -> dict[str, int]:
    try:
        status = path.stat()
    except OSError:
        return {}
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns}


def root_for(given: Path) -> Path:
    """The root folder a first ingest of `given` records: it, or a file's folder."""
    target = given.resolve()
    return target if target.is_dir() else target.parent


def ids_under(given: Path, root: Path) -> Callable[[str], str]:
    """Ids for files under `given`: their paths relative to `root`.

    Raises:
        InvalidInputError: `given` is outside `root`.
    """
    target = given.resolve()
    if target != root and root not in target.parents:
        raise InvalidInputError(
            f"{given} is outside {root}, the folder this index's document ids are "
            f"relative to (recorded when it was first indexed): index files under "
            f"{root}, or use another --index"
        )
    scope = target.relative_to(root).as_posix()
    if target.is_file():
        return lambda relative: scope
    return lambda relative: _under(scope, relative)


def _under(scope: str, relative: str) -> str:
    if relative in ("", "."):
        return scope
    return relative if scope == "." else f"{scope}/{relative}"


def _in_scope(doc_id: str, scope: str) -> bool:
    return scope == "." or doc_id == scope or doc_id.startswith(scope + "/")
