"""A folder (or one file) into an index: scan, ids, read, upsert, prune.

The one code path behind `HybridIndex.ingest` and `ragbudget index`, so Python and
the command line index the same files under the same ids and report them in the
same `IngestSummary`. Document ids are paths relative to the index's root folder
(recorded by the first ingest), so a file or subfolder can be indexed again under
the same ids; a path outside the root is refused.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.documents import Document

from langchain_ragbudget.config._disk import atomic_write_text
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.index._loaders import (
    DEFAULT_ENCODINGS,
    FileError,
    Scan,
    Skipped,
    check_encodings,
    load_file,
    scan,
)
from langchain_ragbudget.index._reports import IngestSummary
from langchain_ragbudget.progress import ProgressCallback, StageProgress

if TYPE_CHECKING:
    from langchain_ragbudget.index._hybrid_index import HybridIndex

READING = "reading files"
"""The progress stage of reading the files, before `upsert`'s own stages."""
REFUSALS = "refusals.json"
"""In the index folder: the files the last ingest could not read and why."""


@dataclass
class FolderPlan:
    """What an ingest of `given` will touch, known before anything is read.

    Attributes:
        given: The folder or file given.
        files: Document id -> file, for every file the scan found.
        skipped: Files the scan passed over, by document id.
        gone: Indexed documents under `given` whose file is no longer there.
        scope: The document id of `given` itself ("." for the root folder).
        encodings: Text encodings to try, in order (`read_file`).
    """

    given: Path
    files: dict[str, Path]
    skipped: list[Skipped]
    gone: list[str]
    scope: str
    encodings: tuple[str, ...] = DEFAULT_ENCODINGS


def scan_path(given: Path, exclude: Sequence[str] = ()) -> Scan:
    """The scan of `given` (`scan`), which must exist.

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
            f"nothing to index under {given}: no .txt, .md, .html or .pdf file "
            "(nor a .gz of a text type) "
            f"({len(found.skipped)} skipped)"
        )


def plan_folder(
    index: HybridIndex,
    given: Path,
    found: Scan,
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
) -> FolderPlan:
    """Ids for the scanned files, and the indexed documents gone from `given`."""
    doc_id = document_ids(index, given)
    files = {doc_id(path.relative_to(given).as_posix()): path for path in found.files}
    scope = doc_id("")
    gone = [d for d in index.document_ids if _in_scope(d, scope) and d not in files]
    skipped = [
        Skipped(doc_id(item.path), item.reason, item.detail) for item in found.skipped
    ]
    return FolderPlan(given, files, skipped, gone, scope, tuple(encodings))


def ingest_plan(
    index: HybridIndex,
    plan: FolderPlan,
    *,
    prune: bool = False,
    progress: ProgressCallback | None = None,
) -> IngestSummary:
    """Read every file, upsert them all, then delete the gone ones if `prune`.

    Reading all files first gives each stage (reading, chunking, embedding) a true
    total; the index holds every chunk in memory anyway. A file that cannot be
    read is refused like an empty one, but listed in `unreadable` too: it is a
    failure, where an empty file is an expected refusal.
    """
    read_errors: list[FileError] = []
    documents: list[Document] = []
    read = StageProgress(progress, READING, len(plan.files)).start()
    for key, path in plan.files.items():
        try:
            documents.append(load_file(path, plan.given, key, plan.encodings))
        except ValueError as exc:
            read_errors.append(FileError(key, str(exc)))
        read.advance()
    summary = index.upsert(documents, progress=progress)
    summary.errors[:0] = read_errors
    summary.unreadable = [error.path for error in read_errors]
    summary.reported_before = remember_refusals(
        Path(index.directory), plan, read_errors
    )
    summary.skipped = list(plan.skipped)
    if plan.gone and prune:
        before = index.chunk_count
        summary.deleted += index.delete(plan.gone)
        summary.chunks_deleted += before - index.chunk_count
    elif plan.gone:
        summary.missing = list(plan.gone)
    return summary


def remember_refusals(
    directory: Path, plan: FolderPlan, errors: Sequence[FileError]
) -> list[str]:
    """Record this run's unreadable files; return those the last run reported too.

    A file counts as reported before when the last ingest of it refused it for
    the same reason and its size and modification time are unchanged: a
    scheduled job that re-runs over a file nobody has fixed then exits 0 (the
    exit-code policy of `ragbudget index`). The record (`REFUSALS`, JSON, in
    the index folder) keeps entries outside this run's scope as they were; a
    record that cannot be read or written counts every refusal as new.
    """
    record_path = directory / REFUSALS
    try:
        before = json.loads(record_path.read_text(encoding="utf-8"))
        previous: dict[str, Any] = before if isinstance(before, dict) else {}
    except (OSError, ValueError):
        previous = {}
    now: dict[str, Any] = {
        key: value for key, value in previous.items() if key not in plan.files
    }
    known: list[str] = []
    for error in errors:
        entry = {"problem": error.problem, **_fingerprint(plan.files[error.path])}
        if previous.get(error.path) == entry:
            known.append(error.path)
        now[error.path] = entry
    if now != previous:
        # the record is a courtesy: without it, every refusal is new
        with contextlib.suppress(OSError):
            atomic_write_text(record_path, json.dumps(now, indent=1, sort_keys=True))
    return known


def _fingerprint(path: Path) -> dict[str, int]:
    try:
        status = path.stat()
    except OSError:
        return {}
    return {"size": status.st_size, "mtime_ns": status.st_mtime_ns}


def document_ids(index: HybridIndex, given: Path) -> Callable[[str], str]:
    """Ids for files under `given`: their paths relative to the index's root.

    The first ingest records the root; a path outside it is refused.
    """
    target = given.resolve()
    root = index.root
    if root is None:  # the first ingest (or an index made before roots)
        root = target if target.is_dir() else target.parent
        index.set_root(root)
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
    """A document id: `relative` (POSIX, under the given path) under `scope`."""
    if relative in ("", "."):
        return scope
    return relative if scope == "." else f"{scope}/{relative}"


def _in_scope(doc_id: str, scope: str) -> bool:
    return scope == "." or doc_id == scope or doc_id.startswith(scope + "/")


def ingest_folder(
    index: HybridIndex,
    path: str | Path,
    *,
    exclude: Sequence[str] = (),
    prune: bool = False,
    progress: ProgressCallback | None = None,
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
) -> IngestSummary:
    """Index a folder (or one file) as `ragbudget index` does: `HybridIndex.ingest`.

    The same scan (.txt, .md, .html, .pdf; links followed, loops skipped;
    `exclude` globs), the same ids (paths relative to the index's root
    folder, recorded by the first ingest) and the same summary: its
    `skipped`, `unreadable` and `missing` name every file not indexed.

    Args:
        index: The index to write to (its write lock held throughout).
        path: The folder or file.
        exclude: Glob patterns of paths or names to leave out.
        prune: Delete indexed documents under `path` whose file is gone.
        progress: Hears the reading, chunking and embedding stages.
        encodings: Text encodings tried in order (`read_file`).

    Raises:
        InvalidInputError: `path` does not exist, holds nothing to index, or is
            outside the index's root folder.
    """
    given = Path(path)
    encodings = check_encodings(encodings)
    found = scan_path(given, exclude)
    check_found(found, given, prune=prune)
    with index._writing():  # the plan and its writes under one lock
        plan = plan_folder(index, given, found, encodings)
        return ingest_plan(index, plan, prune=prune, progress=progress)
