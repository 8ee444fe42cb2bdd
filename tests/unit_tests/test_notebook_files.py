"""The committed notebooks: no stored outputs, the python3 kernel, public names only.

Running them is an integration test (tests/integration_tests/test_notebooks.py); this
checks the files themselves, fast and without any asset.
"""

import ast
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def _code(path: Path) -> list[str]:
    notebook = nbformat.read(path, as_version=4)
    return [cell.source for cell in notebook.cells if cell.cell_type == "code"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_committed_without_outputs(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code
    assert all(cell.outputs == [] for cell in code)
    assert all(cell.execution_count is None for cell in code)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_only_public_names(path: Path) -> None:
    private = []
    for source in _code(path):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "langchain_ragbudget"
            ):
                names = [*(node.module or "").split("."), *(a.name for a in node.names)]
                private += [name for name in names if name.startswith("_")]
            elif isinstance(node, ast.Import):
                private += [
                    a.name
                    for a in node.names
                    if a.name.startswith("langchain_ragbudget")
                    and any(part.startswith("_") for part in a.name.split("."))
                ]
    assert not private
