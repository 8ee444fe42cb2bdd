"""Every notebook runs top to bottom offline and shows the displays it teaches.

`make notebooks` runs this file. Each notebook runs in a fresh kernel of this very
interpreter (ipykernel's own kernelspec, so a `python3` kernelspec installed elsewhere
cannot swap in another Python), with a temporary working folder, so nothing lands in
the repository; the checkout comes first on the kernel's PYTHONPATH, so the notebook
imports the code under test.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
from nbformat import NotebookNode

from langchain_ragbudget.ledger._html import ROOT_CLASS

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = ROOT / "notebooks"
WIDGET = "application/vnd.jupyter.widget-view+json"  # rich's bars in Jupyter
CELL_TIMEOUT = 300  # seconds; the slowest cell (04's evaluate) takes about 30 here


@dataclass(frozen=True)
class Shows:
    """What a notebook's outputs must hold once it has run.

    Attributes:
        displays: Rich display title (`BudgetedContext`...) -> how many at least.
        rows: Row classes of the evidence tables that must appear (kept, dropped).
        texts: Strings its printed output must contain.
        figures: Inline matplotlib figures (image/png outputs), at least.
        progress: Whether it draws progress bars (a Jupyter widget).
        marks: The assets it needs besides the embedding model and tiktoken.
    """

    displays: dict[str, int]
    rows: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()
    figures: int = 0
    progress: bool = False
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


SHOWS = {
    "01_quickstart.ipynb": Shows(
        {"CandidateList": 1, "BudgetedContext": 1, "BudgetedAnswer": 1},
        rows=("rb-kept", "rb-dropped"),
        texts=("[warning: ",),
    ),
    "02_surfaces_and_yaml.ipynb": Shows(
        {"BudgetedContext": 3},
        rows=("rb-kept", "rb-dropped"),
        texts=(
            "kept by the default budget only: ['incident-runbook::3'",
            "ragbudget.yml: key 'surfaces.chat.max_tokens' = -5",
        ),
    ),
    "03_index_your_folder.ipynb": Shows(
        {"BudgetedContext": 2, "IndexInspection": 1},
        rows=("rb-kept",),
        texts=(
            "updated: ['refunds.md'] | unchanged: ['shipping.md', 'warranty.txt']",
            "removed: ['warranty.txt']",
            "after the damage: out of sync",
            "now: sparse and dense sides are in sync",
            "healthy? True",
        ),
        progress=True,
    ),
    "04_evaluate.ipynb": Shows(
        {"EvalReport": 1},
        texts=("silent drops: 0",),
        figures=1,
        progress=True,
        marks=(pytest.mark.needs_scifact,),
    ),
    "05_weak_evidence.ipynb": Shows(
        {"BudgetedAnswer": 2},
        rows=("rb-kept", "rb-dropped"),
        texts=("[warning: weak evidence: top dense_score", "Note: the highest"),
        figures=1,
    ),
    "06_conversation.ipynb": Shows(
        {"BudgetedAnswer": 1},
        rows=("rb-kept", "rb-dropped"),
        texts=(
            "turn 3: 4 of 4 history messages kept",
            "turn 4: 4 of 6 history messages kept",
            "2 history turn(s) dropped (oldest first, over_max_tokens)",
            "history / over_max_tokens : turn 1 (user) older than turn 2",
            "search 8 4000",
        ),
    ),
    "07_memory.ipynb": Shows(
        {"BudgetedAnswer": 1},
        rows=("rb-kept", "rb-dropped"),
        texts=(
            "restated: said 2 times",
            "x recency 0.125 (90 days since said)",
            "1 superseded",
            "kept marked stale",
            "dropped superseded: superseded by mem-",
        ),
    ),
    "08_agent.ipynb": Shows(
        {},
        texts=(
            "7 of 11 messages sent, 4 dropped",
            "4 earlier message(s) left out of the request",
            "history / over_max_tokens : turn 3 (tool) needs 604 tokens",
            "whose question was dropped (whole turns only)",
            "4 records in the state",
            "12 messages in the state; 7 sent in the last request",
        ),
    ),
}


class _Outline(HTMLParser):
    """What the rich displays hold: their titles, row classes and inline images.

    A display is `<div class="ragbudget"><style>…</style><strong>Title</strong>…`
    (html_tables.display).
    """

    def __init__(self) -> None:
        super().__init__()
        self.titles: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.images = 0
        self._awaiting_title = False
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        classes = (attributes.get("class") or "").split()
        if tag == "div" and ROOT_CLASS in classes:
            self._awaiting_title = True
        elif tag == "strong" and self._awaiting_title:
            self._awaiting_title, self._in_title = False, True
        elif tag == "tr":
            self.rows.update(classes)
        elif tag == "img" and (attributes.get("src") or "").startswith(
            "data:image/png;base64,"
        ):
            self.images += 1

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.titles[data] += 1
            self._in_title = False


def _outputs(notebook: NotebookNode) -> list[NotebookNode]:
    return [o for cell in notebook.cells for o in cell.get("outputs", [])]


def _printed(outputs: list[NotebookNode]) -> str:
    """The text the notebook printed and displayed.

    Stream pieces are joined as they came: a kernel under load can send one
    `print("healthy?", True)` as two messages ("healthy?", then " True").
    """
    text = ""
    for output in outputs:
        if output.output_type == "stream":
            text += output.text
        elif "text/plain" in output.get("data", {}):
            text += f"\n{output.data['text/plain']}\n"
    return text


def _run(path: Path, workdir: Path) -> NotebookNode:
    notebook = nbformat.read(path, as_version=4)
    specs = KernelSpecManager(kernel_dirs=[])  # only ipykernel's: sys.executable
    kernel = KernelManager(kernel_name="python3", kernel_spec_manager=specs)
    path_env = [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path_env)}
    NotebookClient(notebook, km=kernel, timeout=CELL_TIMEOUT).execute(
        cwd=str(workdir), env=env
    )
    return notebook


def test_every_notebook_is_checked() -> None:
    assert sorted(p.name for p in NOTEBOOK_DIR.glob("*.ipynb")) == sorted(SHOWS)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
@pytest.mark.parametrize(
    ("name", "shows"),
    [
        pytest.param(name, shows, marks=shows.marks, id=name)
        for name, shows in SHOWS.items()
    ],
)
def test_notebook_runs_and_shows_its_displays(
    name: str, shows: Shows, tmp_path: Path
) -> None:
    notebook = _run(NOTEBOOK_DIR / name, tmp_path)
    outputs = _outputs(notebook)
    assert not [o for o in outputs if o.output_type == "error"]
    outline = _Outline()
    for output in outputs:
        outline.feed(output.get("data", {}).get("text/html", ""))
    for title, least in shows.displays.items():
        assert outline.titles[title] >= least, (title, outline.titles)
    for row_class in shows.rows:
        assert outline.rows[row_class] > 0, (row_class, outline.rows)
    if "EvalReport" in shows.displays:
        assert outline.images >= 1  # the survival plot, inline in the report
    figures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(figures) >= shows.figures
    widgets = [o for o in outputs if WIDGET in o.get("data", {})]
    assert bool(widgets) == shows.progress
    printed = _printed(outputs)
    for text in shows.texts:
        assert text in printed
    assert not list(tmp_path.iterdir())  # no file left where the notebook ran
