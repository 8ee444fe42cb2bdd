"""The budget stage against the packers on PyPI that do its job, side by side.

Every packer gets the same candidate lists (SciFact test claims, the hybrid top 10
of whole abstracts, the lists `bench_trim_variants.py` measures), the same token
budgets in the same encoding, and the same test: a gold passage's evidence is kept
when all of its marked evidence sentences are in the text the packer returns. The
calls are interleaved (each list, each budget, the packers in a rotating order), so
a loaded machine slows every packer alike.

- `ragbudget trim (default)`: `ContextBudget` with the shipped chat surface's
  packing (`trim`) and relevance, only `max_tokens` and `max_docs` (the list's
  length) set, as a user who sets a budget gets it; beside it the same with scores
  in the citation header (the former default), and `skip`.
- `naive slice`: the rendered context cut at the budget (`context[:N]` in tokens).
- `contextkit drop / truncate / compress`: cendor-contextkit 1.1.0, one `Block` a
  passage, priority by rank, as shipped (it charges each block the framing of a
  chat message); without the optional `squeeze` compressor (not installed here)
  `compress` truncates, as contextkit notes on its receipt.
- `astromesh knapsack`: astromesh-context 0.1.0's `ContextEngine` (scored knapsack
  by the fused score, tiktoken counts), its own event loop kept across calls.
- `retainkit rank-fill`: retainkit 0.1.0's `fill` over the passages in rank order,
  tiktoken counts (it charges 4 tokens a fragment for separators).

A peer's passage renders as `[n] <text>` (SciFact's text opens with its title),
blocks joined by a blank line. `tokens` and `over` re-count the returned text with
tiktoken. CPU time is per call, median: `cold` with every per-text cache of the
package cleared first (the peers keep none), `warm` on a list just packed. Under
the table: what each records, the tokens each part of a citation costs, the better
of `trim` and `skip` list by list (a ceiling for choosing between shortening and
dropping), the error of `trim`'s token estimate, and the CPU time of counting the ten
rendered passages once with tiktoken (what a cold `trim` cannot do without). The
candidate lists are cached in the user cache folder after a first run.

    python benchmarks/bench_packers.py [--budgets 256 512 1024 2048] [--packers ...]
        [--refresh]
"""

from __future__ import annotations

import asyncio
import pickle
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import retainkit.policies.base as retainkit_fill
from _common import console, parser_with_data, print_machine, rotated
from astromesh_context import CallableSource, ContextEngine, ContextItem
from astromesh_context.tokens import TiktokenTokenizer
from astromesh_context.types import BuildContext
from bench_trim_variants import Case, cases
from cendor import contextkit
from langchain_core.documents import Document
from retainkit.types import Fragment
from rich.table import Table

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import ContextFormat, group_citations, quote
from langchain_ragbudget.budget._shortening import Shortener
from langchain_ragbudget.config._disk import cache_root
from langchain_ragbudget.config._settings import SurfaceSettings, load_config
from langchain_ragbudget.config._tokens import count_tokens, get_encoding
from langchain_ragbudget.evaluation import load_beir
from langchain_ragbudget.evaluation._survival import naive_slice

# `cold` clears the budget stage's per-text caches, which live in the runtime's
# private modules (as bench_budget.py does): there is no public way to empty them.
from langchain_ragbudget.evidence._sentence_scoring import blended_relevance, terms
from langchain_ragbudget.evidence._sentences import sentence_spans
from langchain_ragbudget.ledger._metadata_keys import DENSE, RERANK_SCORE, score_key
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._validation import _surrogate_at

ENCODING = "o200k_base"
MODEL = "gpt-4o"  # contextkit counts by model name; gpt-4o is o200k_base
CACHES: tuple[Any, ...] = (
    count_tokens,
    sentence_spans,
    terms,
    quote,
    display_name,
    _surrogate_at,
    ContextFormat._header,
)


@dataclass(frozen=True)
class Packed:
    """What a packer put in front of the model, and what it said about the rest."""

    text: str
    kept: dict[int, str]  # passage index -> its text as it reached the prompt
    recorded: str


Packer = Callable[[str, Sequence[Document], int], Packed]


def clear_caches() -> None:
    for cache in CACHES:
        cache.cache_clear()


def peer_block(rank: int, document: Document) -> str:
    return f"[{rank}] {document.page_content}"


class RagBudget:
    """`ContextBudget` on one packing policy; one budget stage per token budget,
    built before the calls are timed, as a surface's stage is built once."""

    def __init__(self, packing: str | None = None, scores: bool = False) -> None:
        chat = load_config().surface("chat")
        self.settings = chat.model_copy(
            update={"packing": packing or chat.packing, "encoding": ENCODING}
        )
        shown = (RERANK_SCORE, score_key(DENSE)) if scores else ()
        self.format = ContextFormat(score_keys=shown)
        self.stages: dict[tuple[int, int], ContextBudget] = {}

    def stage(self, budget: int, count: int) -> ContextBudget:
        """Only `max_tokens` and `max_docs` set, as a surface that sets a budget."""
        if (budget, count) not in self.stages:
            settings = SurfaceSettings(
                max_docs=count,
                max_tokens=budget,
                encoding=ENCODING,
                packing=self.settings.packing,
                relevance=self.settings.relevance,
            )
            self.stages[budget, count] = ContextBudget(
                settings=settings, format=self.format
            )
        return self.stages[budget, count]

    def __call__(
        self, question: str, documents: Sequence[Document], budget: int
    ) -> Packed:
        stage = self.stage(budget, len(documents))
        context = stage.fit(documents, question=question)
        texts = {str(d.id): d.page_content for d in context.documents}
        kept = {
            i: texts[str(d.id)] for i, d in enumerate(documents) if str(d.id) in texts
        }
        return Packed(
            context.text,
            kept,
            "a drop record per passage left out (id, stage, reason, the tokens it "
            "needed); under trim, a shortening record (sentences kept of total)",
        )


def contextkit_packer(evict: str) -> Packer:
    def packed(question: str, documents: Sequence[Document], budget: int) -> Packed:
        context = contextkit.Context(budget_tokens=budget, model=MODEL)
        for rank, document in enumerate(documents, start=1):
            context.add(
                contextkit.Block(
                    peer_block(rank, document),
                    priority=-rank,
                    evict=evict,  # type: ignore[arg-type]
                )
            )
        messages = context.assemble()
        kept = {}
        contents = [str(m["content"]) for m in messages]
        for i in range(len(documents)):
            head = f"[{i + 1}] "
            for content in contents:
                if content.startswith(head):
                    kept[i] = content[len(head) :]
        recorded = "receipt: a block's action and tokens before and after"
        if evict == "compress":
            recorded += " ('squeeze not installed; fell back to truncate')"
        return Packed("\n\n".join(contents), kept, recorded)

    return packed


class Astromesh:
    """astromesh's engine over one list: the fused score decides, tiktoken counts."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.tokenizer = TiktokenTokenizer(ENCODING)

    def __call__(
        self, question: str, documents: Sequence[Document], budget: int
    ) -> Packed:
        items = [
            ContextItem(
                id=str(rank),
                content=peer_block(rank, document),
                score=float(document.metadata.get("fused_score", 0.0)),
                source="rag",
                kind="knowledge",
                stability="volatile",
            )
            for rank, document in enumerate(documents, start=1)
        ]

        async def candidates(query: str, context: BuildContext) -> list[ContextItem]:
            return items

        source = CallableSource(candidates, name="rag")
        engine = ContextEngine([source], budget=budget, tokenizer=self.tokenizer)
        window = self.loop.run_until_complete(engine.build(question))
        kept = {int(item.id) - 1: item.content for item in window.items}
        kept = {i: text.split(" ", 1)[1] for i, text in kept.items()}
        recorded = "trace: score and reason per item left out (budget...)"
        text = "\n\n".join(item.content for item in window.items)
        return Packed(text, kept, recorded)


def retainkit_packer(
    question: str, documents: Sequence[Document], budget: int
) -> Packed:
    tokenizer = get_encoding(ENCODING)
    fragments = [
        Fragment(
            source_id=str(i),
            session=0,
            order=i,
            text=peer_block(i + 1, document),
            whole=True,
        )
        for i, document in enumerate(documents)
    ]
    chosen, _ = retainkit_fill.fill(
        fragments, budget, lambda text: len(tokenizer.encode(text))
    )
    kept = {int(f.source_id): f.text.split(" ", 1)[1] for f in chosen}
    text = "\n\n".join(f.text for f in chosen)
    return Packed(text, kept, "the tokens spent")


def naive(question: str, documents: Sequence[Document], budget: int) -> Packed:
    """The rendered context cut at `budget` tokens (its evidence: `naive_slice`)."""
    fmt = ContextFormat(join_neighbours=False)
    tokenizer = get_encoding(ENCODING)
    whole = tokenizer.encode(fmt.render(group_citations(documents, fmt)))
    return Packed(tokenizer.decode(whole[:budget]), {}, "nothing")


TRIM, SKIP = "ragbudget trim (default)", "ragbudget skip"
PACKERS: dict[str, Packer] = {
    TRIM: RagBudget(),
    "ragbudget trim, scores shown": RagBudget(scores=True),
    SKIP: RagBudget("skip"),
    "naive slice": naive,
    "contextkit drop": contextkit_packer("drop_oldest"),
    "contextkit truncate": contextkit_packer("truncate"),
    "contextkit compress": contextkit_packer("compress"),
    "astromesh knapsack": Astromesh(),
    "retainkit rank-fill": retainkit_packer,
}


@dataclass
class Tally:
    per_list: list[int] = field(default_factory=list)  # gold passages kept, a list
    tokens: list[int] = field(default_factory=list)
    over: int = 0
    cold: list[float] = field(default_factory=list)
    warm: list[float] = field(default_factory=list)
    recorded: str = ""


def evidence_kept(case: Case, packed: Packed) -> int:
    _, _, evidence = case
    return sum(
        all(sentence in packed.kept.get(i, "") for sentence in sentences)
        for i, sentences in evidence.items()
    )


def cpu(call: Callable[[], Packed]) -> tuple[Packed, float]:
    start = time.process_time()
    packed = call()
    return packed, time.process_time() - start


def count_passages(documents: Sequence[Document]) -> float:
    """CPU seconds to count each passage as `trim` renders it, once, uncached.

    What exact counts and drop records need of a cold call, whatever it packs.
    """
    fmt, tokenizer = ContextFormat(), get_encoding(ENCODING)
    start = time.process_time()
    for document in documents:
        len(tokenizer.encode_ordinary(fmt.render_passage(document)))
    return time.process_time() - start


def run(
    all_cases: list[Case], budgets: Sequence[int], counting: list[float]
) -> dict[tuple[str, int], Tally]:
    tallies = {(name, b): Tally() for name in PACKERS for b in budgets}
    tokenizer = get_encoding(ENCODING)
    for turn, case in enumerate(all_cases):
        question, documents, evidence = case
        sliced = naive_slice(documents, budgets, ENCODING, evidence)
        for budget_index, budget in enumerate(budgets):
            clear_caches()  # rendering too, as a cold call does
            counting.append(count_passages(documents))
            for name in rotated(list(PACKERS), turn + budget_index):
                packer, tally = PACKERS[name], tallies[name, budget]
                call = partial(packer, question, documents, budget)
                clear_caches()
                _, cold = cpu(call)
                packed, warm = cpu(call)
                tally.cold.append(cold)
                tally.warm.append(warm)
                if name == "naive slice":
                    tally.per_list.append(len(sliced.evidence[budget_index]))
                else:
                    tally.per_list.append(evidence_kept(case, packed))
                used = len(tokenizer.encode(packed.text, disallowed_special=()))
                tally.tokens.append(used)
                tally.over += used > budget
                tally.recorded = packed.recorded
    return tallies


def load_cases(folder: str, refresh: bool) -> list[Case]:
    """The candidate lists, from the user cache after a first run."""
    path = cache_root() / f"bench-packers-{Path(folder).resolve().name}.pickle"
    if path.exists() and not refresh:
        with path.open("rb") as file:
            cached: list[Case] = pickle.load(file)
        return cached
    made = cases(load_beir(folder))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as file:
        pickle.dump(made, file)
    return made


def header_parts(all_cases: list[Case]) -> str:
    """Tokens each part of a citation costs, on average over every candidate."""
    plain, scored = (
        ContextFormat(),
        ContextFormat(score_keys=(RERANK_SCORE, score_key(DENSE))),
    )
    parts: dict[str, list[int]] = {
        "number": [],
        "source": [],
        "score": [],
        "quoting": [],
    }
    for _, documents, _ in all_cases:
        for rank, document in enumerate(documents, start=1):
            header = plain.render_header(rank, document)
            bare = count_tokens(f"[{rank}]\n", ENCODING)
            parts["number"].append(bare)
            parts["source"].append(count_tokens(header, ENCODING) - bare)
            parts["score"].append(
                count_tokens(scored.render_header(rank, document), ENCODING)
                - count_tokens(header, ENCODING)
            )
            parts["quoting"].append(
                count_tokens(plain.render_passage(document), ENCODING)
                - count_tokens(document.page_content + "\n\n", ENCODING)
            )
    return ", ".join(
        f"{name} {statistics.mean(tokens):.1f}" for name, tokens in parts.items()
    )


def estimate_error(all_cases: list[Case], draws: int = 5) -> Counter[int]:
    """How far `trim`'s token estimate of a shortened passage is from its exact
    count: `draws` random sentence choices a passage, seeded."""
    rng, errors = random.Random(0), Counter[int]()
    for question, documents, _ in all_cases:
        shortener = Shortener(
            ContextFormat(), ENCODING, documents, question, blended_relevance
        )
        for index in range(len(documents)):
            shape = shortener.shape(index)
            assert shape.estimate is not None
            count = len(shape.relevance)
            for _ in range(draws):
                chosen = tuple(sorted(rng.sample(range(count), rng.randint(1, count))))
                errors[shape.estimate(chosen) - shape.cost(chosen)] += 1
    return errors


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f}"


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument(
        "--budgets", type=int, nargs="+", default=[256, 512, 1024, 2048]
    )
    parser.add_argument(
        "--refresh", action="store_true", help="rebuild the cached candidate lists"
    )
    parser.add_argument(
        "--packers", nargs="+", choices=list(PACKERS), help="only these packers"
    )
    args = parser.parse_args()
    for name in set(PACKERS) - set(args.packers or PACKERS):
        del PACKERS[name]
    all_cases = load_cases(args.data, args.refresh)
    gold = sum(len(evidence) for _, _, evidence in all_cases)
    counting: list[float] = []
    tallies = run(all_cases, args.budgets, counting)
    out = console(170)
    table = Table(
        title=(
            f"{len(all_cases)} SciFact lists (hybrid top 10), {gold} gold passages: "
            f"evidence kept % / tokens used (median) / calls over / CPU ms cold, warm"
        )
    )
    table.add_column("packer")
    for budget in args.budgets:
        table.add_column(f"{budget:,}", justify="right")
    for name in PACKERS:
        cells = []
        for budget in args.budgets:
            t = tallies[name, budget]
            kept = 100 * sum(t.per_list) / gold
            cells.append(
                f"{kept:.1f}% / {int(statistics.median(t.tokens))} / {t.over}"
                f" / {ms(t.cold)}, {ms(t.warm)}"
            )
        table.add_row(name, *cells)
    out.print(table)
    out.print(
        f"counting the ten rendered passages once with tiktoken, alone: {ms(counting)}"
        " ms CPU a list (median)"
    )
    out.print("what each records about the passages it leaves out or cuts:")
    for name in PACKERS:
        out.print(f"  {name}: {tallies[name, args.budgets[-1]].recorded}")
    out.print(
        "tokens a citation pays, mean over every candidate (the title is the "
        f"passage's first line, so the header leaves it out): {header_parts(all_cases)}"
    )
    if {TRIM, SKIP} <= set(PACKERS):
        best = [
            100
            * sum(map(max, tallies[TRIM, b].per_list, tallies[SKIP, b].per_list))
            / gold
            for b in args.budgets
        ]
        out.print(
            "evidence kept choosing, list by list, the better of trim and skip (a "
            "ceiling for choosing between shortening and dropping): "
            + " / ".join(f"{x:.1f}" for x in best)
        )
    errors = estimate_error(all_cases)
    within = sum(n for error, n in errors.items() if 0 <= error <= 3)
    out.print(
        f"trim's token estimate minus the exact count, {errors.total()} random "
        f"shortenings: {min(errors)} to {max(errors)}, 0 to 3 for "
        f"{100 * within / errors.total():.0f}%"
    )
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
