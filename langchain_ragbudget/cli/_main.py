"""The `ragbudget` command: parse, run one command, map errors to exit codes.

Commands: demo, eval, tune, index, ask, repair, inspect, config, doctor, memory.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import langchain_ragbudget
from langchain_ragbudget.cli._arguments import add_commands
from langchain_ragbudget.cli._ask import run_ask
from langchain_ragbudget.cli._config_command import run_config
from langchain_ragbudget.cli._doctor import run_doctor
from langchain_ragbudget.cli._eval_commands import run_eval, run_tune
from langchain_ragbudget.cli._exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_UNEXPECTED,
    EXIT_USAGE,
)
from langchain_ragbudget.cli._index_commands import (
    interrupted_message,
    run_index,
    run_inspect,
    run_repair,
)
from langchain_ragbudget.cli._memory_commands import run_memory
from langchain_ragbudget.cli._output import make_console
from langchain_ragbudget.config._suggest import did_you_mean
from langchain_ragbudget.errors import RagBudgetError
from langchain_ragbudget.ledger._names import display_name

_EPILOG = """\
Put --debug before the command: ragbudget --debug ask "..."
With --json (ask, eval, inspect) stdout holds one JSON object and nothing else;
tables, progress and messages go to stderr.

exit codes:
  0    success; for `index`: every file was indexed, unchanged, skipped as
       expected (unsupported type, link loop, dangling link, --exclude) or
       refused as expected (empty, whitespace-only, a placeholder), or could
       not read a file the last run reported and that is unchanged since
  1    the command ran, but reported a failure: `index` could not read a file
       (unreadable, not in --encoding, a broken PDF), new or changed since the
       last run (ragbudget index --help); `repair` left the sides apart;
       `inspect` found damage or the two sides out of sync
  2    usage, configuration, input or file error, or no index at --index
       (one line on stderr)
  3    unexpected error: one line on stderr; --debug shows the traceback
  130  interrupted (Ctrl-C)
  141  the output pipe was closed early
"""


class _Parser(argparse.ArgumentParser):
    """argparse's parser, adding "did you mean" to an invalid choice (a command)."""

    def error(self, message: str) -> NoReturn:
        """Print usage and `message` (with the closest choice), exit 2."""
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            choices = [c.strip("'") for c in found.group("choices").split(", ")]
            message += did_you_mean(found.group("word"), choices)
        super().error(message)


# argparse's words; Python 3.12.8+ drops the quotes around the choices
_INVALID_CHOICE = re.compile(
    r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)"
)


def _parser() -> argparse.ArgumentParser:
    """The `ragbudget` parser: `--debug`, then one sub-command (see `_arguments`)."""
    parser: argparse.ArgumentParser = _Parser(
        prog="ragbudget",
        description=__doc__,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="on an error, print the full traceback too",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"ragbudget {langchain_ragbudget.__version__}",
        help="print the installed version and exit",
    )
    add_commands(parser.add_subparsers(dest="command", required=True))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse arguments and run a command; return the exit code.

    Every failure ends as one `error: ...` line on stderr and an exit code (see
    `_EPILOG`); the traceback is printed only under `--debug`. Usage errors are
    argparse's: usage text and SystemExit(2).

    Args:
        argv: The arguments after the program name; `sys.argv[1:]` if None.

    Returns:
        0 on success; 1 when the command ran but reported items it could not
        process (or `repair` left the sides out of sync); 2 for usage,
        configuration, input or file errors (every error of this package); 3 for
        anything unexpected; 130 on Ctrl-C; 141 when the output pipe closed.

    Raises:
        SystemExit: From argparse, for bad arguments and `--help`.
    """
    args = _parser().parse_args(argv)
    debug: bool = args.debug
    console = make_console(to_stderr=getattr(args, "json", None) in (True, "-"))
    try:
        if args.command == "demo":
            from langchain_ragbudget.cli._demo import run_demo

            run_demo(args.config, console)
        elif args.command == "eval":
            run_eval(args, console, argv)
        elif args.command == "tune":
            run_tune(args, console)
        elif args.command == "index":
            return run_index(args, console)
        elif args.command == "ask":
            run_ask(args, console)
        elif args.command == "inspect":
            return run_inspect(args, console)
        elif args.command == "config":
            run_config(args, console)
        elif args.command == "memory":
            return run_memory(args, console)
        elif args.command == "doctor":
            return run_doctor(args, console)
        else:
            return run_repair(args, console)
    except KeyboardInterrupt:
        message = "interrupted"
        if args.command in ("index", "repair"):  # say what the index holds now
            message = interrupted_message(args)
        return _fail(message, EXIT_INTERRUPTED, debug)
    except RagBudgetError as error:  # before OSError: some are ConnectionErrors
        return _fail(str(error), EXIT_USAGE, debug)
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except OSError as error:
        return _fail(_os_error(error), EXIT_USAGE, debug)
    except Exception as error:
        from langchain_ragbudget.index._write_errors import disk_failure

        reason = disk_failure(error)  # outside an index write (one is IndexWriteError)
        if reason is not None:
            return _fail(f"{reason}: {error}", EXIT_USAGE, debug)
        text = f"unexpected {type(error).__name__}"
        if str(error):
            text += f": {error}"
        if not debug:
            text += " (run with --debug for the traceback)"
        return _fail(text, EXIT_UNEXPECTED, debug)
    return EXIT_OK


def _fail(message: str, code: int, debug: bool) -> int:
    """Print `message` as one line on stderr and return `code`.

    Under --debug the traceback of the exception being handled comes first.
    """
    if debug:
        traceback.print_exc(file=sys.stderr)
    print(f"error: {_one_line(message)}", file=sys.stderr, flush=True)
    return code


def _one_line(text: str) -> str:
    """`text` on one line: blanks folded, then shown through `display_name`."""
    return display_name(" ".join(text.split()), None)


def _os_error(error: OSError) -> str:
    """An OSError as `path: reason`, naming both paths of a rename or copy."""
    reason = error.strerror or str(error) or type(error).__name__
    paths = [str(p) for p in (error.filename, error.filename2) if p is not None]
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


def _stdout_to_devnull() -> None:
    """After a broken pipe, point stdout at /dev/null so the exit flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (tests, notebooks)
        pass


class _NamedFormatter(logging.Formatter):
    """Another library's message after its logger's name; this package's as it is."""

    def format(self, record: logging.LogRecord) -> str:
        message = super().format(record)
        own = record.name.split(".", 1)[0] == "langchain_ragbudget"
        return message if own else f"{record.name}: {message}"


def name_library_warnings() -> logging.Handler:
    """Print logged warnings on stderr, another library's with its logger's name.

    Without a handler Python prints a bare message ("EOF marker not found", from
    pypdf reading a broken file) that names neither the library nor the file's
    context; the application, not a library, configures logging, so the console
    script does it here.
    """
    handler = logging.StreamHandler()
    handler.setFormatter(_NamedFormatter())
    handler.setLevel(logging.WARNING)
    logging.getLogger().addHandler(handler)
    return handler


def run() -> None:
    """Console-script entry point."""
    name_library_warnings()
    try:
        code = main()
    except KeyboardInterrupt:  # while parsing or importing, before a command ran
        print("error: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
    sys.exit(code)


if __name__ == "__main__":
    run()
