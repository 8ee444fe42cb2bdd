"""The index commands: `index` (ingest a folder), `inspect` and `repair`.

The index is imported inside the commands: the parser reads the constants here
without loading it.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_ragbudget.cli._exit_codes import EXIT_OK, EXIT_PARTIAL
from langchain_ragbudget.cli._output import print_json
from langchain_ragbudget.errors import InvalidInputError

if TYPE_CHECKING:
    from rich.console import Console

PRUNE_HANDFUL = 5  # --prune removes up to this many documents without --yes ...
PRUNE_SHARE = 0.10  # ... or up to this share of the index
NAMES_SHOWN = 20  # skipped files named per reason; the count is always exact


def command_config(args: argparse.Namespace) -> Any:
    """`--config` with `--lock-timeout` and `ask --k` over it, read before any index."""
    config = _config(args)
    fetch_k = getattr(args, "k", None)
    if fetch_k is not None:
        retrieval = config.retrieval
        sides = {
            side: getattr(retrieval, side).model_copy(update={"fetch_k": fetch_k})
            for side in ("sparse", "dense")
        }
        config = config.model_copy(
            update={"retrieval": retrieval.model_copy(update=sides)}
        )
    return config


def open_index(
    args: argparse.Namespace,
    console: Console,
    *,
    create: bool = False,
    config: Any = None,
) -> Any:
    """The index of `--index` (or the configured one); only `index` may create it.

    `index` holds the write lock until the index is closed, so a second waits.
    """
    from langchain_ragbudget.index import HybridIndex

    if config is None:
        config = command_config(args)
    directory = args.index or Path(config.index.directory)
    with console.status(f"opening index {directory}"):
        index = HybridIndex.open(directory, config, create=create, write=create)
    report = index.sync_report
    if create and report.only_dense and not (report.only_sparse or report.differing):
        console.print(  # what a run stopped before publishing wrote: reused
            f"{directory}: resuming: {len(report.only_dense)} chunk(s) written by a "
            "run that stopped before publishing are reused",
            highlight=False,
            markup=False,
        )
        return index
    if not (create or report.in_sync or report.writer):
        return index  # damage: the index's own warning said it, once
    style = "green" if report.in_sync else "yellow"
    console.print(f"{directory}: {report.summary()}", style=style, markup=False)
    return index


def _config(args: argparse.Namespace) -> Any:
    """The configuration of `--config`, with `--lock-timeout` over it if given."""
    from langchain_ragbudget.config._settings import load_config

    config = load_config(args.config)
    timeout = getattr(args, "lock_timeout", None)
    if timeout is None:
        return config
    if timeout < 0:
        raise InvalidInputError(f"--lock-timeout must be 0 or more, got {timeout:g}")
    settings = config.index.model_copy(update={"lock_timeout": timeout})
    return config.model_copy(update={"index": settings})


def run_index(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget index PATH`: ingest, print a summary; exit codes in `INDEX_EPILOG`.

    An expected refusal (an empty file) exits 0: saying so is the whole job. So
    does a file the last run already reported unreadable, unchanged since, so a
    scheduled job stays quiet until something changes.
    """
    from langchain_ragbudget.cli._views import ingest_report, name_list
    from langchain_ragbudget.index._folder_plan import check_found, scan_path
    from langchain_ragbudget.index._loaders import check_encodings
    from langchain_ragbudget.progress import ProgressBars

    given: Path = args.path
    encodings = check_encodings(args.encoding.split(","))
    found = scan_path(given, args.exclude)
    if not found.files and not args.prune:  # name what was skipped, then refuse
        for item in found.skipped:
            console.print(
                f"skipped ({item.reason}): {item.path} {item.detail}".rstrip(),
                markup=False,
            )
    check_found(found, given, prune=args.prune)
    with open_index(args, console, create=True) as index:
        plan = index.plan_ingest(given, found, encodings)
        if args.prune and not args.yes:
            _refuse_large_prune(
                plan.gone, len(index.document_ids), plan.scope, index.root
            )
        with ProgressBars(console, transient=True) as progress:
            summary = index.ingest_plan(plan, prune=args.prune, progress=progress)
        skipped = [(item.reason, item.path, item.detail) for item in summary.skipped]
        for part in ingest_report(given, index, summary, skipped, NAMES_SHOWN):
            console.print(part, highlight=False, markup=False)
        if summary.missing:
            console.print(
                f"[yellow]{len(summary.missing)} indexed document(s) have no file "
                f"under {given} (e.g. {summary.missing[0]}); --prune deletes "
                "them[/yellow]",
                highlight=False,
            )
        if summary.reported_before:
            console.print(
                f"{len(summary.reported_before)} unreadable file(s) unchanged since "
                f"the last run reported them (not a new failure: exit 0 for them): "
                f"{name_list(summary.reported_before, 3)}",
                highlight=False,
                markup=False,
            )
    new_failures = set(summary.unreadable) - set(summary.reported_before)
    return EXIT_PARTIAL if new_failures else EXIT_OK


def _refuse_large_prune(
    gone: Sequence[str], total: int, scope: str, root: Path
) -> None:
    """Without --yes, --prune removes a handful of documents or a small share."""
    from langchain_ragbudget.cli._views import name_list

    if len(gone) > PRUNE_HANDFUL and len(gone) > PRUNE_SHARE * total:
        raise InvalidInputError(
            f"--prune would remove {len(gone)} of the {total} indexed documents "
            f"(those under {scope if scope != '.' else root} whose file is gone, "
            f"e.g. {name_list(gone, 3)}); nothing was indexed or removed. Check the "
            "path, or add --yes to remove them."
        )


def interrupted_message(args: argparse.Namespace) -> str:
    """What an interrupted `index` or `repair` left: the last committed version."""
    from langchain_ragbudget.config._settings import load_config
    from langchain_ragbudget.index._versions import committed_documents

    try:
        directory = args.index or Path(load_config(args.config).index.directory)
    except Exception:  # the configuration is not readable: say what is known
        return "interrupted; run the same command again to resume"
    held = committed_documents(directory)
    if held is None:
        state = f"no version of the index at {directory} was committed yet"
    else:
        state = (
            f"the index at {directory} holds its last committed version "
            f"({held} document(s))"
        )
    return (
        f"interrupted: {state}; run the same command again to resume "
        "(vectors already written are reused)"
    )


def run_inspect(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget inspect`: what an index holds; exit 1 on damage or out of sync."""
    from langchain_ragbudget.cli._views import inspection_report
    from langchain_ragbudget.config._settings import load_config
    from langchain_ragbudget.index import HybridIndex

    config = load_config(args.config)
    directory = args.index or Path(config.index.directory)
    found = HybridIndex.inspect(directory, config)
    if args.json:
        print_json(found.to_dict(documents=args.documents))
        return EXIT_OK if found.healthy else EXIT_PARTIAL
    for part in inspection_report(found):
        console.print(part, highlight=False, markup=False)
    if args.documents:
        for line in document_lines(found):
            console.print(line, highlight=False, markup=False, overflow="fold")
    return EXIT_OK if found.healthy else EXIT_PARTIAL


def document_lines(found: Any) -> list[str]:
    """Every file an inspection knows: indexed, skipped and refused, with why."""
    from langchain_ragbudget.ledger._names import display_name

    lines = [
        f"indexed: {display_name(key, None)} ({count} chunk(s))"
        for key, count in sorted(found.indexed.items())
    ]
    lines += [
        f"skipped ({s.reason}): {display_name(s.path, None)} {s.detail}".rstrip()
        for s in found.skipped
    ]
    lines += [
        f"refused: {display_name(error.path, None)}: {error.problem}"
        for error in found.refused
    ]
    lines.append(
        f"{len(found.indexed)} indexed, {len(found.skipped)} skipped, "
        f"{len(found.refused)} refused (as the last ingest of each folder found them)"
    )
    return lines


def run_repair(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget repair`: bring the two sides together; exit 0 when in sync."""
    from langchain_ragbudget.index import HybridIndex

    config = _config(args)
    directory = args.index or Path(config.index.directory)
    with console.status(f"repairing index {directory}"):
        index, report = HybridIndex.repair_directory(directory, config)
    for line in report.lines():
        console.print(line, highlight=False, markup=False)
    console.print(
        f"now: {index.sync_report.summary()}; {len(index.document_ids)} "
        f"document(s), {index.chunk_count} chunk(s)",
        highlight=False,
    )
    return 0 if index.sync_report.in_sync else 1
