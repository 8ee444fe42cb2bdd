"""No warning text is cut mid-word: in the terminal at 80, 100 and 250 columns and in
`ask --json`. The real pipeline over the sample corpus (BM25, Chroma, fastembed);
no chat model (the answer panel shows the warnings)."""

import io
import json
import re
from typing import Any

import pytest
from rich.console import Console

from langchain_ragbudget import ContextBudget, HybridRetriever
from langchain_ragbudget.chain._pipeline import Explained, explain
from langchain_ragbudget.chain._stuff import context_warnings
from langchain_ragbudget.cli._views import explained_to_dict, show_explained
from langchain_ragbudget.config._settings import RagBudgetConfig, load_config
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions

pytestmark = [pytest.mark.needs_embedding_model, pytest.mark.needs_tiktoken]


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Explained, Any]:
    """A sample question on a tight `skip` budget: passages named and counted."""
    folder = tmp_path_factory.mktemp("warnings")
    yml = folder / "tight.yml"
    yml.write_text(
        "rerank:\n  enabled: false\nsurfaces:\n  chat:\n    max_tokens: 600\n"
        "    max_docs: 3\n    packing: skip\n"
    )
    config = load_config(yml)
    question = load_sample_questions()[2]["question"]  # three named, +N more
    retriever = HybridRetriever.from_config(config, documents=load_sample_corpus())
    return explain(
        question, retriever, ContextBudget.from_config(config, surface="chat")
    ), config


def _panel_text(rendered: str, title: str) -> str:
    """The words of the panel titled `title`, its wrapped lines joined by spaces."""
    lines = rendered.splitlines()
    start = next(i for i, line in enumerate(lines) if title in line)
    body = []
    for line in lines[start + 1 :]:
        if line.lstrip().startswith("╰"):
            break
        body.append(line.strip().removeprefix("│").removesuffix("│").strip())
    return " ".join(" ".join(body).split())


@pytest.mark.parametrize("width", [80, 100, 250])
def test_warnings_are_wrapped_between_words_at_any_width(
    explained: tuple[Explained, RagBudgetConfig], width: int
) -> None:
    answer, _ = explained
    warnings = context_warnings(answer.context)
    assert any("likely lost" in w for w in warnings)  # there is something to cut
    out = io.StringIO()
    show_explained(Console(file=out, width=width), answer, "chat", fusion_k=10)
    shown = _panel_text(out.getvalue(), "answer (chat)")
    for warning in warnings:
        assert "…" not in warning
        # a word cut by the wrap would come back with a space inside it
        assert " ".join(warning.split()) in shown, (width, warning, shown)


def test_json_warnings_are_whole_and_name_three_at_most(
    explained: tuple[Explained, RagBudgetConfig],
) -> None:
    answer, config = explained
    data = json.loads(json.dumps(explained_to_dict(answer, "chat", config)))
    assert data["warnings"] == context_warnings(answer.context)
    for warning in data["warnings"]:
        assert "…" not in warning and "\n" not in warning
        if "likely lost: " in warning:
            named = warning.split("likely lost: ", 1)[1].split("; ")[0]
            assert len(re.findall(r" \((?:budget|fusion|rerank)/", named)) <= 3
    # the records carry every drop and every likely-lost one, untruncated
    dropped = {r["id"] for r in data["report"]["dropped"]}
    assert dropped == {r.key for r in answer.context.report.drops}
    lost = data["likely_lost"]
    assert lost and {r["id"] for r in lost} <= dropped
    assert all(r["outranked_kept_rank"] or r["score"] is not None for r in lost)
