"""Budget-stage latency: 100 candidates, warm caches vs every cache cleared.

Both columns run the same `ContextBudget.fit` on the same 100 SciFact abstracts (as
ranked candidates with scores), in the same process, interleaved; the cold column
clears the token, sentence-split and term caches before each call, i.e. counts with
tiktoken and splits with nupunkt every time. `skip` and `trim` run side by side, each
surface with its own budget; `trim` gets a SciFact claim as the question. `count
all, cold` is the floor of an exact cold count: tiktoken on every candidate's
rendered passage once, nothing else (the stage counts only those it weighs).

    python benchmarks/bench_budget.py
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

from _common import console, parser_with_data, print_machine
from langchain_core.documents import Document
from rich.table import Table

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import ContextFormat, quote
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.evaluation import load_corpus
from langchain_ragbudget.evidence._sentence_scoring import terms
from langchain_ragbudget.evidence._sentences import sentence_spans

# The cold column clears the per-text caches of the budget stage, and they live in
# the runtime's private modules (token counts, sentence spans, sentence terms,
# surrogate checks, escaped names) and on `ContextFormat` (rendered headers): there
# is no public way to empty them, so this script reaches them by name. It imports
# nothing else private.
from langchain_ragbudget.ledger._names import display_name
from langchain_ragbudget.ledger._validation import _surrogate_at

out = console(160)


def candidates(n: int, folder: str) -> list[Document]:
    corpus = load_corpus(Path(folder))[:n]
    return [
        Document(
            id=doc.id,
            page_content=doc.page_content,
            metadata={
                **doc.metadata,
                "fused_rank": rank,
                "dense_score": 0.9 - rank / 200,
                "fused_score": 1 / (60 + rank),
            },
        )
        for rank, doc in enumerate(corpus, start=1)
    ]


def p50_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=300)
    parser.add_argument("--config", help="a YAML over the defaults (e.g. demo.yml)")
    args = parser.parse_args()
    docs = candidates(args.candidates, args.data)
    config = load_config(args.config)
    table = Table(
        title=f"ContextBudget, {len(docs)} candidates, p50 over {args.repeat} calls"
    )
    for column in (
        "surface",
        "packing",
        "kept",
        "tokens",
        "warm cache ms",
        "cold caches ms",
        "ratio",
        "count all, cold ms",
        "Runnable.invoke warm ms",
    ):
        table.add_column(column, justify="right" if column != "surface" else "left")
    question = "Vitamin D deficiency is associated with a higher risk of infection."
    for surface in ("chat", "search"):
        for packing in ("skip", "trim"):
            base = ContextBudget.from_config(config, surface=surface)
            budget = base.model_copy(
                update={
                    "settings": base.settings.model_copy(update={"packing": packing})
                }
            )
            context = budget.fit(docs, question=question)  # warm-up, fills caches
            warm: list[float] = []
            cold: list[float] = []
            runnable: list[float] = []
            floor: list[float] = []
            fmt, encoding = budget.format, budget.settings.encoding_name
            caches = (count_tokens, sentence_spans, terms, quote, display_name)
            for _ in range(args.repeat):
                start = time.perf_counter()
                budget.fit(docs, question=question)
                warm.append(time.perf_counter() - start)
                count_tokens.cache_clear()
                start = time.perf_counter()
                for doc in docs:
                    count_tokens(fmt.render_passage(doc), encoding)
                floor.append(time.perf_counter() - start)
                for cache in (*caches, _surrogate_at, ContextFormat._header):
                    cache.cache_clear()
                start = time.perf_counter()
                budget.fit(docs, question=question)
                cold.append(time.perf_counter() - start)
                start = time.perf_counter()  # warm again: the cold call refilled them
                budget.invoke({"question": question, "documents": docs})
                runnable.append(time.perf_counter() - start)
            table.add_row(
                surface,
                packing,
                f"{len(context.documents)} ({len(context.report.trimmed)} shortened)",
                f"{context.report.tokens_used}/{context.report.max_tokens}",
                f"{p50_ms(warm):.3f}",
                f"{p50_ms(cold):.3f}",
                f"{p50_ms(cold) / p50_ms(warm):.1f}x",
                f"{p50_ms(floor):.3f}",
                f"{p50_ms(runnable):.3f}",
            )
    out.print(table)
    print_machine(out)


if __name__ == "__main__":
    main()
