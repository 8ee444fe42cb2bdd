"""The CLI answers first: what can be refused without the index is refused before it.

An unknown surface, an empty question and a bad configuration must fail before
the index is opened (which takes seconds on a large index), so they fail at once
on an index of any size. Shown without timing: `HybridIndex.open` is replaced by
a function that fails the test, and `--index` names a folder that does not exist
(opening it would say "no index"). Each error carries a suggestion.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragbudget.cli import _main as cli
from langchain_ragbudget.index import _hybrid_index

MISSING_INDEX = "no-such-index-folder"


@pytest.fixture(autouse=True)
def index_never_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    def opened(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was opened before the arguments were checked")

    monkeypatch.setattr(_hybrid_index.HybridIndex, "open", classmethod(opened))


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def ask(tmp_path: Path, *argv: str) -> int:
    return cli.main(["ask", *argv, "--index", str(tmp_path / MISSING_INDEX)])


def test_unknown_surface_without_a_file_blames_no_file_and_suggests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ask(tmp_path, "When are refunds paid?", "--surface", "serach") == 2
    line = error_line(capsys)
    assert "config_default.yml" not in line
    assert "'serach' is not defined anywhere" in line
    assert "known: chat, search" in line and "did you mean 'search'?" in line


def test_unknown_surface_names_the_user_s_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine.yml"
    mine.write_text("surfaces:\n  voice:\n    max_docs: 2\n", encoding="utf-8")
    code = ask(tmp_path, "q?", "--surface", "vioce", "--config", str(mine))
    assert code == 2
    line = error_line(capsys)
    assert str(mine) in line and "config_default.yml" not in line
    assert "not in this file nor the defaults" in line
    assert "did you mean 'voice'?" in line


@pytest.mark.parametrize("question", ["", "   ", "\t\n", "\u200b", "\u200b \ufeff"])
def test_an_empty_question_is_refused_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], question: str
) -> None:
    assert ask(tmp_path, question) == 2
    line = error_line(capsys)
    assert "the question is empty" in line and "ragbudget ask" in line


@pytest.mark.parametrize(
    ("text", "key", "suggestion"),
    [
        (
            "surfaces:\n  chat:\n    max_token: 900\n",
            "surfaces.chat.max_token",
            "max_tokens",
        ),
        ("retreival:\n  k: 9\n", "retreival", "retrieval"),
        ("retrieval:\n  dense:\n    fetchk: 9\n", "retrieval.dense.fetchk", "fetch_k"),
        ("rerank:\n  topn: 3\n", "rerank.topn", "top_n"),
    ],
)
def test_a_bad_config_fails_first_with_the_closest_key(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    text: str,
    key: str,
    suggestion: str,
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(text, encoding="utf-8")
    assert ask(tmp_path, "q?", "--config", str(bad)) == 2
    line = error_line(capsys)
    assert str(bad) in line and f"'{key}'" in line and "unknown key" in line
    assert f"did you mean '{suggestion}'?" in line


def test_an_unknown_key_with_nothing_close_gets_no_guess(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("retrieval:\n  zzzzzz: 1\n", encoding="utf-8")
    assert ask(tmp_path, "q?", "--config", str(bad)) == 2
    line = error_line(capsys)
    assert "unknown key" in line and "did you mean" not in line


def test_a_good_question_does_reach_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixture is not vacuous: with nothing wrong, `ask` opens the index."""
    assert ask(tmp_path, "When are refunds paid?") == 3
    assert "AssertionError" in error_line(capsys)


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [(["indx", "docs"], "index"), (["inspcet"], "inspect"), (["doctr"], "doctor")],
)
def test_a_mistyped_command_gets_the_closest(
    capsys: pytest.CaptureFixture[str], argv: list[str], suggestion: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert f"did you mean '{suggestion}'?" in capsys.readouterr().err


def test_an_unknown_encoding_fails_before_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("text", encoding="utf-8")
    argv = ["index", str(folder), "--index", str(tmp_path / "ix")]
    assert cli.main([*argv, "--encoding", "utf-8,latin-9x"]) == 2
    assert "'latin-9x': not an encoding" in error_line(capsys)


REFUSED_LIGHT = """
import sys
from langchain_ragbudget.cli._main import main
code = main(["ask", *sys.argv[1:], "--index", "no-such-index-folder"])
heavy = ("langchain_core.retrievers", "langchain_core.runnables.base", "chromadb",
         "bm25s", "fastembed", "langchain_ragbudget.index._hybrid_index")
print(code, sorted(name for name in heavy if name in sys.modules))
"""


@pytest.mark.parametrize(
    "argv",
    [["q?", "--surface", "serach"], ["  "], ["q?", "--config", "{bad}"]],
    ids=["surface", "question", "config"],
)
def test_a_refusal_loads_neither_the_pipeline_nor_the_index(
    tmp_path: Path, argv: list[str]
) -> None:
    """What fails first costs a configuration read, not the pipeline's imports."""
    bad = tmp_path / "bad.yml"
    bad.write_text("retreival: {k: 3}\n", encoding="utf-8")
    argv = [str(bad) if item == "{bad}" else item for item in argv]
    shown = subprocess.run(
        [sys.executable, "-c", REFUSED_LIGHT, *argv],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert shown.stdout.split("\n")[0] == "2 []", shown.stdout + shown.stderr
    assert "did you mean" in shown.stderr or "question is empty" in shown.stderr
