"""Evaluation harness: retrieval quality per stage, and survival through the budget.

Per query, the ranking after each stage, which gold passages each stage dropped
and why, the tokens used, and silent drops (candidates in neither the context
nor the records: always 0, or the one rule is broken); and packing policies
compared on the same candidates at several budgets.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from langchain_core.documents import Document

from langchain_ragbudget.budget._context_budget import BudgetedContext, ContextBudget
from langchain_ragbudget.config._settings import RagBudgetConfig
from langchain_ragbudget.evaluation._beir import BeirDataset, judged_id
from langchain_ragbudget.evaluation._metrics import (
    hit_at_k,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
    without_query_itself,
)
from langchain_ragbudget.evaluation._stages import Stages
from langchain_ragbudget.evaluation._survival import (
    DEFAULT_BUDGETS,
    POLICIES,
    every_policy,
    shares,
)
from langchain_ragbudget.evaluation._tables import EvalReport, StageQuality, Survival
from langchain_ragbudget.evaluation._weak_evidence import measure_weak_evidence
from langchain_ragbudget.ledger._identity import document_key
from langchain_ragbudget.ledger._records import CandidateList
from langchain_ragbudget.progress import ProgressCallback, StageProgress
from langchain_ragbudget.retrieval._rerank import FlashRankRerank


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


@dataclass
class _Accumulator:
    rankings: dict[str, list[tuple[list[str], dict[str, int]]]] = field(
        default_factory=dict
    )
    gold_retrieved: Counter[str] = field(default_factory=Counter)
    gold_kept: Counter[str] = field(default_factory=Counter)
    gold_dropped: dict[str, Counter[str]] = field(default_factory=dict)
    silent: Counter[str] = field(default_factory=Counter)
    tokens: dict[str, list[int]] = field(default_factory=dict)
    over_budget: Counter[str] = field(default_factory=Counter)
    policy_hits: dict[str, list[int]] = field(default_factory=dict)
    policy_gold: int = 0
    evidence_hits: dict[str, list[int]] = field(default_factory=dict)
    evidence_gold: int = 0
    bad_cuts: dict[str, int] = field(default_factory=dict)
    surface_evidence: Counter[str] = field(default_factory=Counter)
    surface_evidence_kept: Counter[str] = field(default_factory=Counter)

    ignore_query: str | None = None  # the query id, while BEIR's rule applies

    def rank(self, stage: str, docs: Sequence[Document], rel: dict[str, int]) -> None:
        ranked = [judged_id(d) for d in docs]
        if self.ignore_query is not None:
            ranked = without_query_itself(ranked, self.ignore_query)
        self.rankings.setdefault(stage, []).append((ranked, rel))


def evaluate(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    *,
    surfaces: Sequence[str] | None = None,
    k: int = 10,
    limit: int | None = None,
    budgets: Sequence[int] = DEFAULT_BUDGETS,
    reranker: FlashRankRerank | None = None,
    progress: ProgressCallback | None = None,
    ignore_identical_ids: bool = True,
    weak_fit: BeirDataset | None = None,
) -> EvalReport:
    """Run the configured pipeline over `dataset` and measure every stage.

    Corpus embeddings are cached on disk, keyed by content and model.

    Args:
        dataset: A BEIR dataset (corpus, queries, qrels; rationales if any).
        config: The configuration whose pipeline is measured.
        surfaces: The budgets to measure (every configured surface if None).
        k: The k of hit@k and recall@k.
        limit: Measure the first `limit` queries only.
        budgets: Token budgets at which packing policies are compared.
        reranker: A rerank stage instead of the configured one (an unavailable
            model shows as "skipped").
        progress: Called with (stage, done, total) as work advances.
        ignore_identical_ids: As BEIR's evaluator does, leave out a hit whose id
            is the query's own.
        weak_fit: Labelled questions to fit the combined weak-evidence signal
            on, then measured on `dataset` (`EvalReport.weak_evidence`).

    Raises:
        ConfigError: A surface is unknown, or its weak-evidence check names a
            score no stage writes.
        ModelUnavailableError: The embedding model cannot be loaded, or the
            configured reranker's cannot and `rerank.on_unavailable` is `error`.
    """
    surfaces = list(surfaces or config.surfaces)
    stages = Stages.build(dataset, config, surfaces, reranker, progress)
    queries = list(dataset.queries.items())[:limit]
    acc = _Accumulator(
        policy_hits={policy: [0] * len(budgets) for policy in POLICIES},
        evidence_hits={policy: [0] * len(budgets) for policy in POLICIES},
    )
    answered = StageProgress(progress, "queries", len(queries)).start()
    for query_id, text in queries:
        relevant = {doc: rel for doc, rel in dataset.qrels[query_id].items() if rel > 0}
        rationales = dataset.rationales.get(query_id, {})
        acc.ignore_query = query_id if ignore_identical_ids else None
        candidates = _measure_query(stages, acc, text, relevant, rationales)
        _compare_policies(
            acc,
            candidates,
            relevant,
            rationales,
            budgets,
            stages.encoding,
            stages.hybrid.id_key,
            text,
        )
        answered.advance()
    report = _report(dataset, config, stages, acc, k, len(queries), budgets)
    if weak_fit is not None:
        report.weak_evidence = measure_weak_evidence(
            stages, config, surfaces[0], weak_fit, dataset, limit, progress
        )
    return report


def _measure_query(
    stages: Stages,
    acc: _Accumulator,
    text: str,
    relevant: dict[str, int],
    rationales: dict[str, list[str]],
) -> CandidateList:
    """One query, stage by stage; rankings and survival go to `acc`."""
    hybrid = stages.hybrid
    lists = [retriever.invoke(text) for retriever in hybrid.retrievers]
    for name, docs in zip(hybrid.resolved_names, lists, strict=True):
        acc.rank(name, docs, relevant)
    candidates = hybrid.fuse(lists, hybrid.k)
    acc.rank("fusion", candidates, relevant)
    if stages.reranker is not None and stages.reranks:
        candidates = stages.reranker.compress_documents(candidates, text)
        acc.rank("rerank", candidates, relevant)
    entered = {document_key(d, hybrid.id_key): d for docs in lists for d in docs}
    for surface, stage in stages.budgets.items():
        context = stage.fit(candidates, question=text)
        acc.rank(f"budget:{surface}", _ranked(context, hybrid.id_key), relevant)
        _account(acc, surface, entered, context, relevant)
        _account_evidence(acc, surface, entered, context, rationales)
    return candidates


def _report(
    dataset: BeirDataset,
    config: RagBudgetConfig,
    stages: Stages,
    acc: _Accumulator,
    k: int,
    n_queries: int,
    budgets: Sequence[int],
) -> EvalReport:
    names = stages.hybrid.resolved_names
    quality = [_quality(name, acc, k) for name in [*names, "fusion"]]
    if "rerank" in acc.rankings:
        quality.append(_quality("rerank", acc, k))
    else:
        reason = "no reranker" if stages.reranker is None else "model unavailable"
        quality.append(StageQuality("rerank", "skipped", note=reason))
    quality += [_quality(f"budget:{surface}", acc, k) for surface in stages.budgets]
    retrieval = config.retrieval
    return EvalReport(
        dataset=dataset.name,
        n_queries=n_queries,
        n_documents=len(dataset.corpus),
        k=k,
        quality=quality,
        survival=[
            _survival(acc, surface, stage) for surface, stage in stages.budgets.items()
        ],
        policy_budgets=list(budgets),
        policy_survival=shares(acc.policy_hits, acc.policy_gold),
        policy_encoding=stages.encoding,
        evidence_gold=acc.evidence_gold,
        evidence_survival=shares(acc.evidence_hits, acc.evidence_gold),
        mid_sentence_cuts={p: n for p, n in acc.bad_cuts.items() if p != "naive slice"},
        settings={
            "fusion_k": retrieval.k,
            "fetch_k": [retrieval.sparse.fetch_k, retrieval.dense.fetch_k],
            "weights": [retrieval.sparse.weight, retrieval.dense.weight],
            "fusion": retrieval.fusion,
            "rrf_c": retrieval.rrf_c,
            "rerank": config.rerank.model if stages.reranks else None,
        },
    )


def _ranked(context: BudgetedContext, id_key: str | None) -> list[Document]:
    """The kept passages in the budget's input order (the prompt may use `edges`)."""
    by_key = {document_key(doc, id_key): doc for doc in context.documents}
    return [by_key[key] for key in context.report.kept_ids]


def _account(
    acc: _Accumulator,
    surface: str,
    entered: dict[str, Document],
    context: BudgetedContext,
    relevant: dict[str, int],
) -> None:
    """Count gold passages kept and dropped, tokens, and silent drops (must be 0)."""
    report = context.report
    accounted = report.kept_ids + [record.key for record in report.drops]
    missing = set(entered) - set(accounted)
    acc.silent[surface] += len(missing) + len(accounted) - len(set(accounted))
    acc.gold_retrieved[surface] += sum(
        judged_id(d) in relevant for d in entered.values()
    )
    acc.gold_kept[surface] += sum(judged_id(d) in relevant for d in context.documents)
    dropped = acc.gold_dropped.setdefault(surface, Counter())
    for record in report.drops:
        if judged_id(record.document) in relevant:
            dropped[f"{record.stage}/{record.reason}"] += 1
    acc.tokens.setdefault(surface, []).append(report.tokens_used)
    acc.over_budget[surface] += report.over_budget


def _account_evidence(
    acc: _Accumulator,
    surface: str,
    entered: dict[str, Document],
    context: BudgetedContext,
    rationales: dict[str, list[str]],
) -> None:
    """Count gold passages with marked evidence, and those that kept all of it."""
    found = {judged_id(d) for d in entered.values()} & set(rationales)
    acc.surface_evidence[surface] += len(found)
    kept_text = {judged_id(d): d.page_content for d in context.documents}
    acc.surface_evidence_kept[surface] += sum(
        doc_id in kept_text
        and all(sentence in kept_text[doc_id] for sentence in rationales[doc_id])
        for doc_id in found
    )


def _compare_policies(
    acc: _Accumulator,
    candidates: Sequence[Document],
    relevant: dict[str, int],
    rationales: dict[str, list[str]],
    budgets: Sequence[int],
    encoding: str,
    id_key: str | None,
    question: str,
) -> None:
    """Gold passages kept whole, and gold evidence kept, by each policy and budget."""
    gold = {i for i, doc in enumerate(candidates) if judged_id(doc) in relevant}
    if not gold:
        return
    evidence = {
        i: rationales[judged_id(candidates[i])]
        for i in gold
        if judged_id(candidates[i]) in rationales
    }
    acc.policy_gold += len(gold)
    acc.evidence_gold += len(evidence)
    for policy, result in every_policy(
        candidates, budgets, encoding, question, evidence, id_key
    ):
        for position, (ids, evidence_ids) in enumerate(
            zip(result.passages, result.evidence, strict=True)
        ):
            acc.policy_hits[policy][position] += len(gold.intersection(ids))
            acc.evidence_hits[policy][position] += len(evidence_ids)
        acc.bad_cuts[policy] = acc.bad_cuts.get(policy, 0) + sum(result.bad_cuts)


def _quality(stage: str, acc: _Accumulator, k: int) -> StageQuality:
    rows = acc.rankings.get(stage, [])
    return StageQuality(
        stage,
        "ran",
        hit=_mean([hit_at_k(r, rel, k) for r, rel in rows]),
        mrr=_mean([mrr_at_k(r, rel, 10) for r, rel in rows]),
        recall=_mean([recall_at_k(r, rel, k) for r, rel in rows]),
        ndcg=_mean([ndcg_at_k(r, rel, 10) for r, rel in rows]),
    )


def _survival(acc: _Accumulator, surface: str, stage: ContextBudget) -> Survival:
    tokens = acc.tokens.get(surface, [])
    return Survival(
        surface=surface,
        max_tokens=stage.settings.max_tokens,
        max_docs=stage.settings.max_docs,
        gold_retrieved=acc.gold_retrieved[surface],
        gold_kept=acc.gold_kept[surface],
        gold_dropped=dict(acc.gold_dropped.get(surface, Counter())),
        silent_drops=acc.silent[surface],
        tokens_mean=_mean([float(t) for t in tokens]),
        tokens_p50=float(statistics.median(tokens)) if tokens else 0.0,
        tokens_max=max(tokens, default=0),
        over_budget=acc.over_budget[surface],
        evidence_retrieved=acc.surface_evidence[surface],
        evidence_kept=acc.surface_evidence_kept[surface],
    )
