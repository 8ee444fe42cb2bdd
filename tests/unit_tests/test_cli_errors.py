"""The CLI turns every failure into one `error:` line and an exit code.

Tracebacks only under `--debug`. Commands are monkeypatched to raise where the
failure is not about configuration, so these tests build no index and no model.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import pytest

from langchain_ragbudget.cli import _demo as demo
from langchain_ragbudget.cli import _main as cli
from langchain_ragbudget.cli._eval_commands import link_from
from langchain_ragbudget.errors import IndexLoadError, ModelUnavailableError
from langchain_ragbudget.evaluation import _harness as evaluation
from langchain_ragbudget.evaluation import _tuning as tuning
from langchain_ragbudget.index._loaders import read_file


def one_error_line(err: str) -> str:
    """The single line on stderr; fails if there is more (or a traceback)."""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("retrieval:\n  rrf_c: .inf\n", "retrieval.rrf_c"),
        ("surfaces:\n  chat:\n    max_docs: yes\n", "surfaces.chat.max_docs"),
        ("retrieval:\n  k: 3\n  k: 4\n", "retrieval.k"),
        ("surfaces: [1, 2]\n", "surfaces"),
        ("retrieval: {k: [1,\n", "line 2"),
    ],
    ids=["inf", "bool-for-int", "duplicate-key", "surfaces-a-list", "bad-yaml"],
)
def test_bad_config_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(text, encoding="utf-8")
    assert cli.main(["demo", "--config", str(bad)]) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert str(bad) in line and f"'{key}'" in line
    assert captured.out == ""


@pytest.mark.parametrize("kind", ["missing", "directory"])
def test_unreadable_config_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    path = tmp_path / "absent.yml" if kind == "missing" else tmp_path
    assert cli.main(["eval", str(tmp_path), "--config", str(path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert str(path) in line and "cannot read" in line


def test_debug_shows_the_traceback_and_the_same_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("retrieval:\n  rrf_c: .nan\n", encoding="utf-8")
    assert cli.main(["--debug", "demo", "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):")
    assert "ConfigError" in err
    last = err.splitlines()[-1]
    assert last.startswith("error: ") and "retrieval.rrf_c" in last


def _raise(error: BaseException) -> object:
    def command(*args: object, **kwargs: object) -> None:
        raise error

    return command


def test_unexpected_exception_is_one_line_exit_3(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "run_eval", _raise(RuntimeError("boom\nat line two")))
    assert cli.main(["eval", "data"]) == 3
    line = one_error_line(capsys.readouterr().err)
    assert line == (
        "error: unexpected RuntimeError: boom at line two "
        "(run with --debug for the traceback)"
    )


def test_unexpected_exception_under_debug_has_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "run_eval", _raise(RuntimeError("boom")))
    assert cli.main(["--debug", "eval", "data"]) == 3
    err = capsys.readouterr().err
    assert "Traceback (most recent call last):" in err
    assert "raise error" in err and "RuntimeError: boom" in err
    assert err.splitlines()[-1] == "error: unexpected RuntimeError: boom"


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            FileNotFoundError(2, "No such file or directory", "/data/corpus.jsonl"),
            "error: /data/corpus.jsonl: No such file or directory",
        ),
        (
            PermissionError(13, "Permission denied", "/data/out.json"),
            "error: /data/out.json: Permission denied",
        ),
        (
            IsADirectoryError(21, "Is a directory", "/data"),
            "error: /data: Is a directory",
        ),
        (
            OSError(18, "Invalid cross-device link", "/a", None, "/b"),
            "error: /a -> /b: Invalid cross-device link",
        ),
        (OSError("disk on fire"), "error: disk on fire"),
        (IndexLoadError("ix: no manifest"), "error: ix: no manifest"),
        (ModelUnavailableError("no model"), "error: no model"),
    ],
)
def test_expected_failures_are_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    error: Exception,
    expected: str,
) -> None:
    monkeypatch.setattr(cli, "run_eval", _raise(error))
    assert cli.main(["eval", "data"]) == 2
    assert one_error_line(capsys.readouterr().err) == expected


def test_interrupt_is_one_line_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "run_demo", _raise(KeyboardInterrupt()))
    assert cli.main(["demo"]) == 130
    assert one_error_line(capsys.readouterr().err) == "error: interrupted"


def test_broken_pipe_is_quiet_exit_141(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "run_eval", _raise(BrokenPipeError(32, "Broken pipe")))
    assert cli.main(["eval", "data"]) == 141
    assert capsys.readouterr().err == ""


def test_message_cannot_smuggle_control_characters(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(
        cli, "run_eval", _raise(IndexLoadError("bad\x1b[2K\rerror: all fine"))
    )
    assert cli.main(["eval", "data"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "\x1b" not in line and "\r" not in line
    assert line == "error: bad\\x1b[2K error: all fine"


@pytest.mark.parametrize(("returned", "command"), [(1, "index"), (1, "repair")])
def test_command_exit_codes_are_kept(
    monkeypatch: pytest.MonkeyPatch, returned: int, command: str
) -> None:
    monkeypatch.setattr(cli, f"run_{command}", lambda args, console: returned)
    argv = [command, "folder"] if command == "index" else [command]
    assert cli.main(argv) == returned


def test_usage_errors_keep_argparse_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["eval", "data", "--limit", "many"])
    assert caught.value.code == 2
    assert "is not a whole number" in capsys.readouterr().err


def test_help_documents_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(["--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "--debug" in out and "exit codes:" in out
    assert "refused as expected" in out and "--json" in out
    for code in ("0", "1", "2", "3", "130"):
        assert f"\n  {code} " in out


def test_run_exits_130_on_interrupt_outside_a_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "main", _raise(KeyboardInterrupt()))
    with pytest.raises(SystemExit) as caught:
        cli.run()
    assert caught.value.code == 130
    assert one_error_line(capsys.readouterr().err) == "error: interrupted"


@pytest.mark.parametrize("value", ["0", "-5"])
def test_limit_and_k_must_be_positive(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    for option in ("--limit", "--k"):
        with pytest.raises(SystemExit) as caught:
            cli.main(["eval", "data", option, value])
        assert caught.value.code == 2
        assert "must be at least 1" in capsys.readouterr().err


def _commands() -> list[str]:
    subparsers = next(
        action
        for action in cli._parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )
    return sorted(subparsers.choices)


@pytest.mark.parametrize("command", ["", *_commands()])
def test_every_help_page_prints(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse formats help with %: a literal "10%" once crashed `index --help`
    with pytest.raises(SystemExit) as exited:
        cli.main([command, "--help"] if command else ["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: ragbudget {command}".rstrip())


def test_a_library_warning_names_its_library(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "docs"
    broken.mkdir()
    (broken / "broken.pdf").write_bytes(b"%PDF-1.4 broken")
    handler = cli.name_library_warnings()
    try:
        with pytest.raises(ValueError, match="unreadable PDF"):
            read_file(broken / "broken.pdf")
        logging.getLogger("langchain_ragbudget.retrieval._rerank").warning(
            "rerank skipped"
        )
    finally:
        logging.getLogger().removeHandler(handler)
    err = capsys.readouterr().err.splitlines()
    assert "pypdf._reader: EOF marker not found" in err
    assert "rerank skipped" in err  # the package's own lines stay as they are


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("ran although an output path was bad")


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["eval", "DATA", "--json"], "--json"),
        (["eval", "DATA", "--plot"], "--plot"),
        (["eval", "DATA", "--update"], "--update"),
        (["eval", "DATA", "--weak-evidence-yaml"], "--weak-evidence-yaml"),
        (["eval", "DATA", "--calibration-plot"], "--calibration-plot"),
        (["tune", "DATA", "--split", "test", "--allow-test-split", "--out"], "--out"),
    ],
)
@pytest.mark.parametrize("where", ["under-a-file", "a-folder"])
def test_a_bad_output_path_fails_before_the_run(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: list[str],
    option: str,
    where: str,
) -> None:
    data = tmp_path / "beir"
    (data / "qrels").mkdir(parents=True)
    (data / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
    (tmp_path / "a-file").write_text("x")
    bad = tmp_path / "a-file" / "out" if where == "under-a-file" else tmp_path
    monkeypatch.setattr(evaluation, "evaluate", _never)
    monkeypatch.setattr(tuning, "tune", _never)
    args = [str(data) if part == "DATA" else part for part in command]
    assert cli.main([*args, str(bad)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"error: {option} {bad}: ")


def test_links_in_the_updated_markdown_work_from_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    report = tmp_path / "docs" / "report.md"
    assert link_from(report, Path("docs/plots/p.png")) == "plots/p.png"
    assert link_from(report, tmp_path / "elsewhere" / "p.png") == "../elsewhere/p.png"
    assert link_from(Path("report.md"), Path("p.png")) == "p.png"
