"""Every ledger display as JupyterLab shows it: its HTML inside JupyterLab's own style
sheets (read from the installed `jupyterlab` package), in headless Chromium. The
browser's computed styles must keep text cells left-aligned and numbers right-
aligned, the table's layout automatic, no word or number drawn on two lines, and no
all-empty column. Real pipeline over the sample corpus (BM25, Chroma, fastembed);
no chat model (the answer is a fixed string, no LLM API).

Screenshots go to `RAGBUDGET_SCREENSHOTS` when it names a folder (`docs/` holds the
committed ones), else to the test's temporary folder.
"""

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from langchain_ragbudget import ContextBudget, HybridRetriever, load_config
from langchain_ragbudget.chain._stuff import build_answer
from langchain_ragbudget.evaluation import evaluate, load_beir
from langchain_ragbudget.index import HybridIndex
from langchain_ragbudget.ledger._records import CandidateList
from langchain_ragbudget.sample import (
    demo_config_path,
    load_sample_corpus,
    load_sample_questions,
)

sys.path.insert(0, str(Path(__file__).parents[2] / "docs"))
from jupyterlab_page import chromium, jupyterlab_css, render

BROWSER = chromium()
CSS = jupyterlab_css()
pytestmark = [
    pytest.mark.needs_embedding_model,
    pytest.mark.needs_tiktoken,
    pytest.mark.skipif(
        BROWSER is None, reason="needs headless Chromium (apt-get install chromium)"
    ),
    pytest.mark.skipif(
        CSS is None, reason="needs JupyterLab's CSS (pip install jupyterlab)"
    ),
]


@pytest.fixture(scope="module")
def displays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Each display's HTML: the demo's question on the demo's tight budget, an
    index of the sample corpus inspected, and (with SciFact) a small evaluation."""
    config = load_config(demo_config_path())
    question = load_sample_questions()[0]["question"]
    retriever = HybridRetriever.from_config(config, documents=load_sample_corpus())
    candidates = retriever.invoke(question)
    assert isinstance(candidates, CandidateList)
    budget = ContextBudget.from_config(config, surface="chat")
    context = budget.invoke({"question": question, "documents": candidates})["context"]
    answer = build_answer(context, "Within 5 minutes [1].")
    folder = tmp_path_factory.mktemp("displays")
    with HybridIndex.open(folder / "index", config, write=True) as index:
        index.upsert(load_sample_corpus())
    shown = {
        "candidate_list": candidates._repr_html_(),
        "budgeted_context": context._repr_html_(),
        "budget_report": context.report._repr_html_(),
        "budgeted_answer": answer._repr_html_(),
        "index_inspection": HybridIndex.inspect(folder / "index", config)._repr_html_(),
    }
    scifact = Path(os.environ.get("RAGBUDGET_SCIFACT_DIR", "scifact"))
    if (scifact / "queries.jsonl").is_file():
        dataset = load_beir(scifact).subset(max_queries=10, distractors=40)
        with pytest.MonkeyPatch.context() as patch:  # caches in the test's folder
            patch.setenv("RAGBUDGET_CACHE_DIR", str(folder / "cache"))
            shown["eval_report"] = evaluate(dataset, load_config())._repr_html_()
    return shown


def _folder(tmp_path: Path) -> Path:
    wanted = os.environ.get("RAGBUDGET_SCREENSHOTS")
    folder = Path(wanted) if wanted else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.parametrize(
    "name",
    [
        "candidate_list",
        "budgeted_context",
        "budget_report",
        "budgeted_answer",
        "index_inspection",
        "eval_report",
    ],
)
def test_a_display_survives_jupyterlabs_stylesheet(
    displays: dict[str, str], name: str, tmp_path: Path
) -> None:
    assert BROWSER is not None and CSS is not None
    if name not in displays:
        pytest.skip("the EvalReport needs SciFact (RAGBUDGET_SCIFACT_DIR)")
    shot = _folder(tmp_path) / f"jupyterlab_{name}.png"
    measured: dict[str, Any] = render(displays[name], CSS, BROWSER, shot)
    cells = measured["cells"]
    assert cells, "no table cell measured"
    numbers = [c for c in cells if c["num"]]
    texts = [c for c in cells if not c["num"]]
    assert {c["align"] for c in texts} == {"left"}, [
        c for c in texts if c["align"] != "left"
    ][:3]
    assert {c["align"] for c in numbers} <= {"right"}
    assert {c["wrap"] for c in cells} == {"normal"}  # never overflow-wrap: anywhere
    assert {c["wordBreak"] for c in cells} == {"normal"}
    assert {c["layout"] for c in cells} == {"auto"}  # JupyterLab sets fixed
    assert measured["broken"] == []  # no word or number drawn on two lines
    assert measured["empty"] == []  # no ledger column without a value
    assert shot.stat().st_size > 10_000  # a picture was drawn
