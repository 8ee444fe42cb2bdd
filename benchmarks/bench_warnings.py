"""How often the drop warning names a likely-lost passage: before and after.

The weak-evidence protocol (`evaluation/_weak_evidence.py`): every question twice,
its candidates as retrieved and with its judged-relevant documents removed (then no
passage holds the answer, so naming one as "likely lost" is a false alarm). Each
case goes through the configured surface's budget; the warning's likely-lost list
is computed with the old rule (a fixed 0.05 under the best kept score) and with
candidate rules judged in the list's own spread, side by side in one run. On the
answerable cases it also counts the cases where a judged-relevant passage was
dropped and whether the rule named it (the loss a warning is for).

Then real questions over this machine's documentation (`_docs_questions`: man
pages as text and /usr/share/doc files, indexed into a temporary folder), through
the index's retriever and the `chat` surface as `ragbudget ask` runs them: per
question, whether the answer passage was kept, whether the warning line names a
passage as likely lost (under the rule before and the shipped one), and whether a
drop-warning line shows where nothing after fusion's cut was dropped or shortened.

    python benchmarks/bench_warnings.py --limit 300            # all three
    python benchmarks/bench_warnings.py --no-rerank             # dense_score decides
    python benchmarks/bench_warnings.py --only docs             # the real files only
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import parser_with_data, print_machine
from _docs_questions import Question, build_folder, holds, usable_questions
from rich.console import Console
from rich.table import Table

from langchain_ragbudget import RagBudgetConfig
from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._report import BudgetedContext
from langchain_ragbudget.chain._pipeline import explain
from langchain_ragbudget.chain._triage import (
    NEAR_CUT,
    Closeness,
    close_to_top,
    likely_lost,
)
from langchain_ragbudget.chain._warnings import (
    asked_drops,
    context_warnings,
    likely_lost_of,
)
from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.evaluation import BeirDataset, load_beir
from langchain_ragbudget.evaluation._beir import judged_id
from langchain_ragbudget.evaluation._stages import Stages
from langchain_ragbudget.index import HybridIndex
from langchain_ragbudget.ledger._records import CandidateList, DropReason, Stage
from langchain_ragbudget.retrieval._rerank import FlashRankRerank
from langchain_ragbudget.sample import (
    demo_config_path,
    load_sample_corpus,
    load_sample_questions,
)


def _absolute(margin: float) -> Closeness:
    """The rule before: within a fixed `margin` of the best kept score."""
    return lambda score, top, scores: score >= top - margin


def _share(share: float) -> Closeness:
    return lambda score, top, scores: close_to_top(score, top, scores, share)


# name -> (what counts as close to the top, how far past its stage's cut a drop
# may rank and still be named for its score (None: anywhere), whether only the
# drops after fusion's cut are weighed with passages kept for their document
# set aside, as shipped)
RULES: dict[str, tuple[Closeness, int | None, bool]] = {
    "before: 0.05 absolute, any rank, every drop": (_absolute(0.05), None, False),
    "before: 0.10 of spread, first 2 past the cut, every drop": (
        close_to_top,
        NEAR_CUT,
        False,
    ),
    "0.10 of spread, any rank": (close_to_top, None, True),
    "above the top kept, any rank": (_share(0.0), None, True),
    "0.25 of spread, first 2 past the cut": (_share(0.25), 2, True),
    "0.10 of spread, first 2 past the cut (shipped)": (close_to_top, NEAR_CUT, True),
    "0.10 of spread, first past the cut": (close_to_top, 1, True),
}


@dataclass
class Tally:
    """Per rule: cases whose warning names a likely-lost passage."""

    cases: int = 0
    named: dict[str, int] = field(default_factory=dict)
    gold_dropped: int = 0  # answerable cases whose judged passage was dropped
    gold_named: dict[str, int] = field(default_factory=dict)
    line_named: int = 0  # the shipped warning text itself says "likely lost"


def measure(
    budget: ContextBudget,
    candidates: CandidateList,
    question: str,
    relevant: set[str],
    tally: Tally,
) -> None:
    """One case: fit, then ask every rule which drops it would name."""
    context = budget.fit(candidates, question=question)
    report, evidence = context.report, context.evidence
    drops = [
        r
        for r in report.drops
        if r.reason != DropReason.UNACCOUNTED and r.stage != Stage.HISTORY
    ]
    kept_gold = any(judged_id(doc) in relevant for doc in context.documents)
    dropped_gold = [r for r in drops if judged_id(r.document) in relevant]
    lost_gold = bool(dropped_gold) and not kept_gold
    tally.cases += 1
    tally.gold_dropped += lost_gold
    groups = {
        str(doc.id): citation.group
        for citation in context.citations
        for doc in citation.documents
    }
    for name, (rule, near_cut, after_cut) in RULES.items():
        lost = likely_lost(
            context.documents,
            report.kept_ids,
            asked_drops(report) if after_cut else drops,
            evidence.score_key,
            evidence.score,
            close=rule,
            near_cut=near_cut,
            groups=groups if after_cut else None,
        )
        tally.named[name] = tally.named.get(name, 0) + bool(lost)
        hit = lost_gold and any(judged_id(i.record.document) in relevant for i in lost)
        tally.gold_named[name] = tally.gold_named.get(name, 0) + hit
    tally.line_named += any("likely lost" in w for w in context_warnings(context))


def run(
    dataset: BeirDataset, config: RagBudgetConfig, surface: str, limit: int | None
) -> tuple[Tally, Tally]:
    """Both cases of the first `limit` judged questions: (answerable, gold removed)."""
    stages = Stages.build(dataset, config, [surface], None, None)
    budget = stages.budgets[surface]
    answerable, removed = Tally(), Tally()
    for query_id, text in list(dataset.queries.items())[:limit]:
        relevant = {d for d, rel in dataset.qrels[query_id].items() if rel > 0}
        as_is, without = stages.with_and_without(text, relevant)
        measure(budget, as_is, text, relevant, answerable)
        measure(budget, without, text, relevant, removed)
    return answerable, removed


def sample_dataset() -> BeirDataset:
    """The bundled sample corpus as a BEIR dataset: each question judges its docs."""
    corpus = load_sample_corpus()
    doc_of = {str(d.id): judged_id(d) for d in corpus}
    questions = load_sample_questions()
    queries = {f"q{i}": q["question"] for i, q in enumerate(questions)}
    qrels = {
        f"q{i}": {doc_of[a]: 1 for a in q["answer_ids"]}
        for i, q in enumerate(questions)
        if q["answer_ids"]
    }
    return BeirDataset(
        "sample", corpus, {k: v for k, v in queries.items() if k in qrels}, qrels
    )


def table(title: str, tallies: Sequence[tuple[str, Tally, Tally]]) -> Table:
    out = Table(title=title)
    out.add_column("corpus")
    out.add_column("rule")
    out.add_column("gold removed: named", justify="right")
    out.add_column("answerable: named", justify="right")
    out.add_column("answerable, gold dropped: named", justify="right")
    for corpus, answerable, removed in tallies:
        for name in RULES:
            out.add_row(
                corpus,
                name,
                f"{removed.named[name]}/{removed.cases} "
                f"({removed.named[name] / removed.cases:.0%})",
                f"{answerable.named[name]}/{answerable.cases} "
                f"({answerable.named[name] / answerable.cases:.0%})",
                f"{answerable.gold_named[name]}/{answerable.gold_dropped}",
            )
    return out


@dataclass
class DocsTally:
    """The real-files questions: answer kept, likely lost named, line shown."""

    answerable: int = 0
    answer_kept: int = 0
    named_before: int = 0  # answer kept, yet a passage named (rule before)
    named_shipped: int = 0  # answer kept, yet a passage named (shipped rule)
    answer_named: int = 0  # answer dropped after the cut and named
    answer_dropped: int = 0
    unanswerable: int = 0
    unanswerable_named: int = 0
    quiet_cases: int = 0  # nothing after the cut dropped or shortened
    quiet_with_line: int = 0  # ... and a drop line shown anyway
    rows: list[tuple[str, str, str, str, str]] = field(default_factory=list)


def named_before(context: BudgetedContext) -> bool:
    """The rule before: every drop weighed (fusion's cut too), ranks as retrieved."""
    report, evidence = context.report, context.evidence
    drops = [
        r
        for r in report.drops
        if r.reason != DropReason.UNACCOUNTED
        and r.stage not in (Stage.HISTORY, Stage.MEMORY)
    ]
    lost = likely_lost(
        context.documents, report.kept_ids, drops, evidence.score_key, evidence.score
    )
    return bool(lost)


def measure_docs(
    context: BudgetedContext, question: Question, tally: DocsTally
) -> None:
    """One real question: the answer's fate, the likely-lost names, the line."""
    answer = question.answer
    lost = likely_lost_of(context)
    before = named_before(context)
    drops = asked_drops(context.report)
    lines = [w for w in context_warnings(context) if " context: " in w]
    if not drops and not context.report.trimmed:
        tally.quiet_cases += 1
        tally.quiet_with_line += bool(lines)
    kept = answer is not None and any(
        holds(d.page_content, answer) for d in context.documents
    )
    if answer is None:
        tally.unanswerable += 1
        tally.unanswerable_named += bool(lost)
        fate = "-"
    elif kept:
        tally.answerable += 1
        tally.answer_kept += 1
        tally.named_before += before
        tally.named_shipped += bool(lost)
        fate = "kept"
    else:
        tally.answerable += 1
        dropped = [r for r in drops if holds(r.document.page_content, answer)]
        tally.answer_dropped += bool(dropped)
        tally.answer_named += any(
            holds(i.record.document.page_content, answer) for i in lost
        )
        fate = "dropped after the cut" if dropped else "not retrieved"
    shown = "; ".join(w[len("[warning: chat context: ") :][:60] for w in lines)
    named = f"{before}/{bool(lost)}"
    tally.rows.append((question.text, fate, named, str(len(drops)), shown or "-"))


def run_docs(config: RagBudgetConfig, surface: str) -> dict[str, DocsTally]:
    """Index the documentation folder in a temp dir; ask every question twice.

    Once through `surface` as configured, once with room for every candidate
    fusion keeps (`max_docs` = `retrieval.k`, 4,000 tokens), where a drop line
    should be rare.
    """
    k = config.retrieval.k
    budgets = {
        f"{surface} as shipped": ContextBudget.from_config(config, surface=surface),
        f"{surface}, max_docs={k}, max_tokens=4000": ContextBudget.from_config(
            config, surface=surface, max_docs=k, max_tokens=4000
        ),
    }
    tallies = {name: DocsTally() for name in budgets}
    with tempfile.TemporaryDirectory() as tmp:
        docs = build_folder(Path(tmp))
        questions = usable_questions(docs)
        index = HybridIndex.open(Path(tmp) / "index", config, write=True)
        try:
            index.ingest(docs)
        finally:
            index.close()
        index = HybridIndex.open(Path(tmp) / "index", config, create=False)
        reranker = FlashRankRerank.from_config(config)
        retriever = index.as_retriever()
        for question in questions:
            for name, budget in budgets.items():
                explained = explain(question.text, retriever, budget, reranker=reranker)
                measure_docs(explained.context, question, tallies[name])
        index.close()
    return tallies


def docs_table(tally: DocsTally, budget: str) -> Table:
    out = Table(title=f"real questions over this machine's documentation ({budget})")
    for name in (
        "question",
        "answer passage",
        "named: before/shipped",
        "dropped after the cut",
        "drop and shortening lines",
    ):
        out.add_column(name)
    for row in tally.rows:
        out.add_row(*row)
    return out


def docs_summary(tally: DocsTally) -> list[str]:
    return [
        f"answerable: answer passage kept in {tally.answer_kept}/{tally.answerable}; "
        f"of those, a passage named likely lost in {tally.named_before} (rule before) "
        f"and {tally.named_shipped} (shipped): no name in "
        f"{tally.answer_kept - tally.named_shipped}/{tally.answer_kept}",
        f"answerable, answer dropped after the cut: {tally.answer_dropped}, "
        f"named {tally.answer_named}",
        f"unanswerable: a passage named likely lost in "
        f"{tally.unanswerable_named}/{tally.unanswerable}",
        f"nothing after the cut dropped or shortened: {tally.quiet_cases} questions, "
        f"a drop or shortening line on {tally.quiet_with_line}",
    ]


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--surface", default="chat")
    parser.add_argument("--no-rerank", action="store_true")
    parser.add_argument("--only", choices=["scifact", "docs"], default=None)
    args = parser.parse_args()
    out = Console(width=140)
    print_machine(out)

    def configured(path: Path | None = None) -> RagBudgetConfig:
        config = load_config(path)
        if args.no_rerank:
            rerank = config.rerank.model_copy(update={"enabled": False})
            config = config.model_copy(update={"rerank": rerank})
        return config

    if args.only != "scifact":
        tallies = run_docs(configured(), args.surface)
        for name, tally in tallies.items():
            out.print(docs_table(tally, name))
            for line in docs_summary(tally):
                out.print(line)
    if args.only == "docs":
        return
    rows = []
    scifact = load_beir(args.data, "test")
    answerable, removed = run(scifact, configured(), args.surface, args.limit)
    rows.append(("scifact", answerable, removed))
    answerable, removed = run(
        sample_dataset(), configured(demo_config_path()), "chat", None
    )
    rows.append(("sample (demo.yml)", answerable, removed))
    key = "dense_score" if args.no_rerank else "rerank_score, then dense_score"
    out.print(table(f"cases whose warning names a likely-lost passage ({key})", rows))
    for corpus, answerable, removed in rows:
        out.print(
            f"{corpus}: the shipped warning line says 'likely lost' on "
            f"{removed.line_named}/{removed.cases} gold-removed and "
            f"{answerable.line_named}/{answerable.cases} answerable cases"
        )


if __name__ == "__main__":
    main()
