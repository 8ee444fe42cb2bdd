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


def test_the_forbidden_contract_lists_every_top_level_module() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = pyproject["tool"]["importlinter"]["contracts"]
    (forbidden,) = [c for c in contracts if c["type"] == "forbidden"]
    top_level = {
        f"langchain_ragbudget.{p.stem}"
        for p in PACKAGE.glob("*.py")
        if p.stem != "__init__"
    }
    assert set(forbidden["source_modules"]) == top_level
    assert forbidden["forbidden_modules"] == [f"langchain_ragbudget.{w}" for w in WINGS]


MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def test_no_module_is_over_600_lines_and_no_function_over_80() -> None:
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        name = path.relative_to(ROOT)
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_long.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{name}:{node.lineno} {node.name}: {lines} lines")
    assert too_long == []
