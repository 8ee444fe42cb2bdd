"""Headers that say where: each chunk records its nearest heading (Markdown, HTML,
Debian changelog entries) and its citation header names it. The real chunker,
loader and budget; no model."""

import bisect
import gzip
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.config._settings import IndexSettings, SurfaceSettings
from langchain_ragbudget.index._chunking import Chunker, make_chunker, section_starts
from langchain_ragbudget.index._loaders import load_file

pytestmark = pytest.mark.needs_tiktoken

ENTRY = (
    "{version} {dist}; urgency=medium\n\n"
    + "".join(
        f"  * {{version}} change {i}: fixes a crash in the parser.\n" for i in range(30)
    )
    + "\n -- Maintainer <m@example.org>  Mon, 01 Jan 2024 00:00:00 +0000\n\n"
)
CHANGELOG = "".join(
    ENTRY.replace("{version}", version).format(version=version, dist=dist)
    for version, dist in (
        ("bash (5.2.15-2)", "unstable"),
        ("bash (5.1~rc3-1)", "experimental"),
    )
)


def section_at(starts: Sequence[tuple[int, str]], offset: int) -> str | None:
    """The heading of the section holding `offset`, or None."""
    index = bisect.bisect_right([start for start, _ in starts], offset) - 1
    return starts[index][1] if index >= 0 else None


def chunks_of(text: str, **metadata: object) -> list[Document]:
    chunker = Chunker(IndexSettings(chunk_size=120, chunk_overlap=0))
    return chunker.split(Document(page_content=text, metadata=metadata), "doc")


def test_section_starts_markdown_changelog_and_code_fences() -> None:
    markdown = (
        "# Guide\n\nIntro.\n\n```\n# not a heading\n```\n## Install ##\n\nSteps.\n"
    )
    starts = section_starts(markdown)
    assert [heading for _, heading in starts] == ["Guide", "Install"]
    assert section_at(starts, markdown.index("# not")) == "Guide"
    assert section_at(starts, markdown.index("Steps")) == "Install"
    assert section_at(starts, 0) == "Guide"
    assert section_at(section_starts("no heading here"), 3) is None
    changelog = section_starts(CHANGELOG)
    assert [h for _, h in changelog] == ["bash (5.2.15-2)", "bash (5.1~rc3-1)"]
    assert section_starts("p53 (TP53) is a gene; it matters.") == []  # prose


def test_old_changelog_entries_are_not_titled_with_the_newest_version() -> None:
    chunks = chunks_of(CHANGELOG, title="bash (5.2.15-2) unstable", source="changelog")
    assert len(chunks) > 2
    for chunk in chunks:  # each entry's changes are named by their own version
        for version in ("bash (5.2.15-2)", "bash (5.1~rc3-1)"):
            if chunk.page_content.startswith((version, f"* {version}")):
                assert chunk.metadata["section"] == version
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=10, max_tokens=4000, encoding="cl100k_base")
    )
    old = next(c for c in chunks if c.metadata["section"] == "bash (5.1~rc3-1)")
    new = next(c for c in chunks if c.metadata["section"] == "bash (5.2.15-2)")
    headers = [  # alone, each passage's header names its entry
        line
        for chunk in (new, old)
        for line in budget.fit([chunk]).text.splitlines()
        if line.startswith("[")
    ]
    assert headers == [
        "[1] changelog | bash (5.2.15-2) unstable § bash (5.2.15-2)",
        "[1] changelog | bash (5.2.15-2) unstable § bash (5.1~rc3-1)",
    ]
    together = budget.fit([new, old]).text.splitlines()  # one document, one number
    assert [line for line in together if line.startswith("[")] == [
        "[1] changelog | bash (5.2.15-2) unstable"  # no one section is true of both
    ]


def test_html_headings_name_the_sections(tmp_path: Path) -> None:
    pytest.importorskip("bs4")
    body = "".join(
        f"<h2>Part {n}</h2>"
        + "".join(f"<p>Sentence {i} of part {n}.</p>" for i in range(40))
        for n in (1, 2)
    )
    page = tmp_path / "guide.html"
    page.write_text(
        f"<html><head><title>Guide</title></head><body>{body}</body></html>"
    )
    document = load_file(page, tmp_path)
    assert document.metadata["headings"] == ["Part 1", "Part 2"]
    chunks = chunks_of(document.page_content, **document.metadata)
    assert all("headings" not in c.metadata for c in chunks)  # not stored per chunk
    assert {c.metadata["section"] for c in chunks} == {"Part 1", "Part 2"}
    for chunk in chunks:
        if (
            "of part 2." in chunk.page_content
            and "of part 1." not in chunk.page_content
        ):
            assert chunk.metadata["section"] == "Part 2"


def test_a_chunk_without_a_heading_has_no_section_and_the_header_is_unchanged() -> None:
    (chunk,) = chunks_of("Plain text without headings.", source="notes.txt")
    assert "section" not in chunk.metadata
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=1, max_tokens=400, encoding="cl100k_base")
    )
    assert budget.fit([chunk]).text.splitlines()[0] == "[1] notes.txt"


def default_chunks(document: Document) -> list[Document]:
    return make_chunker(IndexSettings()).split(document, "doc")


def header_lines(chunks: Sequence[Document]) -> list[str]:
    budget = ContextBudget(
        settings=SurfaceSettings(max_docs=50, max_tokens=50_000, encoding="cl100k_base")
    )
    text = budget.fit(list(chunks)).text
    return [line for line in text.splitlines() if line.startswith("[")]


def test_the_default_chunker_records_sections_and_headers_show_them() -> None:
    text = (
        "# Guide\n\nRead this first.\n\n## Install\n\nRun the installer. Then reboot.\n"
    )
    chunks = default_chunks(Document(page_content=text, metadata={"source": "g.md"}))
    assert [c.metadata.get("section") for c in chunks] == ["Guide", "Install"]
    assert [header_lines([chunk]) for chunk in chunks] == [
        ["[1] g.md § Guide"],
        ["[1] g.md § Install"],
    ]
    assert header_lines(chunks) == ["[1] g.md"]  # one number per document


OPENSSH = "".join(
    f"openssh (1:{version}) unstable; urgency=medium\n\n"
    + "".join(f"  * {change} in {version}.\n" for change in changes)
    + f"\n -- Colin Watson <cjwatson@debian.org>  {date}\n\n"
    for version, date, changes in (
        ("9.2p1-2", "Thu, 09 Feb 2023 10:00:00 +0000", ["Fix a crash"] * 40),
        ("8.5p1-1", "Wed, 03 Mar 2021 10:00:00 +0000", ["Add sntrup761"] * 40),
    )
)


def test_a_changelog_chunk_is_titled_by_the_entry_it_quotes(tmp_path: Path) -> None:
    path = tmp_path / "changelog.Debian.gz"
    path.write_bytes(gzip.compress(OPENSSH.encode()))
    document = load_file(path, tmp_path)
    assert document.metadata["title"] == "openssh"  # not the newest entry
    old = [c for c in default_chunks(document) if "in 8.5p1-1" in c.page_content]
    assert old and all(c.metadata["section"] == "openssh (1:8.5p1-1)" for c in old)
    (header,) = header_lines(old[:1])
    assert header == "[1] changelog.Debian.gz | openssh § openssh (1:8.5p1-1)"
