"""`ragbudget index` over this machine's own documentation: every file accounted for.

A folder built at test time from /usr/share/doc (by-name files such as
`copyright`, `README.Debian`, `AUTHORS`, with and without `.gz`, and HTML pages),
man pages rendered to text by `man`, a real executable under a text name, an empty
file and an empty by-name file. After `index`, `inspect --documents --json` must
name every file exactly once, indexed or with the reason it was not, and no
by-name file may be skipped. Real parts throughout (bm25s, embedded Chroma,
fastembed ONNX); parts of the folder this machine lacks are skipped with a reason.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from langchain_ragbudget.cli._main import main
from langchain_ragbudget.index._loaders import PLAIN_NAMES

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]

DOC = Path("/usr/share/doc")
PER_NAME = 3  # files copied for each by-name pattern
SMALL = 12_000  # bytes of text at most per copied file, to keep embedding short
BY_NAME_PATTERNS = (
    *("copyright", "README", "README.Debian", "AUTHORS", "TODO", "FAQ", "NEWS"),
    *("THANKS", "BUGS", "changelog.Debian.gz", "NEWS.Debian.gz", "README.gz"),
    *("AUTHORS.gz", "THANKS.gz", "TODO.gz", "changelog.gz", "README.Debian.gz"),
)
MAN_PAGES = ("ls", "find", "grep", "gzip")


def small_text(path: Path) -> bool:
    """A regular file whose text (decompressed) is short."""
    if path.is_symlink() or not path.is_file():
        return False
    try:
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else None
    except (OSError, EOFError):
        return False
    size = len(data) if data is not None else path.stat().st_size
    return 0 < size <= SMALL


def found_by_name(pattern: str) -> Iterator[Path]:
    for package in sorted(DOC.iterdir()):
        candidate = package / pattern
        if small_text(candidate):
            yield candidate


def build_folder(folder: Path) -> list[str]:
    """Copy this machine's documentation into `folder`; the by-name files' ids."""
    by_name: list[str] = []
    for pattern in BY_NAME_PATTERNS:
        for source in list(found_by_name(pattern))[:PER_NAME]:
            target = folder / source.parent.name / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            by_name.append(target.relative_to(folder).as_posix())
    pages = sorted(p for p in DOC.rglob("*.html") if small_text(p))[:4]
    for page in pages:
        target = folder / "html" / f"{page.parent.name}-{page.name}"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(page, target)
    (folder / "bin").mkdir()
    shutil.copyfile(Path(sys.executable).resolve(), folder / "bin" / "python.txt")
    (folder / "empty.txt").write_text("", "utf-8")
    (folder / "bin" / "TODO").write_text("", "utf-8")  # by name, but empty
    return by_name


def render_man_pages(folder: Path) -> int:
    """Man pages as `man` prints them to a pipe; the count rendered."""
    if shutil.which("man") is None:
        return 0
    rendered = 0
    (folder / "man").mkdir()
    for page in MAN_PAGES:
        shown = subprocess.run(
            ["man", "-P", "cat", page],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": ""},
        )
        text = re.sub(".\b", "", shown.stdout)  # any overstrike left: plain text
        if shown.returncode == 0 and text.strip():
            (folder / "man" / f"{page}.1.txt").write_text(text, "utf-8")
            rendered += 1
    return rendered


def every_file(folder: Path) -> list[str]:
    return sorted(
        p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()
    )


def test_every_documentation_file_is_indexed_or_named_with_its_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if not DOC.is_dir():
        pytest.skip(f"{DOC} is not on this machine")
    folder = tmp_path / "doc"
    folder.mkdir()
    by_name = build_folder(folder)
    if len(by_name) < 10:
        pytest.skip(f"{DOC} holds only {len(by_name)} small by-name files")
    gzipped = [name for name in by_name if name.endswith(".gz")]
    plain = [name for name in by_name if not name.endswith(".gz")]
    assert gzipped and plain, by_name
    rendered = render_man_pages(folder)
    ix = str(tmp_path / "ix")
    code = main(["index", str(folder), "--index", ix])
    assert code == 1, capsys.readouterr().out  # the executable: a new refusal
    capsys.readouterr()
    assert main(["inspect", "--documents", "--json", "--index", ix]) == 0
    files = json.loads(capsys.readouterr().out)["files"]
    indexed = [entry["id"] for entry in files["indexed"]]
    skipped = {entry["id"]: entry["reason"] for entry in files["skipped"]}
    refused = {entry["id"]: entry["problem"] for entry in files["refused"]}
    assert sorted([*indexed, *skipped, *refused]) == every_file(folder)
    assert set(by_name) <= set(indexed), set(by_name) - set(indexed)
    assert refused["bin/python.txt"].startswith("binary, not text (an ELF")
    assert refused["empty.txt"] == refused["bin/TODO"] == "empty: no text to index"
    assert not skipped, skipped
    assert all(
        name.split("/")[-1].split(".")[0].upper() in PLAIN_NAMES for name in by_name
    )
    man = [name for name in indexed if name.startswith("man/")]
    assert len(man) == rendered, "every rendered man page is indexed"
    assert [n for n in indexed if n.startswith("html/")], "no HTML page indexed"
    if rendered == 0:
        pytest.skip("`man` is not on this machine: no man page was rendered")
