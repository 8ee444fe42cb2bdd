"""`make demo` wiring: the real pipeline over the sample corpus; the chat model, where
one is used, is a fake (no LLM API here)."""

import io
import re
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from rich.console import Console

from langchain_ragbudget import build_chat_model
from langchain_ragbudget.cli import _demo as demo
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.sample import demo_config_path

# No FlashRank model in the test's cache, and no download: tests never touch the
# network, and the rerank stage is skipped and reported.
OFFLINE = "rerank:\n  download: false\n"


def run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, llm: Any = None, extra: str = ""
) -> str:
    """The demo on its own YAML (plus `extra`), offline."""
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(demo, "chat_model", lambda config, console: llm)
    config = tmp_path / "demo.yml"
    shipped = demo_config_path().read_text(encoding="utf-8")
    config.write_text(f"{shipped}{extra}{OFFLINE}", encoding="utf-8")
    out = io.StringIO()
    demo.run_demo(config, console=Console(file=out, width=200))
    return out.getvalue()


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_demo_prints_evidence_prompt_and_warnings(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    text = run(monkeypatch, tmp_path)
    assert "surface 'chat': max_docs=4, max_tokens=600" in text
    assert "surface 'search': max_docs=8, max_tokens=4000" in text
    assert "incident-runbook::1 *" in text and "over_max_docs (budget)" in text
    assert "prompt sent (chat)" in text and "Question: How quickly" in text
    assert "[warning: rerank stage skipped:" in text
    assert "[warning: chat context: " in text and "over_max_docs)" in text
    assert "shortened: engineering-handbook::3 (" in text
    assert "\n│ […]" in text  # the omission marker in the prompt
    assert "no chat model configured" in text


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_demo_shows_the_answer_with_a_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    answers = iter(
        [
            AIMessage(content="Within 5 minutes [1]."),
            AIMessage(content="5 minutes [1]."),
        ]
    )
    text = run(monkeypatch, tmp_path, GenericFakeChatModel(messages=answers))
    assert "Within 5 minutes [1]." in text and "5 minutes [1]." in text
    assert "no chat model configured" not in text


def test_cli_reports_config_errors_in_one_line(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("surfaces:\n  chat:\n    max_tokens: -1\n")
    assert main(["demo", "--config", str(bad)]) == 2
    assert "surfaces.chat.max_tokens" in capsys.readouterr().err


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_a_drop_above_passages_kept_with_their_document_is_counted_not_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    # The real pipeline on the sample corpus, the demo's budget with `skip`: the
    # second passage (705 tokens) does not fit; the answer's document
    # (incident-runbook) fills the room with its next passages, so the drop is
    # ordinary packing, counted: naming it was the false alarm users learn to
    # ignore (BENCHMARKS.md, Warnings).
    skip = "    packing: skip\n"  # under the demo's surfaces.chat
    text = " ".join(run(monkeypatch, tmp_path, extra=skip).split())
    (line,) = re.findall(r"\[warning: chat context: [^\]]*\]", text.replace("│", ""))
    assert line == (
        "[warning: chat context: 6 lower-ranked left out "
        "(5 over_max_docs, 1 over_max_tokens)]"
    )


def test_openai_key_selects_gpt_4o_mini_with_a_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    pytest.importorskip("langchain_openai")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # no request is made
    from langchain_openai import ChatOpenAI

    config = tmp_path / "llm.yml"
    config.write_text("llm:\n  timeout: 12\n", encoding="utf-8")
    model = build_chat_model(config)
    assert isinstance(model, ChatOpenAI)
    assert model.model_name == "gpt-4o-mini" and model.request_timeout == 12
