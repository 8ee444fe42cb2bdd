"""Reading a folder of files into source documents; no file is passed over in silence.

`scan` walks a folder (or takes one file) and sorts every entry it meets into files to
read and files skipped with a reason: an unsupported type, a symbolic-link loop, a
dangling link, something that is not a regular file, or a match of an `--exclude`
pattern. Text and Markdown are read as UTF-8, HTML through BeautifulSoup, PDF through
pypdf. A file that cannot be read, is not UTF-8, or whose text is empty, only
whitespace (including zero-width and other invisible characters) or only a
placeholder, is refused: an error for that file alone.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from langchain_core.documents import Document

from langchain_ragbudget.errors import require

SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")

# Why a file was skipped (expected, exit code 0), as shown in the ingest summary.
UNSUPPORTED = "unsupported type"
SYMLINK_LOOP = "symlink loop"
DANGLING_LINK = "dangling link"
NOT_A_FILE = "not a regular file"
EXCLUDED = "excluded by --exclude"


@dataclass(frozen=True)
class FileError:
    """A file that was not indexed, and why."""

    path: str
    problem: str


@dataclass(frozen=True)
class Skipped:
    """A file passed over on purpose; `reason` is one of the constants above."""

    path: str  # relative to the scanned folder, POSIX
    reason: str
    detail: str = ""


@dataclass
class Scan:
    """Every entry under a scanned path: files to read, and files skipped (why)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def scan(root: Path, exclude: Sequence[str] = ()) -> Scan:
    """Sort every entry under `root` (a folder or one file) into files and skipped.

    Symbolic links are followed; a link that points to a folder the walk is already
    inside (or to one holding `root`) is a loop and is skipped (named), as is a link
    to nothing. `exclude` holds
    glob patterns matched against each path relative to `root` and against each
    file or folder name (a matching folder excludes everything under it).
    """
    result = Scan()
    if not root.is_dir():
        result.files.append(root)
        return result
    real = Path(os.path.realpath(root))
    ancestors = {str(real), *(str(parent) for parent in real.parents)}
    _walk(root, root, ancestors, tuple(exclude), result)
    return result


def _walk(
    folder: Path, root: Path, ancestors: set[str], exclude: tuple[str, ...], out: Scan
) -> None:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as exc:
        relative = folder.relative_to(root).as_posix()
        out.skipped.append(Skipped(relative, NOT_A_FILE, f"cannot list: {exc}"))
        return
    for entry in entries:
        path = Path(entry.path)
        relative = path.relative_to(root).as_posix()
        pattern = _excluded(relative, entry.name, exclude)
        if pattern is not None:
            _skip_all(path, relative, EXCLUDED, f"--exclude {pattern!r}", out)
            continue
        try:
            status = path.stat()  # follows links
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                out.skipped.append(Skipped(relative, SYMLINK_LOOP, _target(path)))
            elif path.is_symlink():
                out.skipped.append(Skipped(relative, DANGLING_LINK, _target(path)))
            else:
                out.skipped.append(Skipped(relative, NOT_A_FILE, str(exc)))
            continue
        if path.is_dir():
            real = os.path.realpath(path)
            if real in ancestors:
                out.skipped.append(Skipped(relative, SYMLINK_LOOP, _target(path)))
                continue
            _walk(path, root, ancestors | {real}, exclude, out)
        elif not stat.S_ISREG(status.st_mode):
            out.skipped.append(Skipped(relative, NOT_A_FILE))
        elif path.suffix.lower() not in SUFFIXES:
            detail = path.suffix.lower() or "no extension"
            out.skipped.append(Skipped(relative, UNSUPPORTED, detail))
        else:
            out.files.append(path)


def _skip_all(path: Path, relative: str, reason: str, detail: str, out: Scan) -> None:
    """Record `path`, or every file under it when it is a folder, as skipped."""
    if path.is_dir() and not path.is_symlink():
        for below in sorted(path.rglob("*")):
            if below.is_symlink() or not below.is_dir():
                name = f"{relative}/{below.relative_to(path).as_posix()}"
                out.skipped.append(Skipped(name, reason, detail))
        return
    out.skipped.append(Skipped(relative, reason, detail))


def _excluded(relative: str, name: str, patterns: tuple[str, ...]) -> str | None:
    for pattern in patterns:
        if fnmatch.fnmatchcase(relative, pattern) or fnmatch.fnmatchcase(name, pattern):
            return pattern
    return None


def _target(path: Path) -> str:
    try:
        return f"-> {os.readlink(path)}"
    except OSError:
        return ""


def iter_files(root: Path) -> Iterator[Path]:
    """Supported files under `root` (or `root` itself), in a stable order."""
    yield from scan(root).files


def read_text(path: Path) -> str:
    """The text of one file; raises ValueError naming what is wrong with it."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        require("pypdf", "index", "reading PDF files")
    elif suffix in (".html", ".htm"):
        require("bs4", "index", "reading HTML files")
    try:
        if suffix == ".pdf":
            from pypdf import PdfReader

            reader = PdfReader(str(path))
            return "\n\n".join(page.extract_text() or "" for page in reader.pages)
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from exc
    except Exception as exc:  # pypdf raises its own types for broken files
        raise ValueError(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from exc
    if suffix in (".html", ".htm"):
        from bs4 import BeautifulSoup

        soup = BeautifulSoup(text, "html.parser")
        for tag in soup(["script", "style", "noscript"]):
            tag.decompose()
        text = soup.get_text(separator="\n")
    return text


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace, control or format characters.

    `str.split()` alone misses zero-width spaces, joiners and the byte-order mark
    (Unicode category Cf), which render as nothing and would index an empty passage.
    """
    return all(
        char.isspace() or unicodedata.category(char) in ("Cc", "Cf", "Zs")
        for char in text
    )


def check_content(text: str, placeholders: Sequence[str]) -> str | None:
    """Why `text` must not be indexed (empty, or only a placeholder), else None."""
    if not text.strip():
        return "empty: no text to index"
    if is_blank(text):
        return "empty: only whitespace or invisible characters"
    stripped = " ".join(text.split())
    if stripped.casefold().strip(".!…- ") in {p.casefold() for p in placeholders}:
        return f"only a placeholder ({stripped!r})"
    return None


def load_file(path: Path, root: Path, doc_id: str | None = None) -> Document:
    """One file as a document; id and source: `doc_id`, else its path under `root`."""
    if doc_id is None:
        relative = path.relative_to(root) if path != root else Path(path.name)
        doc_id = relative.as_posix()
    text = read_text(path)
    title = next(
        (line.strip("# ").strip() for line in text.splitlines() if line.strip()), ""
    )
    return Document(
        id=doc_id,
        page_content=text,
        metadata={"doc_id": doc_id, "source": doc_id, "title": title[:200]},
    )
