"""The shipped sentence-relevance model is what its fitting script makes."""

import json
import runpy
import sys
from pathlib import Path

import pytest

from langchain_ragbudget.evidence._sentence_scoring import MODEL_FILE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.needs_scifact
def test_fit_script_reproduces_the_shipped_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / MODEL_FILE
    script = ROOT / "benchmarks" / "fit_sentence_relevance.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--out", str(out)])
    monkeypatch.syspath_prepend(str(script.parent))  # as `python benchmarks/...` has
    runpy.run_path(str(script), run_name="__main__")
    fitted = json.loads(out.read_text())
    shipped = json.loads((ROOT / "langchain_ragbudget" / MODEL_FILE).read_text())
    assert fitted["coefficients"].keys() == shipped["coefficients"].keys()
    for name, weight in shipped["coefficients"].items():
        assert fitted["coefficients"][name] == pytest.approx(weight, abs=1e-3)
    assert fitted["intercept"] == pytest.approx(shipped["intercept"], abs=1e-3)
