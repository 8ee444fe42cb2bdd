"""A lean install: the core package imports no optional dependency, and a feature
used without its extra says which extra to install."""

import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragbudget.errors import MissingExtraError, require

EXTRAS = [
    "matplotlib",
    "sklearn",
    "pypdf",
    "bs4",
    "onnx",
    "langchain_openai",
    "langchain_classic",
    "ipywidgets",
]


def test_importing_the_package_and_its_cli_pulls_in_no_extra() -> None:
    code = (
        "import sys, langchain_ragbudget, langchain_ragbudget.cli, "
        "langchain_ragbudget.index, langchain_ragbudget.evaluation\n"
        f"print(sorted(m for m in {EXTRAS!r} if m in sys.modules))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert found.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("module", "extra"),
    [
        ("pypdf", "index"),
        ("bs4", "index"),
        ("matplotlib", "eval"),
        ("sklearn", "eval"),
        ("onnx", "int8"),
    ],
)
def test_a_missing_extra_is_named(
    monkeypatch: pytest.MonkeyPatch, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    with pytest.raises(MissingExtraError, match=rf"langchain-ragbudget\[{extra}\]"):
        require(module, extra, "a feature")


def test_reading_a_pdf_without_pypdf_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from langchain_ragbudget.index._loaders import read_file

    monkeypatch.setitem(sys.modules, "pypdf", None)
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4")
    with pytest.raises(MissingExtraError, match=r"\[index\]"):
        read_file(tmp_path / "a.pdf")


def test_a_chat_model_without_its_package_names_the_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from langchain_ragbudget import build_chat_model

    config = tmp_path / "llm.yml"
    config.write_text("llm:\n  model: openai:gpt-4o-mini\n", encoding="utf-8")
    monkeypatch.setitem(sys.modules, "langchain_classic", None)
    with pytest.raises(MissingExtraError, match=r"\[llm\]"):
        build_chat_model(config)


def test_measuring_weak_evidence_without_scikit_learn_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from langchain_ragbudget.evaluation._weak_fit import auroc

    monkeypatch.setitem(sys.modules, "sklearn", None)
    monkeypatch.setitem(sys.modules, "sklearn.metrics", None)
    with pytest.raises(MissingExtraError, match=r"\[eval\]"):
        auroc([0.9, 0.1], [True, False])
