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


LAYERS = "package layers"
INDEX = "index layers"


@pytest.mark.parametrize(
    ("module", "statement", "contract"),
    [
        (
            "budget/_context_budget.py",
            "import langchain_ragbudget.index",
            "runtime never imports the wings",
        ),
        (
            "ledger/_records.py",
            "import langchain_ragbudget.evaluation",
            "runtime never imports the wings",
        ),
        (
            "errors.py",
            "import langchain_ragbudget.cli",
            "runtime never imports the wings",
        ),
        ("index/_loaders.py", "import langchain_ragbudget.cli", LAYERS),
        ("config/_settings.py", "import langchain_ragbudget.budget", LAYERS),
        ("index/_merge.py", "import langchain_ragbudget.index._hybrid_index", INDEX),
    ],
)
@pytest.mark.parametrize("guard", ["in a function", "type-only"])
def test_a_forbidden_import_breaks_a_contract(
    tmp_path: Path, module: str, statement: str, contract: str, guard: str
) -> None:
    shutil.copytree(ROOT / "langchain_ragbudget", tmp_path / "langchain_ragbudget")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path = tmp_path / "langchain_ragbudget" / module
    if guard == "in a function":
        forbidden = f"\n\ndef _forbidden() -> None:\n    {statement}\n"
    else:
        forbidden = f"\n\nimport typing\n\nif typing.TYPE_CHECKING:\n    {statement}\n"
    path.write_text(path.read_text() + forbidden)
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout
    assert f"{contract} BROKEN" in " ".join(result.stdout.split())
