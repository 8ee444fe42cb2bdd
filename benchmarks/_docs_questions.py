"""A folder of this machine's documentation and questions about it, for benchmarks.

Man pages rendered to text and files from /usr/share/doc (with an extension,
gzipped, and by name: `copyright`, `AUTHORS`, `TODO`, `README.Debian`), copied
into a temporary folder at run time. Each answerable question carries a
phrase that `grep -F` finds in exactly the file that answers it; the check is run
before any number is printed, so a changed man page fails loudly, not quietly.
"""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

MAN_PAGES = (
    "grep",
    "tar",
    "find",
    "curl",
    "kill",
    "ls",
    "sort",
    "cp",
    "wc",
    "ln",
    "timeout",
    "chmod",
    "gzip",
    "xargs",
    "sed",
    "du",
    "df",
    "ps",
)
DOC_FILES = (
    "gzip/README.gz",
    "gzip/NEWS.gz",
    "zstd/README.md.gz",
    "procps/bugs.md",
    "python3-yaml/README.md",
    "diffutils/NEWS.gz",
    "dbus-daemon/README.gz",
    "yq/cli-doc.txt",
    "bash/README.gz",
    "coreutils/README.gz",
    "findutils/README.gz",
    "apt/changelog.gz",
    "bash/RBASH",
    "bash/copyright",
    "coreutils/AUTHORS",
    "coreutils/README.Debian",
    "findutils/TODO",
)


@dataclass(frozen=True)
class Question:
    """A question, and the phrase (None: unanswerable) the answer passage holds."""

    text: str
    answer: str | None = None
    file: str | None = None


QUESTIONS = (
    Question("Which option makes grep ignore case?", "-i, --ignore-case", "man/grep"),
    Question(
        "How do I make tar filter the archive through gzip?", "-z, --gzip", "man/tar"
    ),
    Question(
        "Which signal does kill send by default?",
        "The default signal for kill is TERM",
        "man/kill",
    ),
    Question("How do I make curl follow redirects?", "-L, --location", "man/curl"),
    Question(
        "How do I list hidden files that start with a dot with ls?",
        "do not ignore entries starting with",
        "man/ls",
    ),
    Question("How do I sort lines numerically?", "-n, --numeric-sort", "man/sort"),
    Question(
        "How do I count the lines in a file?", "print the newline counts", "man/wc"
    ),
    Question(
        "How do I create a symbolic link?",
        "make symbolic links instead of hard links",
        "man/ln",
    ),
    Question(
        "How can timeout kill a command that ignores the first signal?",
        "also send a KILL signal",
        "man/timeout",
    ),
    Question(
        "How do I show disk usage in human readable sizes?",
        "print sizes in human readable format",
        "man/du",
    ),
    Question(
        "How do I change permissions of a directory recursively?",
        "change files and directories recursively",
        "man/chmod",
    ),
    Question(
        "How do I make xargs read null-terminated input?",
        "Input items are terminated by a null character",
        "man/xargs",
    ),
    Question(
        "How do I edit a file in place with sed?", "edit files in place", "man/sed"
    ),
    Question("What dose of ibuprofen is safe for a child?"),
    Question("What is the capital of Australia?"),
    Question("How long should sourdough bread rise before baking?"),
    Question("Who won the 1998 football World Cup?"),
)


def build_folder(root: Path) -> Path:
    """Man pages as text and documentation files, in `root/docs`.

    A page or file this machine lacks is left out; the questions it answers are
    then left out by `usable_questions`.
    """
    docs = root / "docs"
    (docs / "man").mkdir(parents=True)
    env = {**os.environ, "MANWIDTH": "80", "MAN_KEEP_FORMATTING": "0"}
    for page in MAN_PAGES if shutil.which("man") and shutil.which("col") else ():
        shown = subprocess.run(
            ["man", "--no-hyphenation", "--no-justification", page],
            capture_output=True,
            check=False,
            env=env,
        )
        if shown.returncode == 0:
            plain = subprocess.run(
                ["col", "-bx"], input=shown.stdout, capture_output=True, check=True
            ).stdout
            (docs / "man" / f"{page}.txt").write_bytes(plain)
    for name in DOC_FILES:
        source = Path("/usr/share/doc") / name
        if source.is_file():
            target = docs / "doc" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
    return docs


def text_of(path: Path) -> str:
    data = path.read_bytes()
    return (gzip.decompress(data) if path.suffix == ".gz" else data).decode(
        "utf-8", "replace"
    )


def usable_questions(docs: Path) -> list[Question]:
    """The unanswerable questions, and each answerable one whose phrase is in its
    own file and nowhere else (grep first); a phrase found elsewhere stops the run.
    """
    texts = {
        str(p.relative_to(docs)): text_of(p) for p in docs.rglob("*") if p.is_file()
    }
    usable = []
    for question in QUESTIONS:
        if question.answer is None:
            usable.append(question)
            continue
        holders = [name for name, text in texts.items() if question.answer in text]
        if any(not name.startswith(str(question.file)) for name in holders):
            raise SystemExit(
                f"answer of {question.text!r} found in {holders}, "
                f"expected only {question.file}"
            )
        if holders:
            usable.append(question)
    return usable


def holds(text: str, phrase: str) -> bool:
    """Whether `text` holds `phrase`, blanks and line breaks folded."""
    return " ".join(phrase.split()) in " ".join(text.split())
