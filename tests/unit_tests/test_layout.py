"""The house's plan, checked: what an import loads, what the import contract lists,
how large a module or a function may grow."""

import ast
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "langchain_ragbudget"
WINGS = ("index", "evaluation", "cli")
HEAVY = ("rich", "bm25s", "scipy", "chromadb", "matplotlib")


def loaded_after(statement: str) -> list[str]:
    """The modules a fresh interpreter holds after `statement`."""
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return list(json.loads(result.stdout))


@pytest.mark.parametrize(
    "statement",
    [
        "import langchain_ragbudget",
        "from langchain_ragbudget import ContextBudget, create_budgeted_rag_chain",
        "from langchain_ragbudget import HybridRetriever, FlashRankRerank",
    ],
)
def test_the_runtime_loads_no_wing_and_no_heavy_library(statement: str) -> None:
    modules = loaded_after(statement)
    wings = [
        m for m in modules for w in WINGS if m.startswith(f"langchain_ragbudget.{w}")
    ]
    heavy = [m for m in modules if m.split(".")[0] in HEAVY]
    assert wings == []
    assert heavy == []


def test_a_plain_import_loads_no_stage() -> None:
    modules = loaded_after("import langchain_ragbudget")
    assert [m for m in modules if m.startswith("langchain_ragbudget.")] == []


def test_the_command_line_s_parser_loads_no_other_wing_and_no_heavy_library() -> None:
    modules = loaded_after("import langchain_ragbudget.cli")
    others = [
        m
        for m in modules
        if m.startswith(("langchain_ragbudget.index", "langchain_ragbudget.evaluation"))
    ]
    assert others == []
    assert [m for m in modules if m.split(".")[0] in HEAVY] == []


def test_the_layers_contract_lists_every_top_level_entry() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = pyproject["tool"]["importlinter"]["contracts"]
    (layers,) = [c for c in contracts if c.get("containers") == ["langchain_ragbudget"]]
    listed = {name for layer in layers["layers"] for name in layer.split(" | ")}
    top_level = {
        p.stem if p.suffix == ".py" else p.name
        for p in PACKAGE.iterdir()
        if p.stem != "__init__" and (p.suffix == ".py" or (p / "__init__.py").exists())
    }
    assert listed == top_level
    assert len(top_level) + 1 <= 15  # with __init__.py
    assert "ignore_imports" not in str(contracts)


def imported_names(path: Path) -> list[tuple[int, str]]:
    """Every name `path` imports from this package, with its line."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("langchain_ragbudget")
        ):
            names += [(node.lineno, alias.name) for alias in node.names]
    return names


def test_no_module_imports_another_module_s_private_name() -> None:
    private = [
        f"{path.relative_to(ROOT)}:{line} {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in imported_names(path)
        if name.startswith("_") and not name.startswith("__")
    ]
    assert private == []


MAX_FUNCTION_LINES = 80


def test_no_function_over_80_lines() -> None:
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []
