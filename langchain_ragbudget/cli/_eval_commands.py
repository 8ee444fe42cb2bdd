"""The evaluation commands: `eval` (measure every stage) and `tune` (fusion settings).

Both check every output path before a run of minutes rather than after it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_ragbudget.cli._output import print_json
from langchain_ragbudget.errors import InvalidInputError

if TYPE_CHECKING:
    from rich.console import Console

    from langchain_ragbudget.config._settings import RagBudgetConfig
    from langchain_ragbudget.evaluation import BeirDataset, EvalReport


def run_eval(
    args: argparse.Namespace, console: Console, argv: Sequence[str] | None
) -> None:
    """`ragbudget eval`: run, print the tables, write JSON / plot / Markdown."""
    from langchain_ragbudget.config._settings import load_config

    config = load_config(args.config)
    _check_eval_arguments(args, config)
    dataset, weak_fit = _load_datasets(args, console)
    result = _evaluate(args, config, dataset, weak_fit, console)
    _show_and_write(args, config, result, console, argv)


def _check_eval_arguments(args: argparse.Namespace, config: RagBudgetConfig) -> None:
    """Fail on an unknown surface or an unwritable output before any work."""
    for surface in args.surface or []:
        config.surface(surface)
    for option, path in (
        ("--json", None if args.json in (None, "-") else Path(args.json)),
        ("--plot", args.plot),
        ("--calibration-plot", args.calibration_plot),
        ("--weak-evidence-yaml", args.weak_evidence_yaml),
        ("--update", args.update),
    ):
        if path is not None:
            check_writable(path, option)


def _load_datasets(
    args: argparse.Namespace, console: Console
) -> tuple[BeirDataset, BeirDataset | None]:
    """The split to evaluate, and the `--weak-fit` split to fit on (or None)."""
    from langchain_ragbudget.evaluation._beir import load_beir

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
    return dataset, weak_fit


def _evaluate(
    args: argparse.Namespace,
    config: RagBudgetConfig,
    dataset: BeirDataset,
    weak_fit: BeirDataset | None,
    console: Console,
) -> EvalReport:
    """The run, with progress bars: every stage, then each `--chunk-size`."""
    from langchain_ragbudget.evaluation._chunked import evaluate_chunked
    from langchain_ragbudget.evaluation._harness import evaluate
    from langchain_ragbudget.progress import ProgressBars

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
            evaluate_chunked(
                dataset,
                _with_chunker(config, chunker),
                size,
                limit=args.limit,
                progress=progress,
            )
            for chunker in args.chunker or [config.index.chunker]
            for size in args.chunk_size or []
        ]
    return result


def _show_and_write(
    args: argparse.Namespace,
    config: RagBudgetConfig,
    result: EvalReport,
    console: Console,
    argv: Sequence[str] | None,
) -> None:
    """Print the tables; write the JSON, the plots, the model and the Markdown."""
    from langchain_ragbudget.config._disk import atomic_write_text
    from langchain_ragbudget.evaluation._report import weak_evidence_yaml
    from langchain_ragbudget.evaluation._tables import (
        plot_calibration,
        plot_survival,
        rich_tables,
    )

    for table in rich_tables(result):
        console.print(table)
    if args.json == "-":
        print_json(result.to_dict())
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
        _update_markdown(args.update, result, argv, (plot, calibration))
        console.print(f"updated: {args.update}")


def _update_markdown(
    markdown: Path,
    result: EvalReport,
    argv: Sequence[str] | None,
    images: tuple[Path | None, Path | None],
) -> None:
    """Replace the eval section of `markdown`: command, tables, relative image links."""
    from langchain_ragbudget.evaluation._report import update_section
    from langchain_ragbudget.evaluation._tables import to_markdown

    shown = "ragbudget " + " ".join(argv if argv is not None else sys.argv[1:])
    relative = [
        link_from(markdown, path) if path is not None else None for path in images
    ]
    update_section(markdown, to_markdown(result, shown, *relative))


def check_writable(path: Path, option: str) -> None:
    """Check that `path` can be written (making its folder, as the writer would).

    Raises:
        InvalidInputError: Naming `option` and the path.
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
    """`ragbudget tune`: search fusion settings, print the gain, write the YAML."""
    from rich.console import Console

    from langchain_ragbudget.config._disk import atomic_write_text
    from langchain_ragbudget.config._settings import load_config
    from langchain_ragbudget.evaluation._tables import tune_lines, tune_table
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
        print_json(data)
        return
    console.print(tune_table(result))
    for line in tune_lines(result):
        console.print(line, highlight=False, markup=False)
    if args.out:
        console.print(f"tuned settings: {args.out}", highlight=False, markup=False)
    else:
        console.print(text, highlight=False, markup=False)


def _with_chunker(config: RagBudgetConfig, chunker: str) -> RagBudgetConfig:
    index = config.index.model_copy(update={"chunker": chunker})
    return config.model_copy(update={"index": index})
