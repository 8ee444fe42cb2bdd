"""Each sub-command's arguments: one small builder per command.

`ragbudget --help` builds every sub-parser, so this imports nothing of the
pipeline.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TypeAlias

from langchain_ragbudget.cli._index_commands import PRUNE_HANDFUL, PRUNE_SHARE
from langchain_ragbudget.cli._memory_commands import add_memory

_JSON_HELP = "print one JSON object on stdout (messages go to stderr)"
_BEIR_HELP = "BEIR folder: corpus, queries, qrels/"

Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_commands(commands: Commands) -> None:
    """Every sub-command, in the order `ragbudget --help` lists them."""
    _command(commands, "demo", "run the pipeline on the sample corpus")
    _add_eval(commands)
    _add_tune(commands)
    _add_index(commands)
    _add_ask(commands)
    _lock_timeout(
        _command(
            commands, "repair", "bring the two sides of an index in sync", index=True
        )
    )
    _add_inspect(commands)
    _add_config(commands)
    add_memory(commands)
    doctor = _command(
        commands,
        "doctor",
        "the models, caches and environment variables in effect, where each was "
        "found, and whether each model is on disk",
    )
    _flag(doctor, "--json", _JSON_HELP)


def _command(
    commands: Commands, name: str, help: str, *, index: bool = False
) -> argparse.ArgumentParser:
    """A sub-command with `--config` (and `--index`)."""
    sub = commands.add_parser(name, help=help)
    sub.add_argument("--config", help="a YAML file merged over the defaults")
    if index:
        sub.add_argument(
            "--index", type=Path, help="index directory (config index.directory)"
        )
    return sub


def _lock_timeout(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--lock-timeout",
        type=float,
        metavar="SECONDS",
        help="wait this long for another writer of the index to finish, then fail "
        "naming it (config index.lock_timeout)",
    )


def _flag(sub: argparse.ArgumentParser, name: str, help: str) -> None:
    sub.add_argument(name, action="store_true", help=help)


def _keep_identical_ids(sub: argparse.ArgumentParser) -> None:
    _flag(
        sub,
        "--keep-identical-ids",
        "count a hit whose id is the query's own (BEIR leaves it out)",
    )


def _add_eval(commands: Commands) -> None:
    evaluate = _command(
        commands, "eval", "measure every stage on a BEIR-format dataset"
    )
    evaluate.add_argument("data", type=Path, help=_BEIR_HELP)
    evaluate.add_argument("--split", default="test", help="qrels/<split>.tsv (test)")
    evaluate.add_argument(
        "--surface", action="append", help="surface(s) to budget for (all by default)"
    )
    evaluate.add_argument("--limit", type=positive, help="evaluate the first N queries")
    evaluate.add_argument(
        "--k", type=positive, default=10, help="k of hit@k and recall@k"
    )
    _keep_identical_ids(evaluate)
    evaluate.add_argument(
        "--chunk-size",
        type=positive,
        action="append",
        help="also measure evidence survival with the corpus indexed in chunks of "
        "this many tokens (repeatable; indexes are cached)",
    )
    evaluate.add_argument(
        "--chunker",
        choices=["sentences", "recursive"],
        action="append",
        help="with --chunk-size: the chunker to measure (repeatable, to compare "
        "side by side; default: the configuration's index.chunker)",
    )
    _add_weak_fit_options(evaluate)
    _add_eval_outputs(evaluate)


def _add_weak_fit_options(evaluate: argparse.ArgumentParser) -> None:
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


def _add_eval_outputs(evaluate: argparse.ArgumentParser) -> None:
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


def _add_tune(commands: Commands) -> None:
    tune = _command(
        commands,
        "tune",
        "choose the fusion method, weights and c on labelled (train) queries",
    )
    tune.add_argument("data", type=Path, help=_BEIR_HELP)
    tune.add_argument(
        "--split", default="train", help="qrels/<split>.tsv to tune on (train)"
    )
    tune.add_argument(
        "--out", type=Path, help="write the tuned `retrieval:` section here (YAML)"
    )
    _flag(tune, "--json", "print the results as JSON on stdout")
    tune.add_argument("--limit", type=positive, help="tune on the first N queries")
    _keep_identical_ids(tune)
    _flag(
        tune,
        "--allow-test-split",
        "tune on the test split (or one sharing its queries) anyway; its "
        "numbers then say nothing about new queries",
    )


INDEX_EPILOG = """\
files read: .txt, .md/.markdown, .html/.htm, .pdf, and gzip of a text type
(x.md.gz, x.txt.gz, x.html.gz); as plain text, by name (any case, alone or
followed by . - or _ and anything, gzipped or not: README, README.Debian,
changelog.Debian.gz): AUTHORS BUGS CHANGELOG CHANGES CONTRIBUTING COPYING
COPYRIGHT CREDITS FAQ HISTORY INSTALL LICENSE NEWS NOTICE README THANKS TODO.
Every member of a multi-member gzip is read. Skipped, named: other types, man
pages (ls.1.gz: troff), x.pdf.gz. Refused, named: binary files (an executable,
an image, NUL bytes) whatever their name or --encoding.

exit codes (for scheduled jobs):
  0  every file indexed, unchanged, skipped or refused as expected (empty,
     only a placeholder); also when every file that could not be read was
     already reported by the last run and is unchanged since (same size and
     time, same reason): still listed, and one line says so
  1  a file could not be read (not in the encodings, a broken PDF or gzip, a
     PDF without a text layer), and it is new or changed since the last run
  2  usage, configuration or index error
"""


def _add_index(commands: Commands) -> None:
    index = _command(
        commands, "index", "ingest a folder of text/Markdown/HTML/PDF", index=True
    )
    index.formatter_class = argparse.RawDescriptionHelpFormatter
    index.epilog = INDEX_EPILOG
    index.add_argument("path", type=Path, help="a folder (or one file) to ingest")
    index.add_argument(
        "--encoding",
        default="utf-8",
        metavar="NAMES",
        help="text encodings to try in order, comma-separated (utf-8); e.g. "
        "utf-8,latin-1 reads what is not UTF-8 as Latin-1 (which reads any "
        "bytes, so put it last)",
    )
    _lock_timeout(index)
    _flag(
        index,
        "--prune",
        "delete indexed documents under PATH whose file is gone from PATH "
        f"(asks for --yes above {PRUNE_HANDFUL} documents and "
        f"{PRUNE_SHARE * 100:.0f}%% of the index)",  # %% : argparse formats help
    )
    _flag(index, "--yes", "let --prune remove more than a small share of the index")
    index.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files or folders matching GLOB (path under PATH, or name); "
        "repeatable",
    )


def _add_ask(commands: Commands) -> None:
    from langchain_ragbudget.config._settings import DEFAULT_SURFACE

    ask = _command(
        commands,
        "ask",
        "ask an index a question; show evidence, prompt, answer",
        index=True,
    )
    ask.add_argument("question", help="the question")
    ask.add_argument(
        "--surface",
        default=DEFAULT_SURFACE,
        help=f"whose budget to use ({DEFAULT_SURFACE})",
    )
    ask.add_argument(
        "--k",
        type=positive,
        help="candidates each retriever hands to fusion "
        "(config retrieval.sparse/dense.fetch_k)",
    )
    ask.add_argument(
        "--memory",
        type=Path,
        metavar="STORE",
        help="recall memories from this store (`ragbudget memory add`) into the "
        "prompt, under the surface's max_memories and memory_tokens",
    )
    _flag(ask, "--no-prompt", "do not show the prompt sent")
    _flag(ask, "--json", _JSON_HELP)


def _add_inspect(commands: Commands) -> None:
    inspect = _command(
        commands,
        "inspect",
        "what an index holds: documents, chunks, model, chunking, versions, sync, "
        "size; changes nothing",
        index=True,
    )
    _flag(
        inspect,
        "--documents",
        "also list every file: indexed (chunks), skipped and refused by the last "
        "ingest of its folder, with the reason",
    )
    _flag(inspect, "--json", _JSON_HELP)


def _add_config(commands: Commands) -> None:
    config = _command(
        commands,
        "config",
        "the effective configuration, validated, and where each value is from",
    )
    config.add_argument("--surface", help="only this surface's settings")
    _flag(config, "--json", _JSON_HELP)
