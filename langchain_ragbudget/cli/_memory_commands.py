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
from langchain_ragbudget.ledger._names import display_name

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
    forget.add_argument("id", help="the memory's id, or a prefix only it starts with")
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


def memory_for_ask(store: Path, config: Any, sources: Any) -> Any:
    """The recall `ask --memory STORE` adds to the chain.

    `sources` (the index) tells which memories' documents changed since.

    Raises:
        InvalidInputError: No store at `store` (nothing is created).
    """
    from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore
    from langchain_ragbudget.retrieval._embeddings import build_embeddings

    if not store.is_file():
        raise InvalidInputError(
            f"no memory store at {store}; create it with `ragbudget memory add`"
        )
    opened = MemoryStore.from_config(
        config, path=store, embeddings=build_embeddings(config)
    )
    return MemoryRetriever.from_config(config, store=opened, sources=sources)


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
            memory_id = _one_id(args.id, [m.id for m in store.list()], args.store)
            store.forget(memory_id)
            _say(args, console, {"forgot": memory_id}, f"forgot {memory_id}")
            return EXIT_OK
        return _inspect(args, store, config, console)


def _one_id(given: str, ids: list[str], store: Path) -> str:
    """The id `given` names: itself, or the only id it is a prefix of.

    Raises:
        InvalidInputError: No id starts with it, or several do (named).
    """
    if given in ids:
        return given
    matches = [memory_id for memory_id in ids if given and memory_id.startswith(given)]
    if len(matches) == 1:
        return matches[0]
    shown = display_name(given)
    if not matches:
        raise InvalidInputError(f"no memory {shown!r} in {store}")
    raise InvalidInputError(
        f"{shown!r} is the start of {len(matches)} memory ids in {store}: "
        f"{', '.join(sorted(matches))}; give more of the id"
    )


def superseded_by(memories: list[Any]) -> dict[str, str]:
    """Memory id -> the id of the later-said memory of its subject that supersedes it.

    A recall keeps only the most recently said memory of a subject; showing the
    others as superseded says why they will not reach a prompt.
    """
    latest: dict[str, Any] = {}
    for memory in memories:
        if memory.subject and (
            memory.subject not in latest
            or memory.said_at > latest[memory.subject].said_at
        ):
            latest[memory.subject] = memory
    return {
        memory.id: latest[memory.subject].id
        for memory in memories
        if memory.subject and latest[memory.subject].id != memory.id
    }


def _say(args: argparse.Namespace, console: Console, data: Any, text: str) -> None:
    if args.json:
        print_json(data)
    else:
        console.print(text, highlight=False, markup=False)


def _add(args: argparse.Namespace, store: MemoryStore, console: Console) -> int:
    """Remember or restate; a restatement that changes the importance says so."""
    before = {memory.id: memory.importance for memory in store.list()}
    memory = store.remember(
        args.text,
        subject=args.subject,
        importance=args.importance,
        source_id=args.source_id,
        source_hash=args.source_hash,
    )
    what = "remembered" if memory.times_said == 1 else "restated"
    text = f"{what} {memory.id} (said {memory.times_said} time(s))"
    old = before.get(memory.id)
    if what == "restated" and old is not None and old != memory.importance:
        text += f"; importance {old:g} -> {memory.importance:g}"
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
    later = superseded_by(store.list())
    for row in rows:
        row["superseded_by"] = later.get(row["id"])
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
    """One block per memory, readable at 80 columns.

    The id whole (`forget` takes it), then its text and every factor of its score
    on lines of their own.
    """
    from rich.table import Table
    from rich.text import Text

    from langchain_ragbudget.ledger._names import display_name

    table = Table.grid(padding=(0, 0, 1, 0))
    table.title = (
        f"score = similarity x importance x 0.5^(age since said / {half_life:g} days)"
    )
    table.title_justify = "left"
    table.add_column("memory", overflow="fold")

    def number(value: float | None, digits: int = 3) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    for row in rows:
        head = Text(row["id"], style="bold")
        head.append(f"  said {row['said_at'][:16]} ({row['times_said']} time(s))")
        if row["subject"]:
            head.append(f"  subject {display_name(row['subject'], 60)}")
        if row.get("superseded_by"):
            head.append(f"  superseded by {row['superseded_by']}", style="yellow")
        head.append(f"\n  {display_name(row['text'], 200)}\n")
        head.append(
            f"  similarity {number(row['similarity'])} x importance "
            f"{number(row['importance'], 2)} x recency {number(row['recency'])} "
            f"(age {number(row['age_days'], 1)} days) = score {number(row['score'])}",
            style="dim",
        )
        table.add_row(head)
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
        "superseded": len(superseded_by(memories)),
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
