"""The index folder on disk: the manifest, BM25 versions, and commit-and-publish.

Layout: `manifest.json` (embedding model, chunking, root folder), `chroma/`, and
the sparse side in a version folder `sparse-<ns>-<pid>` named by `CURRENT`,
holding `records.json` (documents, a manifest copy, every file's size) and
`bm25/`. A save writes a new version folder, fsynced, then switches `CURRENT`
by atomic rename, so a crash or power cut leaves the previous version loadable.

Opening never deletes a committed version, only older ones. A lost `CURRENT` is
recovered from the newest complete version not older than the one it named, a
lost manifest from its copy; any other damage makes `load_version` raise
`IndexLoadError` naming the file, while `salvage_version` (repair, inspection)
collects what it can.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_ragbudget.config._disk import atomic_write_text, publish_folder
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.errors import IndexLoadError
from langchain_ragbudget.index._chroma import CHROMA_DIR
from langchain_ragbudget.retrieval._sparse import BM25Retriever, bm25_settings

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CURRENT = "CURRENT"
RECORDS = "records.json"
BM25_DIR = "bm25"
BM25_DOCUMENTS = "documents.jsonl"
_VERSION = re.compile(r"^\.?sparse-(\d+)-(\d+)(\.tmp)?$")


def manifest_for(config: RagBudgetConfig) -> dict[str, Any]:
    """The manifest an index built with `config` holds: what opening compares."""
    chunking = config.index.model_dump(
        include={"chunk_size", "chunk_overlap", "encoding", "chunker"}
    )
    return {
        "format": FORMAT_VERSION,
        "embedding_model": config.embedding.model,
        "chunking": chunking,
    }


def holds_index(path: Path) -> bool:
    """Whether `path` holds (part of) an index; a path that is a file is refused."""
    if path.exists() and not path.is_dir():
        raise IndexLoadError(
            f"{path} is a file, not an index folder; give --index a folder"
        )
    if not path.is_dir():
        return False
    names = {entry.name for entry in path.iterdir()}
    return bool(
        names & {MANIFEST, CURRENT, CHROMA_DIR}
        or any(_VERSION.match(name) and not name.startswith(".") for name in names)
    )


def sizes_on_disk(directory: Path) -> dict[str, int]:
    """Bytes on disk per top-level entry; links are counted, never followed."""
    sizes: dict[str, int] = {}
    for entry in sorted(directory.iterdir()):
        total = entry.lstat().st_size if not entry.is_dir() or entry.is_symlink() else 0
        if entry.is_dir() and not entry.is_symlink():
            for folder, _, names in os.walk(entry):
                total += sum(os.lstat(os.path.join(folder, n)).st_size for n in names)
        sizes[entry.name] = total
    return sizes


def _read_json(path: Path) -> Any:
    """Parsed JSON, or IndexLoadError naming the file and what is wrong."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise IndexLoadError(f"{path} is missing") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexLoadError(f"{path} is damaged ({exc})") from exc


def _read_manifest(directory: Path) -> dict[str, Any]:
    """The manifest as written; IndexLoadError naming it if missing or damaged."""
    path = directory / MANIFEST
    found = _read_json(path)
    if not isinstance(found, dict):
        raise IndexLoadError(f"{path} is damaged (not a JSON object)")
    return dict(found)


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Publish `manifest` as the folder's manifest (atomic rename)."""
    atomic_write_text(directory / MANIFEST, json.dumps(manifest, indent=2))


def manifest_for_open(
    directory: Path, expected: dict[str, Any], copy: dict[str, Any] | None
) -> dict[str, Any]:
    """For opening: the manifest, restored from the committed copy if unreadable."""
    try:
        found = _read_manifest(directory)
    except IndexLoadError as exc:
        if copy is None:
            raise IndexLoadError(
                f"{exc}; run `ragbudget repair --index {directory}` to rewrite it "
                f"(embedding model {expected['embedding_model']!r}, chunking "
                f"{expected['chunking']})"
            ) from exc
        logger.warning("%s; restored from the copy in %s", exc, RECORDS)
        write_manifest(directory, copy)
        found = copy
    check_manifest(directory / MANIFEST, found, expected)
    return dict(found)


def manifest_for_repair(
    directory: Path, expected: dict[str, Any], copy: dict[str, Any] | None
) -> tuple[dict[str, Any], bool]:
    """For repair: (manifest, whether to rewrite it); refuses another model.

    An unreadable manifest becomes the committed copy, else `expected`.
    """
    try:
        manifest, rewrite = _read_manifest(directory), False
    except IndexLoadError:
        manifest = dict(copy) if copy is not None else dict(expected)
        rewrite = True
    check_manifest(directory / MANIFEST, manifest, expected)
    return manifest, rewrite


def manifest_for_inspection(
    directory: Path, copy: dict[str, Any] | None, problems: list[str]
) -> dict[str, Any]:
    """For inspection: the manifest, or its committed copy (noted in `problems`)."""
    try:
        return _read_manifest(directory)
    except IndexLoadError as exc:
        problem = str(exc)
    if copy is not None:
        problems.append(
            f"{problem}; opening the index restores it from the copy in {RECORDS}"
        )
        return dict(copy)
    problems.append(f"{problem}; run `ragbudget repair --index {directory}`")
    return {}


def check_manifest(path: Path, found: dict[str, Any], expected: dict[str, Any]) -> None:
    """Refuse a manifest of another embedding model or other chunking settings."""
    if found.get("embedding_model") != expected["embedding_model"]:
        raise IndexLoadError(
            f"{path.parent} was built with embedding model "
            f"{found.get('embedding_model')!r}, but the configuration uses "
            f"{expected['embedding_model']!r}: vectors from two models cannot be "
            "compared. Use the same model, or index into a new directory."
        )
    built, wanted = _chunking(found), _chunking(expected)
    if built != wanted:
        rest = _but_chunker(built)
        only_chunker = rest is not None and rest == _but_chunker(wanted)
        fix = (
            f"set `index.chunker: {built['chunker']}` in your configuration to "
            "keep using it (the default became `sentences`, see CHANGELOG.md)"
            if only_chunker
            else "restore the settings"
        )
        raise IndexLoadError(
            f"{path.parent} was built with chunking {built}, but the configuration "
            f"says {wanted}: {fix}, or re-index into a new directory."
        )


def _but_chunker(chunking: Any) -> dict[str, Any] | None:
    if not isinstance(chunking, dict):
        return None
    return {key: value for key, value in chunking.items() if key != "chunker"}


def _chunking(manifest: dict[str, Any]) -> Any:
    """A manifest's chunking; one written before `chunker` existed was recursive."""
    chunking = manifest.get("chunking")
    if isinstance(chunking, dict) and "chunker" not in chunking:
        return {**chunking, "chunker": "recursive"}
    return chunking


def committed_documents(directory: Path) -> int | None:
    """Documents of the committed version, without loading BM25; None if unreadable."""
    name = current_version_name(directory)
    if not name:
        return None
    try:
        found = json.loads((directory / name / RECORDS).read_text(encoding="utf-8"))
        return len(found["documents"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def current_version_name(directory: Path) -> str:
    """The version `CURRENT` names now ("" when none or unreadable)."""
    try:
        return (directory / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def version_key(name: str) -> tuple[int, int] | None:
    match = _VERSION.match(name)
    return (int(match.group(1)), int(match.group(2))) if match else None


def _complete_versions(directory: Path) -> list[Path]:
    """Published version folders whose records parse, oldest first."""
    found = []
    for entry in directory.iterdir():
        key = version_key(entry.name)
        if key is None or entry.name.startswith(".") or not entry.is_dir():
            continue
        try:
            _read_json(entry / RECORDS)
        except IndexLoadError:
            continue
        found.append((key, entry))
    return [entry for _, entry in sorted(found)]


def find_committed_version(
    directory: Path, *, recover: bool
) -> tuple[Path | None, bool]:
    """The committed version folder (None: none yet), and whether it was recovered.

    Recovery takes the newest complete version not older than the one `CURRENT`
    named, and rewrites `CURRENT` if `recover`; a named version that is gone,
    with nothing as new, is an error.
    """
    current_file = directory / CURRENT
    named = current_version_name(directory)
    named_key = version_key(named) if named else None
    if named and named_key is not None and (directory / named).is_dir():
        return directory / named, False
    candidates = [
        version
        for version in _complete_versions(directory)
        if named_key is None or version_key(version.name) >= named_key  # type: ignore[operator]
    ]
    if not candidates:
        if named_key is not None:
            raise IndexLoadError(
                f"{current_file} names {named}, which is missing: the BM25 side is "
                f"gone. Run `ragbudget repair --index {directory}` to rebuild it "
                "from the vector store."
            )
        if current_file.exists() and any(
            version_key(entry.name) for entry in directory.iterdir()
        ):
            raise IndexLoadError(
                f"{current_file} is damaged and no complete version folder is left; "
                f"run `ragbudget repair --index {directory}`"
            )
        return None, False
    version = candidates[-1]
    logger.warning(
        "%s: %s was missing or damaged; using the newest complete version %s",
        directory,
        CURRENT,
        version.name,
    )
    if recover:
        atomic_write_text(current_file, version.name)
    return version, True


def remove_superseded(directory: Path, committed: Path | None) -> None:
    """Remove version folders older than the committed one; leave newer ones alone."""
    if committed is None:
        return
    committed_key = version_key(committed.name)
    assert committed_key is not None
    for entry in directory.iterdir():
        key = version_key(entry.name)
        if key is not None and key < committed_key and entry.is_dir():
            shutil.rmtree(entry)  # an interrupted or superseded save


def load_version(
    directory: Path, version: Path | None, config: RagBudgetConfig
) -> tuple[dict[str, dict[str, Any]], BM25Retriever | None, dict[str, Any] | None]:
    """Records, BM25 index and manifest copy of the committed version.

    Raises:
        IndexLoadError: Naming the first missing, truncated or unreadable file.
    """
    if version is None:
        return {}, None, None
    repair = f"run `ragbudget repair --index {directory}`"
    try:
        data = _read_json(version / RECORDS)
        records = data["documents"]
        if not isinstance(records, dict):
            raise TypeError("documents is not an object")
    except IndexLoadError as exc:
        raise IndexLoadError(f"{exc}; {repair}") from exc
    except (KeyError, TypeError) as exc:
        raise IndexLoadError(
            f"{version / RECORDS} is damaged ({exc!r}); {repair}"
        ) from exc
    for name, size in (data.get("files") or {}).items():
        path = version / name
        if not path.is_file():
            raise IndexLoadError(f"{path} is missing; {repair}")
        if path.stat().st_size != size:
            raise IndexLoadError(
                f"{path} is truncated or damaged ({path.stat().st_size} bytes, "
                f"{size} written); {repair}"
            )
    copy = data.get("manifest") if isinstance(data.get("manifest"), dict) else None
    if not (version / BM25_DIR).is_dir():
        if records:
            raise IndexLoadError(f"{version / BM25_DIR} is missing; {repair}")
        return records, None, copy
    try:
        sparse = BM25Retriever.load(
            version / BM25_DIR, k=config.retrieval.sparse.fetch_k
        )
    except Exception as exc:  # bm25s, numpy and json raise their own types
        raise IndexLoadError(
            f"{version / BM25_DIR} cannot be loaded ({type(exc).__name__}: {exc}); "
            f"{repair}"
        ) from exc
    recorded = {
        chunk_id for record in records.values() for chunk_id in record["chunks"]
    }
    if recorded != {str(chunk.id) for chunk in sparse.documents}:
        raise IndexLoadError(
            f"{version / RECORDS} and {version / BM25_DIR / BM25_DOCUMENTS} list "
            f"different chunks; {repair}"
        )
    return records, sparse, copy


@dataclass
class SalvagedVersion:
    """What could be read of the committed version, however damaged."""

    version: Path | None = None
    records: dict[str, dict[str, Any]] | None = None
    chunks: dict[str, Document] = field(default_factory=dict)
    chunks_complete: bool = False
    manifest_copy: dict[str, Any] | None = None
    problems: list[str] = field(default_factory=list)  # damage to the version's files
    notes: list[str] = field(default_factory=list)  # recovered without loss


def salvage_version(directory: Path, config: RagBudgetConfig) -> SalvagedVersion:
    """Whatever can be read of the sparse side, and what could not (for repair)."""
    read = SalvagedVersion()
    try:
        read.version, recovered = find_committed_version(directory, recover=False)
    except IndexLoadError as exc:
        read.problems.append(str(exc))
        return read
    if read.version is None:
        read.problems.append(f"{directory}: no committed BM25 version found")
        return read
    if recovered:
        read.notes.append(
            f"{directory / CURRENT} is missing or damaged; using {read.version.name}"
        )
    try:
        data = _read_json(read.version / RECORDS)
        listed = data["documents"]
        read.records = listed if isinstance(listed, dict) else None
        if isinstance(data.get("manifest"), dict):
            read.manifest_copy = data["manifest"]
    except (IndexLoadError, KeyError, TypeError) as exc:
        read.problems.append(f"{read.version / RECORDS}: {exc}")
    documents = read.version / BM25_DIR / BM25_DOCUMENTS
    read.chunks_complete = True
    try:
        lines = documents.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        lines = []
        if read.records is None or read.records:
            read.chunks_complete = False
            read.problems.append(f"{documents} is missing")
    except (OSError, UnicodeDecodeError) as exc:
        lines, read.chunks_complete = [], False
        read.problems.append(f"{documents}: {exc}")
    for number, line in enumerate(lines, start=1):
        try:
            row = json.loads(line)
            chunk = Document(
                page_content=row["page_content"], metadata=row["metadata"], id=row["id"]
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            read.chunks_complete = False
            read.problems.append(f"{documents}: line {number} is damaged")
            continue
        read.chunks[str(chunk.id)] = chunk
    if not read.problems:
        try:
            load_version(directory, read.version, config)
        except IndexLoadError as exc:
            read.problems.append(str(exc))
    return read


def move_damaged_version_aside(salvaged: SalvagedVersion) -> Path | None:
    """Move a version folder with damaged files to `damaged-<name>`; None if whole."""
    version = salvaged.version
    if not salvaged.problems or version is None or not version.is_dir():
        return None
    aside = version.parent / f"damaged-{version.name}"
    os.rename(version, aside)
    return aside


def bm25_as_configured(
    directory: Path, sparse: BM25Retriever | None, config: RagBudgetConfig
) -> BM25Retriever | None:
    """`sparse`, rebuilt in memory if it was saved with other BM25 settings.

    Otherwise a changed setting would be ignored until the next commit. The
    warning names the cost, since every open repeats it until then.
    """
    if sparse is None:
        return None
    wanted = bm25_settings(config)
    differ = {
        name: (getattr(sparse, name), value)
        for name, value in wanted.items()
        if getattr(sparse, name) != value
    }
    if not differ:
        return sparse
    started = time.perf_counter()
    rebuilt = BM25Retriever.from_config(config, documents=sparse.documents)
    logger.warning(
        "%s: its BM25 side was saved with %s, the configuration says %s; "
        "rebuilt in memory (%d chunks, %.1f s); the next write saves it "
        "(`ragbudget index` again: nothing is re-embedded)",
        directory,
        ", ".join(f"{name} {saved!r}" for name, (saved, _) in differ.items()),
        ", ".join(f"{name} {value!r}" for name, (_, value) in differ.items()),
        len(rebuilt.documents),
        time.perf_counter() - started,
    )
    return rebuilt


def publish_version(
    directory: Path,
    records: dict[str, dict[str, Any]],
    sparse: BM25Retriever | None,
    manifest: dict[str, Any],
) -> str:
    """Write a new version folder, then point CURRENT at it; returns its name."""
    version = f"sparse-{time.time_ns()}-{os.getpid()}"
    staging = directory / f".{version}.tmp"
    staging.mkdir(parents=True)
    try:
        if sparse is not None:
            sparse.save(staging / BM25_DIR)
        files = {
            item.relative_to(staging).as_posix(): item.stat().st_size
            for item in sorted(staging.rglob("*"))
            if item.is_file()
        }
        (staging / RECORDS).write_text(
            json.dumps(
                {
                    "format": FORMAT_VERSION,
                    "manifest": manifest,
                    "files": files,
                    "documents": records,
                }
            ),
            encoding="utf-8",
        )
    except BaseException:  # a full disk: give back the space the half version took
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish_folder(staging, directory / version)
    atomic_write_text(directory / CURRENT, version)
    remove_superseded(directory, directory / version)
    return version
