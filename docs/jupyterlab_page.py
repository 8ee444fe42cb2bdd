"""A display as JupyterLab shows it: its HTML inside JupyterLab's own style sheets,
rendered by headless Chromium.

JupyterLab ships its CSS inside its JavaScript bundles (`share/jupyter/lab/static`,
css-loader modules) and its theme as `themes/@jupyterlab/theme-light-extension`;
both are read from the installed `jupyterlab` package, so the page carries the
exact rules that right-align output cells and fix their table layout. The page
measures itself in the browser (computed styles, every word's line boxes) and
writes the result into the DOM, which `chromium --dump-dom` hands back: no driver
library is needed. Used by `tests/integration_tests/test_jupyterlab_display.py` and
`docs/evidence_table.py` (the README picture).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

LAB = Path(sys.prefix) / "share" / "jupyter" / "lab"
THEME = LAB / "themes" / "@jupyterlab" / "theme-light-extension" / "index.css"
_CSS_MODULE = re.compile(r"\.push\(\[e\.id,`(.*?)`,\"\"", re.S)

# What the page measures: per cell its alignment and wrapping, the words and
# numbers drawn on more than one line (letters, digits and the `.` or `,` inside a
# number: broken mid-word; a line may still break after a hyphen or a slash, as
# text does), the all-empty columns of ledger tables.
_MEASURE = """
<script>
const out = {cells: [], broken: [], empty: [], height: 0};
for (const cell of document.querySelectorAll('.ragbudget td, .ragbudget th')) {
  const cs = getComputedStyle(cell);
  out.cells.push({tag: cell.tagName, num: cell.classList.contains('rb-num'),
    align: cs.textAlign, wrap: cs.overflowWrap, wordBreak: cs.wordBreak,
    layout: getComputedStyle(cell.closest('table')).tableLayout,
    text: cell.textContent.slice(0, 40)});
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  let node;
  while ((node = walker.nextNode())) {
    const re = /[\\p{L}\\p{N}_.,]+/gu; let m;
    while ((m = re.exec(node.data))) {
      const range = document.createRange();
      range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
      const rects = [...range.getClientRects()].filter(r => r.width > 0);
      if (new Set(rects.map(r => Math.round(r.top))).size > 1) out.broken.push(m[0]);
    }
  }
}
for (const table of document.querySelectorAll('.ragbudget table')) {
  const rows = [...table.querySelectorAll('tbody tr')];
  if (!rows.some(tr => /\\brb-/.test(tr.className))) continue;
  [...table.querySelectorAll('thead th')].forEach((th, j) => {
    const cells = rows.map(tr => (tr.children[j] || {}).textContent.trim());
    if (cells.every(c => c === '-' || c === '')) out.empty.push(th.textContent);
  });
}
out.height = Math.ceil(document.documentElement.scrollHeight);
document.getElementById('rb-measured').textContent = JSON.stringify(out);
</script>"""

PAGE = """<!doctype html><html><head><meta charset="utf-8">
<style>{theme}</style><style>{lab}</style></head>
<body class="jp-ThemedContainer" data-jp-theme-light="true" style="margin: 12px">
<div class="jp-Notebook"><div class="jp-Cell jp-CodeCell"><div class="jp-OutputArea">
<div class="jp-OutputArea-child"><div class="lm-Widget jp-RenderedHTMLCommon
jp-RenderedHTML jp-OutputArea-output" data-mime-type="text/html">{display}</div>
</div></div></div></div><pre id="rb-measured" style="display:none"></pre>{script}
</body></html>"""


def chromium() -> str | None:
    """The headless browser (Debian's `chromium`), or None."""
    names = ("chromium", "chromium-browser", "google-chrome")
    return next((path for name in names if (path := shutil.which(name))), None)


def jupyterlab_css() -> tuple[str, str] | None:
    """(theme, every JupyterLab CSS module) from the installed package, or None."""
    static = LAB / "static"
    if not THEME.is_file() or not static.is_dir():
        return None
    modules = [
        match.group(1)
        for bundle in sorted(static.glob("*.js"))
        for match in _CSS_MODULE.finditer(bundle.read_text(encoding="utf-8"))
    ]
    lab = "\n".join(modules)
    if ".jp-RenderedHTMLCommon td" not in lab:
        return None
    return THEME.read_text(encoding="utf-8"), lab


def page(display_html: str, css: tuple[str, str]) -> str:
    """The display in a JupyterLab output area, with the measuring script."""
    theme, lab = css
    return PAGE.format(theme=theme, lab=lab, display=display_html, script=_MEASURE)


def render(
    display_html: str,
    css: tuple[str, str],
    browser: str,
    screenshot: Path | None = None,
    width: int = 1200,
) -> dict[str, Any]:
    """Load the page in headless Chromium; what it measured (and a screenshot)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "display.html"
        path.write_text(page(display_html, css), encoding="utf-8")
        base = [browser, "--headless", "--no-sandbox", "--disable-gpu"]
        base += ["--hide-scrollbars", f"--user-data-dir={folder}/profile"]
        dom = subprocess.run(
            [*base, f"--window-size={width},800", "--dump-dom", path.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        ).stdout
        found = re.search(r'<pre id="rb-measured"[^>]*>(.*?)</pre>', dom, re.S)
        if found is None:
            raise RuntimeError("the page did not measure itself")
        measured: dict[str, Any] = json.loads(html.unescape(found.group(1)))
        if screenshot is not None:
            height = min(max(measured["height"], 200), 6000)
            subprocess.run(
                [
                    *base,
                    f"--window-size={width},{height}",
                    f"--screenshot={screenshot.resolve()}",
                    path.as_uri(),
                ],
                capture_output=True,
                timeout=120,
                check=True,
            )
    return measured
