"""Reading a folder of files into source documents, one clear error per bad file.

Text and Markdown are read as UTF-8, HTML through BeautifulSoup, PDF through pypdf.
A file whose text is empty or only a placeholder is an error for that file alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_core.documents import Document

SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm", ".pdf")


@dataclass(frozen=True)
class FileError:
    """A file that was not indexed, and why."""

    path: str
    problem: str


def iter_files(root: Path) -> Iterator[Path]:
    """Supported files under `root` (or `root` itself), in a stable order."""
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix.lower() in SUFFIXES:
            yield path


def read_text(path: Path) -> str:
    """The text of one file; raises ValueError naming what is wrong with it."""
    suffix = path.suffix.lower()
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


def check_content(text: str, placeholders: Sequence[str]) -> str | None:
    """Why `text` must not be indexed (empty, or only a placeholder), else None."""
    stripped = " ".join(text.split())
    if not stripped:
        return "empty: no text to index"
    if stripped.casefold().strip(".!…- ") in {p.casefold() for p in placeholders}:
        return f"only a placeholder ({stripped!r})"
    return None


def load_file(path: Path, root: Path) -> Document:
    """One file as a source document with id and source = its path under `root`."""
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
