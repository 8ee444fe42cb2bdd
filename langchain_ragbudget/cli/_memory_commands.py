"""`ragbudget memory add|list|forget|inspect --store FILE`: an agent's memory store.

The arguments are built here too, importing nothing of the pipeline, so
`ragbudget --help` stays light.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_ragbudget.cli._exit_codes import EXIT_OK, EXIT_PARTIAL
from langchain_ragbudget.cli._output import print_json
from langchain_ragbudget.errors import InvalidInputError

if TYPE_CHECKING:
    from rich.console import Console

    from langchain_ragbudget.memory._retriever import MemoryStore

_JSON_HELP = "print one JSON object on stdout (messages go to stderr)"


def add_memory(commands: Any) -> None:
    """`ragbudget memory` and its four sub-commands."""
    memory = commands.add_parser("memory", help="an agent's memory store (SQLite)")
    actions = memory.add_subparsers(dest="memory_command", required=True)
    add = _action(actions, "add", "remember a statement (or restate one)")
    add.add_argument("text", help="the statement")
    add.add_argument("--subject", help="a key, e.g. editor.theme (supersession)")
    add.add_argument("--importance", type=float, help="0..1 (config memory.importance)")
    add.add_argument("--source-id", help="the document it was learned from")
    add.add_argument("--source-hash", help="that document's content hash then")
    listed = _action(actions, "list", "every memory and every factor of its score")
    listed.add_argument("--query", help="score against this query (similarity too)")
    listed.add_argument("--subject", help="only this subject's memories")
    forget = _action(actions, "forget", "delete one memory")
    forget.add_argument("id", help="the memory's id")
    inspect = _action(actions, "inspect", "schema version, counts, stale memories")
    inspect.add_argument(
        "--index", type=Path, help="check memories' sources against this index"
    )


def _action(actions: Any, name: str, help: str) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = actions.add_parser(name, help=help)
    sub.add_argument("--store", type=Path, required=True, help="the SQLite file")
    sub.add_argument("--config", help="a YAML file merged over the defaults")
    sub.add_argument("--json", action="store_true", help=_JSON_HELP)
    return sub


def run_memory(args: argparse.Namespace, console: Console) -> int:
    """Run one `ragbudget memory` command; `inspect` exits 1 on stale memories."""
    from langchain_ragbudget.config._settings import load_config
    from langchain_ragbudget.memory._retriever import MemoryStore

    config = load_config(args.config)
    if args.memory_command != "add" and not args.store.is_file():
        raise InvalidInputError(f"no memory store at {args.store}")
    embeddings = None
    if args.memory_command == "add" or getattr(args, "query", None):
        from langchain_ragbudget.retrieval._embeddings import build_embeddings

        embeddings = build_embeddings(config)
    with MemoryStore.from_config(
        config, path=args.store, embeddings=embeddings
    ) as store:
        if args.memory_command == "add":
            return _add(args, store, console)
        if args.memory_command == "list":
            return _list(args, store, config, console)
        if args.memory_command == "forget":
            if not store.forget(args.id):
                raise InvalidInputError(f"no memory {args.id!r} in {args.store}")
            _say(args, console, {"forgot": args.id}, f"forgot {args.id}")
            return EXIT_OK
        return _inspect(args, store, config, console)


def _say(args: argparse.Namespace, console: Console, data: Any, text: str) -> None:
    if args.json:
        print_json(data)
    else:
        console.print(text, highlight=False, markup=False)


def _add(args: argparse.Namespace, store: MemoryStore, console: Console) -> int:
    memory = store.remember(
        args.text,
        subject=args.subject,
        importance=args.importance,
        source_id=args.source_id,
        source_hash=args.source_hash,
    )
    what = "remembered" if memory.times_said == 1 else "restated"
    text = f"{what} {memory.id} (said {memory.times_said} time(s))"
    _say(args, console, {"action": what, **memory.to_dict()}, text)
    return EXIT_OK


def _list(
    args: argparse.Namespace, store: MemoryStore, config: Any, console: Console
) -> int:
    from langchain_ragbudget.memory._retriever import MemoryRetriever

    retriever = MemoryRetriever.from_config(config, store=store)
    rows = []
    if args.query:
        for item in retriever.score(args.query):
            if args.subject is None or item.memory.subject == args.subject:
                rows.append({**item.memory.to_dict(), **_factors(item)})
    else:
        now = store.now()
        half_life = config.memory.half_life_days
        for memory in store.list(args.subject):
            age = max((now - memory.said_at).total_seconds(), 0.0) / 86_400
            recency = 0.5 ** (age / half_life)
            rows.append(
                {
                    **memory.to_dict(),
                    "similarity": None,
                    "age_days": age,
                    "recency": recency,
                    "score": None,
                    "importance_x_recency": memory.importance * recency,
                }
            )
    if args.json:
        print_json({"store": str(args.store), "query": args.query, "memories": rows})
    else:
        console.print(_table(rows, half_life=config.memory.half_life_days))
    return EXIT_OK


def _factors(item: Any) -> dict[str, float]:
    return {
        "similarity": item.similarity,
        "age_days": item.age_days,
        "recency": item.recency,
        "score": item.score,
        "importance_x_recency": item.memory.importance * item.recency,
    }


def _table(rows: list[dict[str, Any]], half_life: float) -> Any:
    from rich.table import Table

    from langchain_ragbudget.ledger._names import display_name

    table = Table(
        title=f"score = similarity x importance x 0.5^(age since said / {half_life:g} "
        "days)"
    )
    for column in ("id", "subject", "text", "said", "times", "similarity"):
        table.add_column(column)
    for column in ("importance", "age days", "recency", "score"):
        table.add_column(column, justify="right")

    def number(value: float | None, digits: int = 3) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    for row in rows:
        table.add_row(
            row["id"],
            display_name(row["subject"] or "", 40),
            display_name(row["text"], 60),
            row["said_at"][:16],
            str(row["times_said"]),
            number(row["similarity"]),
            number(row["importance"], 2),
            number(row["age_days"], 1),
            number(row["recency"]),
            number(row["score"]),
        )
    return table


def _inspect(
    args: argparse.Namespace, store: MemoryStore, config: Any, console: Console
) -> int:
    from langchain_ragbudget.memory._score import stale_reason

    memories = store.list()
    stale: list[dict[str, str]] | None = None
    if args.index is not None:
        from langchain_ragbudget.index import HybridIndex

        with HybridIndex.open(args.index, config, create=False) as index:
            stale = [
                {"id": m.id, "source_id": str(m.source_id), "why": reason}
                for m in memories
                if (reason := stale_reason(m, index))
            ]
    report = {
        "store": str(args.store),
        "schema_version": store.schema_version(),
        "memories": len(memories),
        "subjects": len({m.subject for m in memories if m.subject}),
        "with_source": sum(1 for m in memories if m.source_id),
        "dimension": store.dimension(),
        "bytes": args.store.stat().st_size,
        "stale": stale,
    }
    if args.json:
        print_json(report)
    else:
        for key, value in report.items():
            if key != "stale":
                console.print(f"{key}: {value}", highlight=False, markup=False)
        if stale is None:
            console.print("stale: not checked (give --index)", markup=False)
        else:
            console.print(f"stale: {len(stale)}", highlight=False, markup=False)
            for item in stale:
                console.print(f"  {item['id']}: {item['why']}", markup=False)
    return EXIT_PARTIAL if stale else EXIT_OK
