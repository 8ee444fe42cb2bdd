"""The import contract in `make lint` is a check that can fail.

A copy of the package gets one upward import, inside a function (errors, the bottom
layer, importing the CLI); `lint-imports` on the copy must report the contract
broken, while the real package keeps it.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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


def test_the_package_keeps_its_layers() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout
    assert "1 kept, 0 broken" in result.stdout


def test_an_upward_import_inside_a_function_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "langchain_ragbudget", tmp_path / "langchain_ragbudget")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    errors = tmp_path / "langchain_ragbudget" / "errors.py"
    upward = "\n\ndef _upward() -> None:\n    from langchain_ragbudget import cli\n"
    errors.write_text(errors.read_text() + upward)
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert "BROKEN" in result.stdout
    assert "langchain_ragbudget.errors -> langchain_ragbudget.cli" in result.stdout
