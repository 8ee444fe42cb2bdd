"""`ProgressBars` draws in Jupyter: a widget updated in place, ending at the total.

A real kernel (nbclient) runs one cell; with no browser attached, what the widget
showed is read from the widget state nbclient keeps in the notebook's metadata.
"""

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
CELL = """\
import warnings
warnings.simplefilter("error")  # rich warns when it cannot draw in Jupyter
from langchain_ragbudget.progress import ProgressBars, StageProgress

with ProgressBars() as progress:
    stage = StageProgress(progress, "embedding chunks", 700).start()
    for batch in (256, 256, 188):
        stage.advance(batch)
"""


def test_progress_bars_render_in_a_notebook() -> None:
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell(CELL)]
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute(cwd=str(ROOT))
    outputs = notebook.cells[0].outputs
    assert not [o for o in outputs if o.output_type in ("error", "stream")], outputs
    widget_mime = "application/vnd.jupyter.widget-view+json"
    assert any(widget_mime in o.get("data", {}) for o in outputs)
    states = notebook.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]
    drawn = [
        json.dumps(model["state"]["outputs"])
        for model in states["state"].values()
        if model["model_name"] == "OutputModel"
    ]
    assert len(drawn) == 1
    assert "embedding chunks" in drawn[0] and "700/700" in drawn[0]
