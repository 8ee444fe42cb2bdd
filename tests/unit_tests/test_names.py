"""Names that look alike: no two ids or sources render the same anywhere we show them.

Each pair below holds two different values a reader cannot tell apart once printed
naively. Each is rendered as an id and as a source through the real budget, the
real warning writer, the real rich table and the real notebook HTML, and what a
reader sees (`seen`: bidi overrides applied, invisible characters gone, NFC,
blanks folded as a browser and a terminal fold them) must differ. `display_name`
itself is checked to be injective (a decoder recovers every value), one line, and
within its limit. RELIABILITY.md's "Names that look alike" table lists every pair.
"""

import html
import io
import re
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget.budget._context_budget import BudgetedContext, ContextBudget
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.cli._views import rich_evidence_table
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.ledger._names import HASH_HEX, NOT_NFC, display_name

LONG = "https://example.org/archive/" + "section/" * 30 + "page-"

# id -> (value, look-alike). Homoglyphs (Latin "a", Cyrillic "\u0430") are out of
# scope: both are letters, drawn alike on purpose (see RELIABILITY.md).
LOOK_ALIKES: dict[str, tuple[str, str]] = {
    "name-nfc-nfd": ("caf\u00e9.md", "cafe\u0301.md"),
    "name-trailing-space": ("notes.md", "notes.md "),
    "name-leading-space": ("notes.md", " notes.md"),
    "name-zero-width-space": ("notes.md", "no\u200btes.md"),
    "name-rlo-fake-extension": ("invoiceexe.pdf", "invoice\u202efdp.exe"),
    "name-long-urls-differ-at-end": (LONG + "1", LONG + "2"),
    "name-lrm": ("notes.md", "notes.md\u200e"),
    "name-soft-hyphen": ("notes.md", "no\u00adtes.md"),
    "name-tab-vs-space": ("my notes.md", "my\tnotes.md"),
    "name-cr-vs-space": ("my notes.md", "my\rnotes.md"),
    "name-nbsp-vs-space": ("my notes.md", "my\u00a0notes.md"),
    "name-bom": ("notes.md", "\ufeffnotes.md"),
    "name-escape-written-out": ("no\u200btes.md", "no\\u200btes.md"),
}

_RLO_RUN = re.compile("\u202e([^\u202c\n]*)\u202c?")


def seen(text: str) -> str:
    """What a reader sees: RLO runs reversed, invisibles gone, NFC, blanks folded."""
    text = _RLO_RUN.sub(lambda m: m.group(1)[::-1], text)
    text = "".join(c for c in text if unicodedata.category(c) != "Cf")
    text = unicodedata.normalize("NFC", html.unescape(text))
    text = re.sub(r"\s*(<[^>]*>)\s*", r"\1", text)
    return " ".join(text.split())


def budget(max_tokens: int = 4000) -> ContextBudget:
    return ContextBudget(
        settings=SurfaceSettings(
            max_docs=10, max_tokens=max_tokens, encoding="cl100k_base"
        )
    )


def as_source(name: str) -> BudgetedContext:
    doc = Document(id="p1", page_content="Alpha.", metadata={"source": name})
    return budget().fit([doc])


def as_dropped_id(name: str) -> BudgetedContext:
    """`name` is the id of a passage that out-ranks a kept one and is dropped."""
    big = Document(id=name, page_content="word " * 200, metadata={"source": "s.md"})
    first = Document(id="k1", page_content="Tiny.", metadata={"source": "t.md"})
    last = Document(id="k2", page_content="Small.", metadata={"source": "u.md"})
    return budget(max_tokens=60).fit([first, big, last])


def table_text(context: BudgetedContext) -> str:
    console = Console(record=True, width=120, color_system=None, file=io.StringIO())
    console.print(rich_evidence_table(context)[0])
    return console.export_text()


def header(context: BudgetedContext) -> str:
    lines = [line for line in context.text.split("\n") if line.startswith("[1]")]
    assert len(lines) == 1, context.text
    return lines[0]


def warning(context: BudgetedContext) -> str:
    lines = [w for w in context_warnings(context) if "likely lost" in w]
    assert len(lines) == 1, context_warnings(context)
    return lines[0]


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("case", LOOK_ALIKES)
def test_look_alike_sources_differ_in_header_table_and_html(case: str) -> None:
    first, second = (as_source(name) for name in LOOK_ALIKES[case])
    assert seen(header(first)) != seen(header(second))
    assert seen(table_text(first)) != seen(table_text(second))
    assert seen(first._repr_html_()) != seen(second._repr_html_())
    for context in (first, second):  # one header line, whatever the name holds
        assert context.text.splitlines()[1:] == ["> Alpha.", ""]


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("case", LOOK_ALIKES)
def test_look_alike_ids_differ_in_warning_table_and_html(case: str) -> None:
    first, second = (as_dropped_id(name) for name in LOOK_ALIKES[case])
    assert seen(warning(first)) != seen(warning(second))
    assert seen(table_text(first)) != seen(table_text(second))
    assert seen(first.report._repr_html_()) != seen(second.report._repr_html_())
    for context in (first, second):
        assert all(len(w.splitlines()) == 1 for w in context_warnings(context))


@pytest.mark.needs_tiktoken
def test_rich_markup_in_a_name_is_shown_as_written() -> None:
    text = table_text(as_source("[bold red]x.md[/bold red]"))
    assert "[bold red]x.md[/bold red]" in text


# --- display_name itself --------------------------------------------------------------

_HEX = {"x": 2, "u": 4, "U": 8}
_SHORT = {"t": "\t", "n": "\n", "r": "\r"}


def decode(shown: str) -> str:
    """The value `display_name(value, None)` was made from (the inverse)."""
    if shown.endswith(NOT_NFC):
        shown = shown[: -len(NOT_NFC)]
    out, i = [], 0
    while i < len(shown):
        char, nxt = shown[i], shown[i + 1 : i + 2]
        if char == "\\" and nxt == "\\":
            out.append("\\")
            i += 2
        elif char == "\\" and nxt in _SHORT:
            out.append(_SHORT[nxt])
            i += 2
        elif char == "\\" and nxt in _HEX:
            digits = shown[i + 2 : i + 2 + _HEX[nxt]]
            if re.fullmatch(f"[0-9a-f]{{{_HEX[nxt]}}}", digits):
                out.append(chr(int(digits, 16)))
                i += 2 + len(digits)
            else:
                out.append(char)
                i += 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


_NAMES = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from(["\\", "u", "x", "0", "2", "e", "[", "…", " ", "\u0301"]),
        st.sampled_from(["\u202e", "\u200b", "\u00ad", "\t", "\r", "\n", "\u2028"]),
    ),
    max_size=40,
) | st.sampled_from(
    ["a [not NFC]", "…[sha:0123456789]…", "[sha:0123456789]", "\\u202e", "a\\", " a"]
)


@given(_NAMES)
def test_display_name_is_injective_and_one_visible_line(value: str) -> None:
    shown = display_name(value, None)
    assert decode(shown) == value
    assert shown.endswith(NOT_NFC) == (not unicodedata.is_normalized("NFC", value))
    assert len(shown.splitlines()) <= 1
    assert shown == shown.strip()
    assert all(
        unicodedata.category(c) not in {"Cc", "Cf", "Cs", "Zl", "Zp"} for c in shown
    )


@given(_NAMES, _NAMES, st.integers(min_value=40, max_value=90))
def test_shortened_names_keep_both_ends_and_differ(
    first: str, second: str, limit: int
) -> None:
    a, b = display_name(LONG + first, limit), display_name(LONG + second, limit)
    assert len(a) <= limit and len(b) <= limit
    assert a.startswith("https://") and "…[sha:" in a
    assert a.count("[sha:") == 1
    assert re.search(rf"…\[sha:[0-9a-f]{{{HASH_HEX}}}\]…", a)
    assert (a == b) == (first == second)


def test_a_limit_too_small_for_the_marker_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 40"):
        display_name("x" * 100, 20)


def test_every_pair_is_in_reliability_md_and_nothing_else() -> None:
    text = (Path(__file__).resolve().parents[2] / "RELIABILITY.md").read_text()
    section = text.split("### Names that look alike", 1)[1].split("\n#", 1)[0]
    listed = re.findall(r"^\| `(name-[a-z0-9-]+)` \|", section, re.MULTILINE)
    assert sorted(listed) == sorted(LOOK_ALIKES)
