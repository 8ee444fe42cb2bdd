"""Files to text and titles: HTML keeps its shape, every format gives its own title.

Real parsers throughout: BeautifulSoup (html.parser), markdown-it-py, pypdf.
"""

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from pdf_files import minimal_pdf
from pypdf import PdfReader, PdfWriter

from langchain_ragbudget.index._loaders import html_to_text, load_file, markdown_title

MESSY_PAGE = (
    """<!DOCTYPE html>
<html><head><title>  Refund
   policy &amp; terms </title>
<style>p { color: red }</style><script>var note = "<p>not text</p>";</script>
</head><body>
<nav><h2>Menu</h2><a href="/">Home</a> | <a href="/about">About</a></nav>
<h1>Refunds</h1>
<p>Refunds are paid within <b>90&nbsp;days</b> of a
   <a href="/claims"><em>written</em> claim</a>, see <code>policy.md</code>.</p>
"""
    + "\n" * 40
    + """<div>   Claims go to
<span>the <i>finance</i></span> team.<br>Call ext. 1234.</div>
<ul><li>Receipts</li><li>Bank <b>details</b></li></ul>
<table><tr><th>Amount</th><th>Days</th></tr><tr><td>&lt; 100</td><td>30</td></tr>
</table>
<pre>step 1:
    fill in the form



step 2: wait</pre>
<!-- a comment --><noscript>Enable JavaScript</noscript>
<p>Text that looks like markup: &lt;script&gt;alert(1)&lt;/script&gt;</p>
</body></html>"""
)

MESSY_TEXT = """Refunds

Refunds are paid within 90 days of a written claim, see policy.md.

Claims go to the finance team.
Call ext. 1234.

Receipts

Bank details

Amount | Days

< 100 | 30

step 1:
    fill in the form

step 2: wait

Text that looks like markup: <script>alert(1)</script>"""


def test_html_keeps_paragraphs_and_sentences_whole() -> None:
    page = html_to_text(MESSY_PAGE)
    assert page.text == MESSY_TEXT
    assert page.title == "Refund policy & terms"


def test_unclosed_tags_lose_no_text() -> None:
    # html.parser nests what follows an unclosed tag inside it
    page = html_to_text("<title>Notes<p>First <b>point<p>Second point<div>Third")
    assert page.title == "Notes"
    assert page.text == "First point\n\nSecond point\n\nThird"


def test_an_unclosed_script_hides_what_follows_as_a_browser_does() -> None:
    page = html_to_text("<p>Before.</p><script>let a = '<p>x</p>';<p>After.</p>")
    assert page.text == "Before."


def test_deeply_nested_inline_tags_stay_one_sentence() -> None:
    depth = 3_000  # past Python's recursion limit
    markup = "<p>" + "<span>" * depth + "Deep text." + "</span>" * depth + " End.</p>"
    assert html_to_text(markup).text == "Deep text. End."


def test_a_whitespace_flood_collapses() -> None:
    markup = "<div>" + "\n \t" * 50_000 + "a" + "<p> </p>\n" * 10_000 + "b</div>"
    assert html_to_text(markup).text == "a\n\nb"


FRAGMENTS = st.sampled_from(
    [
        "<p>", "</p>", "<div>", "</div>", "<span>", "</span>", "<b>", "</b>",
        "<br>", "<li>", "<tr><td>", "</td><td>", "<pre>", "</pre>", "<h2>",
        "</h2>", "<script>", "</script>", "<!-- c -->", "&amp;", "&nbsp;",
        "word", "two words", " ", "\n", "\n\n\n", "\t",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(FRAGMENTS, max_size=40))
def test_no_blank_runs_and_no_ragged_lines(fragments: list[str]) -> None:
    text = html_to_text("".join(fragments)).text
    assert "\n\n\n" not in text
    assert text == text.rstrip() and not text.startswith("\n")
    if "<pre>" not in fragments:  # <pre> keeps its lines' indentation
        assert text == text.strip()
        assert all(line == line.strip() for line in text.splitlines())
        assert all("  " not in line for line in text.splitlines())


def test_html_title_falls_back_to_the_first_heading_outside_menus() -> None:
    page = html_to_text(
        "<title> </title><svg><title>Icon</title></svg><nav><h1>Menu</h1></nav>"
        "<h2></h2><h2>Install <code>pip</code><br>today</h2><h1>Later</h1>"
    )
    assert page.title == "Install pip today"
    assert html_to_text("<p>No heading here</p>").title == ""


def test_markdown_title_is_the_first_real_heading() -> None:
    assert markdown_title("Intro line\n\n## Setup *fast*\n# Later") == "Setup fast"
    fenced = "```bash\n# a shell comment\n```\nInstall `pip` [now](x)\n===\n"
    assert markdown_title(fenced) == "Install pip now"
    assert markdown_title("#hashtag, not a heading\n\nplain") == ""


def test_markdown_front_matter_title_wins_and_is_skipped_otherwise() -> None:
    text = (
        "\ufeff---\r\ntitle: '  Release   notes '\r\ndate: 2024-13-45\r\n---\r\n# 1.0"
    )
    assert markdown_title(text) == "Release notes"
    assert markdown_title("---\nauthor: ann\n---\n# Changelog") == "Changelog"
    assert markdown_title("---\ntitle: [a, b]\n---\n# Real") == "Real"
    # a thematic break, not front matter: the heading between the rules counts
    assert markdown_title("---\n# Title\n---\ntext") == "Title"


def test_pdf_title_comes_from_its_metadata(tmp_path: Path) -> None:
    plain = tmp_path / "plain.pdf"
    plain.write_bytes(minimal_pdf("Refunds are paid within 90 days."))
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.add_metadata({"/Title": "Refund\n policy"})
    titled = tmp_path / "titled.pdf"
    with titled.open("wb") as out:
        writer.write(out)
    assert load_file(titled, tmp_path).metadata["title"] == "Refund policy"
    # no metadata title: the first line of the text
    first_line = "Refunds are paid within 90 days."
    assert load_file(plain, tmp_path).metadata["title"] == first_line


def test_titles_per_format_through_load_file(tmp_path: Path) -> None:
    files = {
        "page.html": "<html><head><title>Handbook</title></head><p>Body</p></html>",
        "bare.html": "<p>First paragraph</p><p>Second</p>",
        "guide.md": "Some intro\n\n## Getting started\n",
        "PKG-INFO.txt": "Metadata-Version: 2.3\nName: pip\n",
        "long.md": "# " + "x" * 500,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    titles = {
        name: load_file(tmp_path / name, tmp_path).metadata["title"] for name in files
    }
    assert titles == {
        "page.html": "Handbook",
        "bare.html": "First paragraph",
        "guide.md": "Getting started",
        "PKG-INFO.txt": "Metadata-Version: 2.3",
        "long.md": "x" * 200,
    }
