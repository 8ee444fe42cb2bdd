"""Reading a folder of files into source documents; no file is passed over in silence.

Every entry is read, skipped with a reason, or refused with an error for that file
alone (unreadable, undecodable, no PDF text layer, blank, a placeholder). A
document's title is the one its file gives, since it heads the passage's citation
in the prompt; the first line of the text is the last resort.
"""

from __future__ import annotations

import codecs
import errno
import fnmatch
import itertools
import os
import re
import stat
import unicodedata
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from langchain_core.documents import Document

from langchain_ragbudget.errors import InvalidInputError, require

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, PageElement, Tag

HTML_SUFFIXES = (".html", ".htm")
MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIXES = (".txt", *MARKDOWN_SUFFIXES, *HTML_SUFFIXES)
SUFFIXES = (*TEXT_SUFFIXES, ".pdf")
GZIP_SUFFIX = ".gz"
# Read as plain text by name, with any extension or none, gzipped or not: the files
# every package ships beside its code (`README`, `README.Debian`, `copyright`,
# `changelog.Debian.gz`, `TODO`). Not man pages (`ls.1.gz`: troff) nor any other
# gzip (`archive.gz` may hold anything).
PLAIN_NAMES = (
    *("AUTHORS", "BUGS", "CHANGELOG", "CHANGES", "CONTRIBUTING", "COPYING"),
    *("COPYRIGHT", "CREDITS", "FAQ", "HISTORY", "INSTALL", "LICENSE", "NEWS"),
    *("NOTICE", "README", "THANKS", "TODO"),
)
_PLAIN_NAME = re.compile(rf"(?:{'|'.join(PLAIN_NAMES)})(?:[._-].*)?", re.IGNORECASE)
GZIP_MAX_BYTES = 64 * 1024 * 1024  # decompressed: a gzip bomb is refused, not read
DEFAULT_ENCODINGS = ("utf-8",)
TITLE_CHARS = 200

# Why a file was skipped (expected, exit code 0), as shown in the ingest summary.
UNSUPPORTED = "unsupported type"
SYMLINK_LOOP = "symlink loop"
DANGLING_LINK = "dangling link"
NOT_A_FILE = "not a regular file"
EXCLUDED = "excluded by --exclude"


@dataclass(frozen=True)
class FileError:
    """A file that was not indexed (by document id), and why."""

    path: str
    problem: str


@dataclass(frozen=True)
class Skipped:
    """A file passed over on purpose: its path under the scanned folder, and why."""

    path: str
    reason: str
    detail: str = ""


@dataclass
class Scan:
    """Every entry under a scanned path: files to read, and files skipped (why)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def scan(root: Path, exclude: Sequence[str] = ()) -> Scan:
    """Sort every entry under `root` (a folder or one file) into files and skipped.

    Links are followed; loops and dangling links are skipped. `exclude` globs
    match each relative path and each name (a folder excludes all under it).
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
        elif inner_type(path) is None:
            out.skipped.append(Skipped(relative, UNSUPPORTED, _type_shown(path)))
        else:
            out.files.append(path)


def inner_type(path: Path) -> str | None:
    """The suffix `path` is read as (`x.md.gz` as `.md`, `README.Debian` as `.txt`).

    None for a file not read: neither a known suffix nor a plain-text name.
    """
    name = path.name
    suffix = path.suffix.lower()
    if suffix == GZIP_SUFFIX:
        name = path.stem
        suffix = Path(name).suffix.lower()
        if suffix in TEXT_SUFFIXES:
            return suffix
    elif suffix in SUFFIXES:
        return suffix
    if suffix in SUFFIXES:  # x.pdf.gz: not a text type
        return None
    return ".txt" if _PLAIN_NAME.fullmatch(name) else None


def _type_shown(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == GZIP_SUFFIX:
        suffix = Path(path.stem).suffix.lower() + suffix
    return suffix or "no extension"


def _skip_all(path: Path, relative: str, reason: str, detail: str, out: Scan) -> None:
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


@dataclass(frozen=True)
class FileText:
    """The text of one file, its title ("" if none) and an HTML page's headings.

    The headings are the h1-h6 texts in order: the chunker names sections by them.
    """

    text: str
    title: str = ""
    headings: tuple[str, ...] = ()


def read_file(path: Path, encodings: Sequence[str] = DEFAULT_ENCODINGS) -> FileText:
    """The text and title of one file.

    Args:
        path: The file; a `.gz` is read as its inner type.
        encodings: Tried in order until one decodes the whole text (latin-1
            decodes anything, so it can only come last).

    Raises:
        ValueError: Naming what is wrong with the file.
    """
    suffix = inner_type(path) or path.suffix.lower()
    if suffix == ".pdf":
        require("pypdf", "index", "reading PDF files")
        return _read_pdf(path)
    if suffix in HTML_SUFFIXES:
        require("bs4", "index", "reading HTML files")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from exc
    if path.suffix.lower() == GZIP_SUFFIX:
        raw = _gunzip(raw)
    check_not_binary(raw, encodings)
    text = decode(raw, encodings)
    if suffix in HTML_SUFFIXES:
        return html_to_text(text)
    if suffix in MARKDOWN_SUFFIXES:
        return FileText(text, markdown_title(text))
    return FileText(text)


def decode(raw: bytes, encodings: Sequence[str]) -> str:
    """`raw` decoded by the first of `encodings` that can; ValueError naming bytes."""
    failures: list[str] = []
    for encoding in encodings:
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError as exc:
            failures.append(f"{_encoding_shown(encoding)} text (byte {exc.start})")
    hint = "" if len(failures) > 1 else "; try --encoding utf-8,latin-1"
    raise ValueError(f"not {', nor '.join(failures)}{hint}")


def _encoding_shown(encoding: str) -> str:
    return "UTF-8" if codecs.lookup(encoding).name == "utf-8" else encoding


# What a file of a text type holds when it is not text, by its first bytes.
_MAGIC = (
    (b"\x7fELF", "an ELF executable"),
    (b"MZ\x90\x00", "a Windows executable"),
    (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
    (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "gzip data"),
    (b"\xfd7zXZ\x00", "xz data"),
    (b"(\xb5/\xfd", "zstd data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"SQLite format 3\x00", "an SQLite database"),
)
_WIDE_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_BE)


def check_not_binary(raw: bytes, encodings: Sequence[str]) -> None:
    """Refuse bytes that are not text in any encoding, whatever `encodings` say.

    latin-1 decodes any bytes, so decoding cannot tell an executable from a
    text; a known signature or a NUL byte can. NUL bytes are text only in
    UTF-16 and UTF-32, which must then be among `encodings`.

    Raises:
        ValueError: Naming what the bytes are, and no encoding to try.
    """
    for magic, what in _MAGIC:
        if raw.startswith(magic):
            raise ValueError(f"binary, not text ({what}): not indexed")
    nul = raw.find(b"\0")
    if nul < 0 or any(_is_wide(encoding) for encoding in encodings):
        return
    if raw.startswith(_WIDE_BOMS) and _decodes_wide(raw):
        raise ValueError(
            "UTF-16 or UTF-32 text (it starts with a byte-order mark); index it "
            "with --encoding utf-16 (or utf-32)"
        )
    raise ValueError(f"binary, not text (a NUL byte at byte {nul}): not indexed")


def _decodes_wide(raw: bytes) -> bool:
    for encoding in ("utf-16", "utf-32"):
        try:
            raw.decode(encoding)
        except UnicodeDecodeError:
            continue
        return True
    return False


def _is_wide(encoding: str) -> bool:
    return codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))


def check_encodings(encodings: Sequence[str]) -> tuple[str, ...]:
    """The encodings, checked before any file is read so a typo fails at once.

    Raises:
        InvalidInputError: No name, a name Python does not know, or a codec that
            does not turn bytes into text (rot13, base64, hex, bz2).
    """
    names = tuple(e.strip() for e in encodings if e.strip())
    if not names:
        raise InvalidInputError("--encoding names no encoding")
    for name in names:
        try:
            codecs.lookup(name)
        except LookupError:
            raise InvalidInputError(
                f"--encoding {name!r}: not an encoding Python knows (e.g. utf-8, "
                "latin-1, cp1252)"
            ) from None
        try:  # Python refuses a bytes-to-bytes codec here (not for b"")
            b"a".decode(name)
        except UnicodeDecodeError:  # a text encoding that cannot read one "a"
            pass
        except LookupError:
            raise InvalidInputError(
                f"--encoding {name!r}: not a text encoding (a codec that does "
                "not decode bytes into text); name a text encoding, e.g. utf-8, "
                "latin-1, cp1252"
            ) from None
    return names


def _gunzip(raw: bytes) -> bytes:
    """The decompressed bytes of every member of a gzip file, at most `GZIP_MAX_BYTES`.

    Concatenated members are one file (as `zcat` reads them); bytes after the
    last member that are not gzip make the file unreadable, not ignored.
    """
    members: list[bytes] = []
    size, rest = 0, raw
    while True:
        where = f" (member {len(members) + 1})" if members else ""
        inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer
        try:
            data = inflate.decompress(rest, GZIP_MAX_BYTES + 1 - size)
        except zlib.error as exc:
            raise ValueError(f"unreadable gzip{where}: {exc}") from exc
        size += len(data)
        if size > GZIP_MAX_BYTES:
            raise ValueError(
                f"gzip decompresses to over {GZIP_MAX_BYTES // 2**20} MiB; not read"
            )
        if not inflate.eof:
            raise ValueError(f"unreadable gzip{where}: truncated")
        members.append(data)
        rest = inflate.unused_data
        if not rest:
            return b"".join(members)
        if not rest.startswith(b"\x1f\x8b"):
            raise ValueError(
                f"unreadable gzip: {len(rest)} byte(s) after member {len(members)} "
                "are not gzip data (trailing garbage); not read"
            )


def _read_pdf(path: Path) -> FileText:
    from pypdf import PdfReader

    try:
        reader = PdfReader(str(path))
        text = "\n\n".join(page.extract_text() or "" for page in reader.pages)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from exc
    except Exception as exc:  # pypdf raises its own types for broken files
        raise ValueError(f"unreadable PDF: {type(exc).__name__}: {exc}") from exc
    if reader.pages and is_blank(text):  # pages, but not a character on them
        raise ValueError(
            f"no text layer (image-only PDF?): {len(reader.pages)} page(s) without "
            "extractable text; run OCR on it (e.g. ocrmypdf) to index it"
        )
    try:
        title = (reader.metadata.title if reader.metadata else None) or ""
    except Exception:  # a broken info dictionary costs the title, not the file
        title = ""
    return FileText(text, collapse_whitespace(str(title)))


def collapse_whitespace(text: str) -> str:
    """`text` with every run of whitespace (newlines too) made one space, trimmed."""
    return " ".join(text.split())


def html_to_text(markup: str) -> FileText:
    """The readable text of an HTML page, paragraph by paragraph, and its title.

    Block elements end a paragraph, inline ones never break a line, so a
    sentence stays on one; whitespace collapses as in a browser; `<pre>` keeps
    its lines. Scripts, styles, navigation and drawings are left out.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(markup, "html.parser")
    paragraphs = _Paragraphs()
    _walk_html(soup, paragraphs)
    headings = tuple(
        text
        for tag in soup.find_all(_HEADING_TAGS)
        if tag.find_parent(_DROPPED_TAGS) is None
        and (text := collapse_whitespace(tag.get_text()))
    )
    return FileText("\n\n".join(paragraphs.done), _html_title(soup), headings)


_BLOCK_TAGS = frozenset(
    {
        *("address", "article", "aside", "blockquote", "body", "caption", "center"),
        *("dd", "details", "dialog", "dir", "div", "dl", "dt", "fieldset"),
        *("figcaption", "figure", "footer", "form", "frameset", "header", "hgroup"),
        *("h1", "h2", "h3", "h4", "h5", "h6", "hr", "html", "legend", "li", "main"),
        *("menu", "ol", "p", "section", "summary", "table", "tbody", "tfoot"),
        *("thead", "tr", "ul"),
    }
)
_CELL_TAGS = frozenset({"td", "th"})
_HEADING_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_DROPPED_TAGS = frozenset(
    {"script", "style", "nav", "noscript", "template", "svg", "math"}
)
_CELL_SEPARATOR = " | "


class _Paragraphs:
    """Text gathered paragraph by paragraph; whitespace collapses when one ends."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self._lines: list[list[str]] = [[]]
        self._has_text = False

    def text(self, text: str) -> None:
        self._lines[-1].append(text)
        self._has_text = self._has_text or bool(text.strip())

    def cell(self) -> None:
        """A table cell starts: set apart from the cell before it in the row."""
        if self._has_text:
            self.text(_CELL_SEPARATOR)

    def line_break(self) -> None:
        self._lines.append([])

    def end(self) -> None:
        """End the paragraph (if it holds text); blank lines inside it go."""
        if self._has_text:
            lines = (collapse_whitespace("".join(parts)) for parts in self._lines)
            self.done.append("\n".join(line for line in lines if line))
        self._lines = [[]]
        self._has_text = False

    def preformatted(self, text: str) -> None:
        """A paragraph of its own with its lines kept; blank-line runs become one."""
        self.end()
        lines: list[str] = []
        for line in text.splitlines():
            line = line.rstrip()
            if line or (lines and lines[-1]):
                lines.append(line)
        while lines and not lines[-1]:
            lines.pop()
        if lines:
            self.done.append("\n".join(lines))


def _walk_html(root: Tag, out: _Paragraphs) -> None:
    """Feed the text under `root` to `out`, in document order.

    Iterative: deeply nested tags must not reach the recursion limit. A frame is
    (children left, whether leaving it ends a block, whether its strings are
    text). Whatever an unclosed `<title>` swallowed is still body text.
    """
    from bs4 import NavigableString, Tag

    frames: list[tuple[Iterator[PageElement], bool, bool]] = [
        (iter(root.contents), False, True)
    ]
    while frames:
        children, ends_block, keeps_text = frames[-1]
        child = next(children, None)
        if child is None:
            frames.pop()
            if ends_block:
                out.end()
        elif not isinstance(child, Tag):
            if keeps_text and type(child) is NavigableString:  # no comment, CDATA
                out.text(child)
        elif child.name == "br":
            out.line_break()
        elif child.name == "pre":
            out.preformatted(child.get_text())
        elif child.name not in _DROPPED_TAGS:
            if child.name in _CELL_TAGS:
                out.cell()
            block = child.name in _BLOCK_TAGS or child.name == "title"
            if block:
                out.end()
            frames.append((iter(child.contents), block, child.name != "title"))
    out.end()


def _html_title(soup: BeautifulSoup) -> str:
    """The `<title>`'s own text, else the first heading's, else ""."""
    from bs4 import NavigableString

    for title in soup.find_all("title"):
        if title.find_parent(_DROPPED_TAGS) is None:  # not an SVG's title
            own = (s for s in title.children if type(s) is NavigableString)
            text = collapse_whitespace("".join(own))
            if text:
                return text
    for heading in soup.find_all(_HEADING_TAGS):
        if heading.find_parent(_DROPPED_TAGS) is not None:  # in a menu, say
            continue
        lines = _Paragraphs()
        _walk_html(heading, lines)
        text = collapse_whitespace(" ".join(lines.done))
        if text:
            return text
    return ""


_FRONT_MATTER = re.compile(r"---[ \t\r]*\n(.*?)^(?:---|\.\.\.)[ \t\r]*$", re.S | re.M)


def markdown_title(text: str) -> str:
    """The title of a Markdown text: its front matter's `title`, else first heading.

    A CommonMark parser finds headings, so `# comment` in a code block is none.
    """
    from markdown_it import MarkdownIt

    body = text.removeprefix("\ufeff")
    front = _FRONT_MATTER.match(body)
    fields = _yaml_mapping(front.group(1)) if front is not None else None
    if front is not None and fields is not None:
        title = fields.get("title")
        if isinstance(title, str) and collapse_whitespace(title):
            return collapse_whitespace(title)
        body = body[front.end() :]
    tokens = MarkdownIt("commonmark").parse(body)
    for opening, inline in itertools.pairwise(tokens):
        if opening.type == "heading_open":
            parts = (
                " " if child.type.endswith("break") else child.content
                for child in inline.children or []
                if child.type in _TITLE_TOKENS
            )
            return collapse_whitespace("".join(parts))
    return ""


_TITLE_TOKENS = frozenset({"text", "code_inline", "image", "softbreak", "hardbreak"})


def _yaml_mapping(front_matter: str) -> dict[str, object] | None:
    """Front matter read as YAML of plain strings; None unless it is a mapping."""
    try:  # BaseLoader: every scalar a string, so no date or number can fail
        data = yaml.load(front_matter, Loader=yaml.BaseLoader)
    except (yaml.YAMLError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def is_blank(text: str) -> bool:
    """True when `text` shows nothing: only whitespace, control or format characters.

    `str.split()` alone misses zero-width spaces and the byte-order mark.
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


def load_file(
    path: Path,
    root: Path,
    doc_id: str | None = None,
    encodings: Sequence[str] = DEFAULT_ENCODINGS,
) -> Document:
    """One file as a document; id and source: `doc_id`, else its path under `root`."""
    if doc_id is None:
        relative = path.relative_to(root) if path != root else Path(path.name)
        doc_id = relative.as_posix()
    read = read_file(path, encodings)
    title = read.title or next(
        (line.strip("# ").strip() for line in read.text.splitlines() if line.strip()),
        "",
    )
    metadata: dict[str, object] = {
        "doc_id": doc_id,
        "source": doc_id,
        "title": title[:TITLE_CHARS],
    }
    if read.headings:  # the chunker turns them into each chunk's `section`
        metadata["headings"] = list(read.headings)
    return Document(id=doc_id, page_content=read.text, metadata=metadata)
