"""`ragbudget` command line: demo, eval, tune, index, ask, repair, inspect, config."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget.config import DEFAULT_SURFACE
from langchain_ragbudget.errors import InvalidInputError, RagBudgetError

EXIT_OK = 0
EXIT_PARTIAL = 1  # the command ran; some items failed and were reported
EXIT_USAGE = 2  # bad arguments, configuration, input or file (argparse's code too)
EXIT_UNEXPECTED = 3  # anything else: a bug to report, with --debug's traceback
EXIT_BROKEN_PIPE = 141  # stdout closed early (`ragbudget ... | head`): 128 + SIGPIPE
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT

_EPILOG = """\
Put --debug before the command: ragbudget --debug ask "..."
With --json (ask, eval, inspect) stdout holds one JSON object and nothing else;
tables, progress and messages go to stderr.

exit codes:
  0    success; for `index`: every file was indexed, unchanged, skipped as
       expected (unsupported type, link loop, dangling link, --exclude) or
       refused as expected (empty, whitespace-only, a placeholder)
  1    the command ran, but reported a failure: `index` could not read a file
       (unreadable, not UTF-8, a broken PDF); `repair` left the sides apart;
       `inspect` found damage or the two sides out of sync
  2    usage, configuration, input or file error, or no index at --index
       (one line on stderr)
  3    unexpected error: one line on stderr; --debug shows the traceback
  130  interrupted (Ctrl-C)
  141  the output pipe was closed early
"""


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    commands = parser.add_subparsers(dest="command", required=True)

    def command(
        name: str, help: str, *, index: bool = False
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help)
        sub.add_argument("--config", help="a YAML file merged over the defaults")
        if index:
            sub.add_argument(
                "--index", type=Path, help="index directory (config index.directory)"
            )
        return sub

    command("demo", "run the pipeline on the sample corpus")
    evaluate = command("eval", "measure every stage on a BEIR-format dataset")
    evaluate.add_argument(
        "data", type=Path, help="BEIR folder: corpus, queries, qrels/"
    )
    evaluate.add_argument("--split", default="test", help="qrels/<split>.tsv (test)")
    evaluate.add_argument(
        "--surface", action="append", help="surface(s) to budget for (all by default)"
    )
    evaluate.add_argument(
        "--limit", type=_positive, help="evaluate the first N queries"
    )
    evaluate.add_argument(
        "--k", type=_positive, default=10, help="k of hit@k and recall@k"
    )
    evaluate.add_argument(
        "--keep-identical-ids",
        action="store_true",
        help="count a hit whose id is the query's own (BEIR leaves it out)",
    )
    evaluate.add_argument(
        "--chunk-size",
        type=_positive,
        action="append",
        help="also measure evidence survival with the corpus indexed in chunks of "
        "this many tokens (repeatable; indexes are cached)",
    )
    evaluate.add_argument(
        "--weak-fit",
        metavar="SPLIT",
        help="fit the combined weak-evidence signal on qrels/SPLIT.tsv (e.g. train) "
        "and report its AUROC beside the single threshold's",
    )
    evaluate.add_argument(
        "--calibration-plot",
        type=Path,
        help="with --weak-fit: write the combined signal's reliability diagram (PNG)",
    )
    evaluate.add_argument(
        "--weak-evidence-yaml",
        type=Path,
        help="with --weak-fit: write the fitted model as a YAML to load with --config",
    )
    evaluate.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="FILE",
        help="the full results as JSON: to FILE, or alone (or -) to stdout, "
        "with the tables on stderr",
    )
    evaluate.add_argument("--plot", type=Path, help="write the survival plot (PNG)")
    evaluate.add_argument(
        "--update",
        type=Path,
        help="replace the eval section of this Markdown file (e.g. BENCHMARKS.md)",
    )
    tune = command(
        "tune", "choose the fusion method, weights and c on labelled (train) queries"
    )
    tune.add_argument("data", type=Path, help="BEIR folder: corpus, queries, qrels/")
    tune.add_argument(
        "--split", default="train", help="qrels/<split>.tsv to tune on (train)"
    )
    tune.add_argument(
        "--out", type=Path, help="write the tuned `retrieval:` section here (YAML)"
    )
    tune.add_argument(
        "--json", action="store_true", help="print the results as JSON on stdout"
    )
    tune.add_argument("--limit", type=_positive, help="tune on the first N queries")
    tune.add_argument(
        "--keep-identical-ids",
        action="store_true",
        help="count a hit whose id is the query's own (BEIR leaves it out)",
    )
    tune.add_argument(
        "--allow-test-split",
        action="store_true",
        help="tune on the test split (or one sharing its queries) anyway; its "
        "numbers then say nothing about new queries",
    )
    index = command("index", "ingest a folder of text/Markdown/HTML/PDF", index=True)
    index.add_argument("path", type=Path, help="a folder (or one file) to ingest")
    index.add_argument(
        "--prune",
        action="store_true",
        help="delete indexed documents under PATH whose file is gone from PATH "
        f"(asks for --yes above {PRUNE_HANDFUL} documents and "
        f"{PRUNE_SHARE * 100:.0f}%% of the index)",  # %% : argparse formats help
    )
    index.add_argument(
        "--yes",
        action="store_true",
        help="let --prune remove more than a small share of the index",
    )
    index.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files or folders matching GLOB (path under PATH, or name); "
        "repeatable",
    )
    ask = command(
        "ask", "ask an index a question; show evidence, prompt, answer", index=True
    )
    ask.add_argument("question", help="the question")
    ask.add_argument(
        "--surface",
        default=DEFAULT_SURFACE,
        help=f"whose budget to use ({DEFAULT_SURFACE})",
    )
    ask.add_argument(
        "--k",
        type=_positive,
        help="candidates each retriever hands to fusion "
        "(config retrieval.sparse/dense.fetch_k)",
    )
    ask.add_argument(
        "--no-prompt", action="store_true", help="do not show the prompt sent"
    )
    ask.add_argument("--json", action="store_true", help=_JSON_HELP)
    command("repair", "bring the two sides of an index in sync", index=True)
    inspect = command(
        "inspect",
        "what an index holds: documents, chunks, model, chunking, versions, sync, "
        "size; changes nothing",
        index=True,
    )
    inspect.add_argument("--json", action="store_true", help=_JSON_HELP)
    config = command(
        "config", "the effective configuration, validated, and where each value is from"
    )
    config.add_argument("--surface", help="only this surface's settings")
    config.add_argument("--json", action="store_true", help=_JSON_HELP)
    return parser


_JSON_HELP = "print one JSON object on stdout (messages go to stderr)"


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
    console = _console(to_stderr=getattr(args, "json", None) in (True, "-"))
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
        else:
            return run_repair(args, console)
    except KeyboardInterrupt:
        return _fail("interrupted", EXIT_INTERRUPTED, debug)
    except RagBudgetError as error:  # before OSError: some are ConnectionErrors
        return _fail(str(error), EXIT_USAGE, debug)
    except BrokenPipeError:
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    except OSError as error:
        return _fail(_os_error(error), EXIT_USAGE, debug)
    except Exception as error:
        text = f"unexpected {type(error).__name__}"
        if str(error):
            text += f": {error}"
        if not debug:
            text += " (run with --debug for the traceback)"
        return _fail(text, EXIT_UNEXPECTED, debug)
    return EXIT_OK


def _console(*, to_stderr: bool) -> Console:
    """The console for tables and messages: stderr when stdout carries JSON.

    Tables need room: when the output is not a terminal (make, CI logs) and
    COLUMNS is not set, 140 columns; COLUMNS, when set, is obeyed.
    """
    stream = sys.stderr if to_stderr else sys.stdout
    fixed = stream.isatty() or "COLUMNS" in os.environ
    return Console(stderr=to_stderr, width=None if fixed else 140)


def _print_json(data: Any) -> None:
    """One JSON object on stdout: the only thing a --json command writes there."""
    print(json.dumps(data, indent=2, ensure_ascii=False), flush=True)


PRUNE_HANDFUL = 5  # --prune removes up to this many documents without --yes ...
PRUNE_SHARE = 0.10  # ... or up to this share of the index
NAMES_SHOWN = 20  # skipped files named per reason; the count is always exact


def _open_index(
    args: argparse.Namespace, console: Console, *, create: bool = False
) -> Any:
    """The index of `--index` (or the configured one); only `index` may create it."""
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.index._hybrid_index import HybridIndex

    config = load_config(args.config)
    fetch_k = getattr(args, "k", None)
    if fetch_k is not None:  # the BM25 side takes its fetch size when it opens
        retrieval = config.retrieval
        sides = {
            side: getattr(retrieval, side).model_copy(update={"fetch_k": fetch_k})
            for side in ("sparse", "dense")
        }
        config = config.model_copy(
            update={"retrieval": retrieval.model_copy(update=sides)}
        )
    directory = args.index or Path(config.index.directory)
    with console.status(f"opening index {directory}"):
        index = HybridIndex.open(directory, config, create=create)
    style = "green" if index.sync_report.in_sync else "yellow"
    console.print(f"[{style}]{directory}: {index.sync_report.summary()}[/{style}]")
    return index


def _under(scope: str, relative: str) -> str:
    """A document id: `relative` (POSIX, under the given path) under `scope`."""
    if relative in ("", "."):
        return scope
    return relative if scope == "." else f"{scope}/{relative}"


def _in_scope(doc_id: str, scope: str) -> bool:
    return scope == "." or doc_id == scope or doc_id.startswith(scope + "/")


def run_index(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget index PATH`: ingest, then print a summary.

    Document ids are paths relative to the index's root folder (recorded in its
    manifest by the first `index`), so a file or subfolder of it can be indexed
    again under the same ids; a path outside the root is refused. Exit code: 0 when
    every file was indexed, unchanged, skipped as expected (unsupported type, link
    loop, dangling link, `--exclude`) or refused as expected (empty, whitespace-only,
    a placeholder: there is nothing to index, and saying so is the whole job); 1
    when a file could not be read (unreadable, not UTF-8, a broken PDF); 2 for
    usage and index errors.
    """
    from langchain_ragbudget.cli._views import ingest_report
    from langchain_ragbudget.index._loaders import scan

    given: Path = args.path
    if not given.exists():
        raise InvalidInputError(f"{given} does not exist")
    found = scan(given, args.exclude)
    if not found.files and not args.prune:
        for item in found.skipped:
            console.print(
                f"skipped ({item.reason}): {item.path} {item.detail}".rstrip(),
                markup=False,
            )
        raise InvalidInputError(
            f"nothing to index under {given}: no .txt, .md, .html or .pdf file "
            f"({len(found.skipped)} skipped)"
        )
    index = _open_index(args, console, create=True)
    doc_id = _document_ids(index, given)
    ids = {doc_id(path.relative_to(given).as_posix()): path for path in found.files}
    scope = doc_id("")
    gone = [d for d in index.document_ids if _in_scope(d, scope) and d not in ids]
    if args.prune and not args.yes:
        _refuse_large_prune(gone, len(index.document_ids), scope, index.root)
    summary, unreadable = _ingest(index, ids, given, console)
    if gone and args.prune:
        before = index.chunk_count
        summary.deleted += index.delete(gone)
        summary.chunks_deleted += before - index.chunk_count
    skipped = [(item.reason, doc_id(item.path), item.detail) for item in found.skipped]
    for part in ingest_report(given, index, summary, skipped, NAMES_SHOWN):
        console.print(part, highlight=False, markup=False)
    if gone and not args.prune:
        console.print(
            f"[yellow]{len(gone)} indexed document(s) have no file under {given} "
            f"(e.g. {gone[0]}); --prune deletes them[/yellow]",
            highlight=False,
        )
    return EXIT_PARTIAL if unreadable else EXIT_OK


def _document_ids(index: Any, given: Path) -> Callable[[str], str]:
    """Ids for files under `given`: their paths relative to the index's root.

    The first `index` records the root; a path outside it is refused.
    """
    target = given.resolve()
    if index.root is None:  # the first `index` (or an index made before roots)
        index.set_root(target if target.is_dir() else target.parent)
    root: Path = index.root
    if target != root and root not in target.parents:
        raise InvalidInputError(
            f"{given} is outside {root}, the folder this index's document ids are "
            f"relative to (recorded when it was first indexed): index files under "
            f"{root}, or use another --index"
        )
    scope = target.relative_to(root).as_posix()
    if target.is_file():
        return lambda relative: scope
    return lambda relative: _under(scope, relative)


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


def _ingest(
    index: Any, ids: dict[str, Path], given: Path, console: Console
) -> tuple[Any, int]:
    """Read every file, then upsert them; (summary, files that could not be read).

    Reading all files first gives each stage (reading, chunking, embedding) a bar
    with its true total; the index holds every chunk in memory anyway. A file
    that cannot be read is refused like an empty one, but counted apart: it is a
    failure, where an empty file is an expected refusal.
    """
    from langchain_ragbudget.index._loaders import FileError, load_file
    from langchain_ragbudget.progress import ProgressBars, StageProgress

    read_errors: list[FileError] = []
    documents: list[Document] = []
    with ProgressBars(console, transient=True) as progress:
        read = StageProgress(progress, "reading files", len(ids)).start()
        for key, path in ids.items():
            try:
                documents.append(load_file(path, given, doc_id=key))
            except ValueError as exc:
                read_errors.append(FileError(key, str(exc)))
            read.advance()
        summary = index.upsert(documents, progress=progress)
    summary.errors[:0] = read_errors
    return summary, len(read_errors)


def run_ask(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget ask QUESTION`: one question through an index and a surface."""
    from langchain_ragbudget.cli._demo import chat_model
    from langchain_ragbudget.cli._views import (
        explained_to_dict,
        pipeline_line,
        show_explained,
    )
    from langchain_ragbudget.factory import build_budget, build_reranker
    from langchain_ragbudget.pipeline import explain

    index = _open_index(args, console, create=False)
    config = index.config
    budget = build_budget(args.surface, config)  # a bad surface fails before work
    reranker = build_reranker(config)
    console.print(pipeline_line(config, reranker))
    llm = chat_model(config, console)
    explained = explain(
        args.question,
        index.as_retriever(),
        budget,
        reranker=reranker,
        llm=llm,
        tracing=config.tracing,
    )
    if args.json:
        _print_json(
            explained_to_dict(
                explained, args.surface, config, prompt=not args.no_prompt
            )
        )
        return
    show_explained(
        console,
        explained,
        args.surface,
        fusion_k=config.retrieval.k,
        show_prompt=not args.no_prompt,
    )


def run_inspect(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget inspect`: what an index holds, read without changing anything.

    Exit code 0 when nothing is damaged and the two sides hold the same chunks,
    1 when the report names damage or a difference, 2 when there is no index.
    """
    from langchain_ragbudget.cli._views import inspection_report
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.index._hybrid_index import HybridIndex

    config = load_config(args.config)
    directory = args.index or Path(config.index.directory)
    found = HybridIndex.inspect(directory, config)
    if args.json:
        _print_json(found.to_dict())
    else:
        for part in inspection_report(found):
            console.print(part, highlight=False)
    return EXIT_OK if found.healthy else EXIT_PARTIAL


def run_config(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget config`: the effective settings and where each one came from."""
    from langchain_ragbudget.cli._views import config_table
    from langchain_ragbudget.config import explain_config

    effective = explain_config(args.config)
    prefix = ""
    if args.surface is not None:
        effective.config.surface(args.surface)  # an unknown surface fails here
        prefix = f"surfaces.{args.surface}."
    values = [v for v in effective.values if v.key.startswith(prefix)]
    if args.json:
        _print_json(
            {
                "file": effective.file,
                "surface": args.surface,
                "settings": {
                    v.key: {
                        "value": v.value,
                        "origin": str(v.origin),
                        "source": v.source(effective.file),
                    }
                    for v in values
                },
            }
        )
        return
    console.print(config_table(effective, values))


def run_repair(args: argparse.Namespace, console: Console) -> int:
    """`ragbudget repair`: bring the two sides together; rebuild a damaged side.

    Never creates an index and never deletes the only copy of a chunk; see
    `langchain_ragbudget.index._hybrid_index`. Exit code 0 when the sides end in sync.
    """
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.index._hybrid_index import HybridIndex

    config = load_config(args.config)
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


def run_eval(
    args: argparse.Namespace, console: Console, argv: Sequence[str] | None
) -> None:
    """`ragbudget eval`: run, print the tables, write JSON / plot / Markdown."""
    from langchain_ragbudget._disk import atomic_write_text
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.evaluation._beir import load_beir
    from langchain_ragbudget.evaluation._harness import evaluate, evaluate_chunked
    from langchain_ragbudget.evaluation._report import (
        plot_calibration,
        plot_survival,
        rich_tables,
        to_markdown,
        update_section,
        weak_evidence_yaml,
    )
    from langchain_ragbudget.progress import ProgressBars

    config = load_config(args.config)
    for surface in args.surface or []:
        config.surface(surface)  # an unknown surface fails before any work
    for option, path in (
        ("--json", None if args.json in (None, "-") else Path(args.json)),
        ("--plot", args.plot),
        ("--calibration-plot", args.calibration_plot),
        ("--weak-evidence-yaml", args.weak_evidence_yaml),
        ("--update", args.update),
    ):
        if path is not None:
            check_writable(path, option)
    dataset = load_beir(args.data, args.split)
    if missing := dataset.judged_missing():
        console.print(
            f"note: the {args.split} qrels judge {len(missing)} document(s) relevant "
            f"that the corpus does not hold (e.g. {', '.join(missing[:3])}); they "
            "count as never retrieved",
            markup=False,
            highlight=False,
        )
    weak_fit = (  # named by its split in the report; same corpus as `dataset`
        replace(load_beir(args.data, args.weak_fit), name=f"{args.weak_fit} split")
        if args.weak_fit
        else None
    )
    with ProgressBars(console, transient=True) as progress:
        result = evaluate(
            dataset,
            config,
            surfaces=args.surface,
            k=args.k,
            limit=args.limit,
            progress=progress,
            ignore_identical_ids=not args.keep_identical_ids,
            weak_fit=weak_fit,
        )
        result.chunked = [
            evaluate_chunked(dataset, config, size, limit=args.limit, progress=progress)
            for size in args.chunk_size or []
        ]
    for table in rich_tables(result):
        console.print(table)
    if args.json == "-":
        _print_json(result.to_dict())
    elif args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result.to_dict(), indent=2), encoding="utf-8")
        console.print(f"results: {path}")
    plot = plot_survival(result, args.plot) if args.plot else None
    if plot:
        console.print(f"plot: {plot}")
    weak = result.weak_evidence
    calibration = (
        plot_calibration(weak, args.calibration_plot)
        if weak is not None and args.calibration_plot
        else None
    )
    if calibration:
        console.print(f"calibration plot: {calibration}")
    if weak is not None and args.weak_evidence_yaml:
        surfaces = args.surface or list(config.surfaces)
        atomic_write_text(args.weak_evidence_yaml, weak_evidence_yaml(weak, surfaces))
        console.print(f"weak-evidence model: {args.weak_evidence_yaml}")
    if args.update:
        shown = "ragbudget " + " ".join(argv if argv is not None else sys.argv[1:])
        relative = [
            link_from(args.update, path) if path is not None else None
            for path in (plot, calibration)
        ]
        update_section(args.update, to_markdown(result, shown, *relative))
        console.print(f"updated: {args.update}")


def check_writable(path: Path, option: str) -> None:
    """Check that `path` can be written, before a run of minutes rather than after.

    Its folder is made if missing, as the writer would.

    Raises:
        InvalidInputError: `path` is a folder, or its folder cannot be made or
            written to; the message names `option` and the path.
    """
    if path.is_dir():
        raise InvalidInputError(f"{option} {path}: is a folder; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path.parent):
            pass
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise InvalidInputError(
            f"{option} {path}: cannot write there ({reason})"
        ) from exc


def link_from(markdown: Path, target: Path) -> str:
    """`target` as a relative link from the folder of `markdown` (any two paths)."""
    folder = markdown.resolve().parent
    return Path(os.path.relpath(target.resolve(), folder)).as_posix()


def run_tune(args: argparse.Namespace, console: Console) -> None:
    """`ragbudget tune`: search fusion settings, print the gain, write the YAML.

    With `--json` the tables are left out and progress goes to stderr, so stdout
    is JSON only.
    """
    from langchain_ragbudget._disk import atomic_write_text
    from langchain_ragbudget.config import load_config
    from langchain_ragbudget.evaluation._report import tune_lines, tune_table
    from langchain_ragbudget.evaluation._tuning import check_split, tune, tuned_yaml
    from langchain_ragbudget.progress import ProgressBars

    config = load_config(args.config)
    check_split(args.data, args.split, allow_test=args.allow_test_split)
    if args.out is not None:
        check_writable(args.out, "--out")
    shown = Console(stderr=True) if args.json else console
    with ProgressBars(shown, transient=True) as progress:
        result = tune(
            args.data,
            config,
            split=args.split,
            allow_test_split=args.allow_test_split,
            limit=args.limit,
            ignore_identical_ids=not args.keep_identical_ids,
            progress=progress,
        )
    text = tuned_yaml(result)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.out, text)
    if args.json:
        data = {**result.to_dict(), "yaml": text, "out": args.out and str(args.out)}
        _print_json(data)
        return
    console.print(tune_table(result))
    for line in tune_lines(result):
        console.print(line, highlight=False, markup=False)
    if args.out:
        console.print(f"tuned settings: {args.out}", highlight=False, markup=False)
    else:
        console.print(text, highlight=False, markup=False)


def _fail(message: str, code: int, debug: bool) -> int:
    """Print `message` as one line on stderr and return `code`.

    Under --debug the traceback of the exception being handled comes first.
    """
    if debug:
        traceback.print_exc(file=sys.stderr)
    print(f"error: {_one_line(message)}", file=sys.stderr, flush=True)
    return code


def _one_line(text: str) -> str:
    """`text` on one line: newlines folded, other control characters escaped."""
    folded = " ".join(text.split())
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in folded)


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
