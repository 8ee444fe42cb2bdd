"""Titles that say where a passage comes from: the file's own, whitespace collapsed.

Real loaders (markdown-it-py, the standard library's HTML parser); files written
at test time.
"""

from pathlib import Path

import pytest

from langchain_ragbudget.index._loaders import load_file, markdown_title

MAN_PAGE = (
    "FIND(1)                     General Commands Manual                    FIND(1)\n"
    "\n"
    "NAME\n"
    "       find - search for files in a directory hierarchy\n"
)


def test_a_man_page_title_has_its_runs_of_spaces_collapsed(tmp_path: Path) -> None:
    path = tmp_path / "find.1.txt"
    path.write_text(MAN_PAGE)
    title = load_file(path, tmp_path).metadata["title"]
    assert title == "FIND(1) General Commands Manual FIND(1)"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        (
            '<h1 align="center">\n  <img src="logo.png" alt="">\n  RipTool\n</h1>\n\n'
            "<p>Fast search.</p>\n\n## Installation\n\nRun it.\n",
            "RipTool",
        ),
        (
            "<div>\n<h2>Tool &amp; <em>friends</em></h2>\n</div>\n\n# Later\n",
            "Tool & friends",
        ),
        ('<p align="center"><img src="x.png"></p>\n\n# Real title\n', "Real title"),
        ("```html\n<h1>In code</h1>\n```\n\n# Outside\n", "Outside"),
    ],
)
def test_a_markdown_file_opening_with_an_html_heading_is_titled_by_it(
    tmp_path: Path, text: str, title: str
) -> None:
    assert markdown_title(text) == title
    path = tmp_path / "README.md"
    path.write_text(text)
    assert load_file(path, tmp_path).metadata["title"] == title
