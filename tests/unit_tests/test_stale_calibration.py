"""A weak-evidence calibration knows its models: a threshold calibrated with one
embedding model, used with another, is called stale in the report and the warning.
The budget is the real one; passages carry fixed dense scores (no model runs)."""

from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragbudget import ContextBudget
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.config._weak_model import CalibratedWith, CombinedEvidence
from langchain_ragbudget.evaluation._report import weak_evidence_yaml
from langchain_ragbudget.evaluation._weak_evidence import WeakEvidence

pytestmark = pytest.mark.needs_tiktoken

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BGE = "BAAI/bge-small-en-v1.5"


def config_file(tmp_path: Path, in_use: str, calibrated: str | None) -> Path:
    """Thresholds on dense_score, calibrated with `calibrated`, run with `in_use`."""
    stamp = (
        ""
        if calibrated is None
        else (f"      calibrated_with: {{embedding: {calibrated}, rerank: null}}\n")
    )
    path = tmp_path / f"{in_use.replace('/', '_')}-{calibrated}.yml".replace("/", "_")
    path.write_text(
        f"embedding:\n  model: {in_use}\nrerank:\n  enabled: false\n"
        "surfaces:\n  chat:\n    weak_evidence:\n      thresholds:\n"
        f"        dense_score: 0.40\n{stamp}",
        encoding="utf-8",
    )
    return path


def passages(top: float) -> list[Document]:
    return [
        Document(id=f"p{i}", page_content=f"Passage {i}.", metadata={"dense_score": s})
        for i, s in enumerate([top, top - 0.1])
    ]


@pytest.mark.parametrize("top", [0.9, 0.2])  # strong and weak alike
def test_another_embedding_model_makes_the_calibration_stale(
    tmp_path: Path, top: float
) -> None:
    config = load_config(config_file(tmp_path, BGE, MINILM))
    context = ContextBudget.from_config(config, surface="chat").fit(passages(top))
    evidence = context.evidence
    assert evidence.weak is (top < 0.40)  # the threshold still decides
    assert evidence.stale == f"embedding {MINILM}, in use {BGE}"
    note = f"calibration stale (calibrated with embedding {MINILM}, in use {BGE})"
    # the report: its evidence line, its HTML display, its JSON view
    assert note in evidence.describe()
    assert note in context._repr_html_()
    assert context.evidence.to_dict()["stale"] == evidence.stale
    # the warning: one clause (on the weak line), or a line of its own
    lines = [w for w in context_warnings(context) if "calibration stale" in w]
    assert len(lines) == 1 and note in lines[0]


def test_the_same_models_or_an_unknown_calibration_are_not_stale(
    tmp_path: Path,
) -> None:
    for calibrated in (MINILM, None):
        config = load_config(config_file(tmp_path, MINILM, calibrated))
        context = ContextBudget.from_config(config, surface="chat").fit(passages(0.9))
        assert context.evidence.stale is None
        assert "stale" not in context.evidence.describe()
        assert not any("stale" in w for w in context_warnings(context))


def test_a_reranker_added_after_calibration_is_stale_too(tmp_path: Path) -> None:
    path = config_file(tmp_path, MINILM, MINILM)
    path.write_text(path.read_text().replace("enabled: false", "enabled: true"))
    config = load_config(path)
    context = ContextBudget.from_config(config, surface="chat").fit(passages(0.9))
    assert context.evidence.stale == f"rerank none, in use {config.rerank.model}"


def test_eval_yaml_records_the_models_and_a_budget_reads_them(tmp_path: Path) -> None:
    model = CombinedEvidence(
        coefficients={"dense_top": 4.0}, intercept=-2.0, threshold=0.5
    )
    stamp = CalibratedWith(embedding=MINILM, rerank=None, index="scifact")
    weak = WeakEvidence("train", 1, 1, 0.8, [], model, 0.75, ([], []), stamp)
    path = tmp_path / "weak.yml"
    path.write_text(weak_evidence_yaml(weak, ["chat"]), encoding="utf-8")
    settings = load_config(path).surface("chat").weak_evidence
    assert settings.calibrated_with == stamp
    text = path.read_text()
    other = tmp_path / "other.yml"
    other.write_text(
        f"embedding:\n  model: {BGE}\nrerank:\n  enabled: false\n{text}",
        encoding="utf-8",
    )
    context = ContextBudget.from_config(load_config(other), surface="chat").fit(
        passages(0.9), question="what?"
    )
    assert context.evidence.stale == f"embedding {MINILM}, in use {BGE}"
    assert any("calibration stale" in w for w in context_warnings(context))
