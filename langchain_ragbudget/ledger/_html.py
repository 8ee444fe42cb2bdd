"""HTML for notebook displays (`_repr_html_`), escaped in one place.

Every value that is not `Markup` made here goes through `html.escape` (quotes
included), so a passage holding `<script>` shows as text; no value from data lands
in an attribute or the style sheet. Stdlib only, so the lowest layer can use it.
Row colours are translucent so they read on light and dark themes; a status column
says the same in words.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence

PREVIEW_CHARS = 80  # of a folded text's one-line summary
_SURROGATE = re.compile("[\ud800-\udfff]")
ROOT_CLASS = "ragbudget"

# Selectors start `.ragbudget.ragbudget` to out-rank JupyterLab's
# `:not(.jp-RenderedMarkdown).jp-RenderedHTMLCommon td` (right-aligned cells,
# fixed layout) whatever the order of the style sheets
# (tests/integration_tests/test_jupyterlab_display.py). Cell backgrounds, not row
# backgrounds, paint over JupyterLab's own row stripes. Only passage texts wrap.
_STYLE = """<style>
.ragbudget.ragbudget table { border-collapse: collapse; margin: 0.3em 0 0.9em;
  table-layout: auto; width: auto; }
.ragbudget.ragbudget table caption { text-align: left; font-weight: bold;
  padding: 0.2em 0; }
.ragbudget.ragbudget table th, .ragbudget.ragbudget table td {
  text-align: left; vertical-align: top; padding: 0.2em 0.5em;
  border: 1px solid rgba(128, 128, 128, 0.35); white-space: normal;
  overflow-wrap: normal; word-break: normal; hyphens: none; max-width: none;
}
.ragbudget.ragbudget table td.rb-num { text-align: right; white-space: nowrap;
  font-variant-numeric: tabular-nums; }
.ragbudget.ragbudget table tr.rb-kept > td { background: rgba(46, 160, 67, 0.14); }
.ragbudget.ragbudget table tr.rb-shortened > td {
  background: rgba(210, 153, 34, 0.20); }
.ragbudget.ragbudget table tr.rb-dropped > td { background: rgba(248, 81, 73, 0.14); }
.ragbudget.ragbudget .rb-text { white-space: pre-wrap; max-width: 60em;
  text-align: left; }
.ragbudget.ragbudget .rb-warning { border-left: 3px solid rgba(210, 153, 34, 0.9);
  padding-left: 0.5em; margin: 0.2em 0; white-space: pre-wrap; text-align: left; }
.ragbudget.ragbudget details > summary { cursor: pointer; text-align: left; }
</style>"""


class Markup(str):
    """HTML built by this module: inserted as it is; any other `str` is escaped."""


def escape(value: object) -> Markup:
    """`value` as HTML text (quotes escaped); Markup kept.

    A lone surrogate cannot travel in the notebook's UTF-8 JSON: it shows as U+FFFD.
    """
    if isinstance(value, Markup):
        return value
    text = value if isinstance(value, str) else str(value)
    text = _SURROGATE.sub("\ufffd", text)
    return Markup(html.escape(text, quote=True))


def element(tag: str, content: object, css_class: str = "") -> Markup:
    """`<tag class="css_class">content</tag>`; `tag` and `css_class` never from data."""
    attribute = f' class="{escape(css_class)}"' if css_class else ""
    return Markup(f"<{tag}{attribute}>{escape(content)}</{tag}>")


def join(parts: Iterable[object]) -> Markup:
    """The parts one after another, each escaped unless it is Markup."""
    return Markup("".join(escape(part) for part in parts))


def collapsible(text: str) -> Markup:
    """`text` whole when short, else folded behind a one-line preview."""
    flat = " ".join(text.split())
    if len(text) <= PREVIEW_CHARS and flat == text:
        return escape(text)
    shown = flat[:PREVIEW_CHARS].rstrip() + ("…" if len(flat) > PREVIEW_CHARS else "")
    return Markup(
        f"<details><summary>{escape(shown)}</summary>"
        f"{element('div', text, 'rb-text')}</details>"
    )


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[object]],
    *,
    caption: str = "",
    row_classes: Sequence[str] | None = None,
    numeric: Iterable[int] = (),
    drop_empty: bool = False,
) -> Markup:
    """A table; every cell escaped unless it is Markup.

    `numeric` columns align right; `drop_empty` leaves out columns whose every
    cell is empty or `-`.

    Raises:
        ValueError: A row's length differs from `headers`, or `row_classes`
            does not have one class per row.
    """
    if row_classes is not None and len(row_classes) != len(rows):
        raise ValueError(f"{len(row_classes)} row classes for {len(rows)} rows")
    for i, row in enumerate(rows):
        if len(row) != len(headers):
            raise ValueError(f"row {i} has {len(row)} cells for {len(headers)} columns")
    right = set(numeric)
    if drop_empty and rows:
        keep = [j for j in range(len(headers)) if any(_filled(r[j]) for r in rows)]
        right = {keep.index(j) for j in right if j in keep}
        headers = [headers[j] for j in keep]
        rows = [[row[j] for j in keep] for row in rows]
    head = "".join(f"<th>{escape(name)}</th>" for name in headers)
    body = []
    for i, row in enumerate(rows):
        cells = "".join(
            element("td", cell, "rb-num" if j in right else "")
            for j, cell in enumerate(row)
        )
        css = f' class="{escape(row_classes[i])}"' if row_classes else ""
        body.append(f"<tr{css}>{cells}</tr>")
    title = f"<caption>{escape(caption)}</caption>" if caption else ""
    return Markup(
        f"<table>{title}<thead><tr>{head}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _filled(cell: object) -> bool:
    return not (isinstance(cell, str) and cell.strip() in {"", "-"})


def key_values(pairs: Sequence[tuple[str, object]], caption: str = "") -> Markup:
    """A summary table: one row per name (a row header) and its value."""
    body = "".join(
        f"<tr>{element('th', name)}{element('td', value)}</tr>" for name, value in pairs
    )
    title = f"<caption>{escape(caption)}</caption>" if caption else ""
    return Markup(f"<table>{title}<tbody>{body}</tbody></table>")


def folded(summary: str, content: Markup) -> Markup:
    return Markup(f"<details><summary>{escape(summary)}</summary>{content}</details>")


def png_image(data: bytes, alt: str) -> Markup:
    """A PNG as a base64 data URL, so the notebook keeps it in its output."""
    encoded = base64.b64encode(data).decode("ascii")
    return Markup(
        f'<img src="data:image/png;base64,{encoded}" alt="{escape(alt)}" '
        'style="max-width: 100%">'
    )


def display(title: str, parts: Iterable[object]) -> Markup:
    """The whole display: style sheet, title and parts under one styled root."""
    return Markup(
        f'<div class="{ROOT_CLASS}">{_STYLE}{element("strong", title)}'
        f"{join(parts)}</div>"
    )
