"""The import contracts in `make lint` are checks that can fail.

A copy of the package gets one forbidden import, inside a function; `lint-imports`
on the copy must report the contract broken, while the real package keeps both.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "langchain_ragbudget"
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_package_keeps_its_contracts() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout
    assert " 0 broken" in result.stdout
    assert "runtime never imports the wings KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "imported", "contract"),
    [
        ("budget.py", "index", "runtime never imports the wings"),
        ("ledger.py", "evaluation", "runtime never imports the wings"),
        ("errors.py", "cli", "runtime never imports the wings"),
        ("index/_loaders.py", "cli", "wings: cli > evaluation > index"),
    ],
)
def test_an_import_of_a_wing_inside_a_function_breaks_a_contract(
    tmp_path: Path, module: str, imported: str, contract: str
) -> None:
    shutil.copytree(ROOT / "langchain_ragbudget", tmp_path / "langchain_ragbudget")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "langchain_ragbudget" / module
    forbidden = (
        f"\n\ndef _forbidden() -> None:\n    import langchain_ragbudget.{imported}\n"
    )
    path.write_text(path.read_text() + forbidden)
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert f"{contract} BROKEN" in result.stdout
