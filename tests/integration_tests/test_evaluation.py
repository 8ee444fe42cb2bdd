"""The harness on a BEIR folder the test writes from the sample corpus: any folder
works, not only SciFact. Real BM25, Chroma, fastembed and budget; FlashRank is the
tiny test model where a rerank row must run."""

import gzip
import json
from pathlib import Path

import pytest

from langchain_ragbudget import load_config
from langchain_ragbudget.cli._main import main
from langchain_ragbudget.evaluation._beir import DatasetError, load_beir
from langchain_ragbudget.evaluation._harness import evaluate
from langchain_ragbudget.evaluation._report import QUALITY_END, QUALITY_START
from langchain_ragbudget.evaluation._tables import rich_tables, to_markdown
from langchain_ragbudget.retrieval._rerank import FlashRankRerank
from langchain_ragbudget.sample import load_sample_corpus, load_sample_questions


@pytest.fixture
def beir_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "northwind"
    (folder / "qrels").mkdir(parents=True)
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as out:
        for doc in load_sample_corpus():
            out.write(
                json.dumps(
                    {
                        "_id": doc.id,
                        "title": doc.metadata["title"],
                        "text": doc.page_content,
                    }
                )
                + "\n"
            )
    questions = [q for q in load_sample_questions() if q["answer_ids"]]
    with (folder / "queries.jsonl").open("w") as out:
        for i, q in enumerate(questions):
            out.write(json.dumps({"_id": f"q{i}", "text": q["question"]}) + "\n")
    lines = ["query-id\tcorpus-id\tscore"] + [
        f"q{i}\t{doc}\t1" for i, q in enumerate(questions) for doc in q["answer_ids"]
    ]
    (folder / "qrels" / "test.tsv").write_text("\r\n".join(lines) + "\r\n")
    return folder


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_cli_eval_writes_json_plot_and_markdown(
    beir_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "RAGBUDGET_CACHE_DIR", str(tmp_path / "cache")
    )  # no FlashRank model
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n")
    bench = tmp_path / "BENCH.md"
    bench.write_text(f"# Title\n\n{QUALITY_START}\nSTALE\n{QUALITY_END}\n\n## After\n")
    code = main(
        [
            "eval",
            str(beir_folder),
            "--config",
            str(config),
            "--limit",
            "5",
            "--json",
            str(tmp_path / "r.json"),
            "--plot",
            str(tmp_path / "plot.png"),
            "--update",
            str(bench),
        ]
    )
    assert code == 0
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["n_queries"] == 5 and result["n_documents"] == 43
    rows = {row["stage"]: row for row in result["quality"]}
    assert set(rows) == {
        "bm25",
        "dense",
        "fusion",
        "rerank",
        "budget:chat",
        "budget:chat (skip)",
        "budget:search",
    }
    assert rows["rerank"]["status"] == "skipped" and rows["rerank"]["ndcg"] is None
    assert rows["fusion"]["hit"] > 0.5
    assert all(item["silent_drops"] == 0 for item in result["survival"])
    assert (tmp_path / "plot.png").read_bytes()[:4] == b"\x89PNG"
    text = bench.read_text()
    assert (
        "STALE" not in text
        and text.startswith("# Title")
        and text.endswith("## After\n")
    )
    assert "| rerank (model unavailable) | skipped |" in text and "plot.png" in text


@pytest.mark.needs_tiktoken
def test_rerank_row_runs_with_a_model_and_survival_adds_up(
    beir_folder: Path, tiny_flashrank_dir: Path
) -> None:
    reranker = FlashRankRerank(cache_dir=str(tiny_flashrank_dir), top_n=5)
    report = evaluate(
        load_beir(beir_folder), load_config(), reranker=reranker, budgets=(64, 4096)
    )
    rows = {row.stage: row for row in report.quality}
    assert rows["rerank"].status == "ran" and rows["rerank"].ndcg is not None
    for item in report.survival:
        assert item.silent_drops == 0
        dropped = sum(item.gold_dropped.values())
        # every gold passage the retrievers found is in the prompt or dropped
        assert item.gold_kept + dropped == item.gold_retrieved
    small, large = report.policy_survival["skip"]
    assert large == 1.0  # 4096 tokens hold all of the top 5
    assert small is not None and small <= large


def test_bad_folder_is_named(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="qrels file not found"):
        load_beir(tmp_path)
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("q1\td1\n")
    with pytest.raises(DatasetError, match=r"test.tsv:1: expected"):
        load_beir(tmp_path)


def test_unknown_surface_fails_before_work(
    beir_folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["eval", str(beir_folder), "--surface", "voice"]) == 2
    assert "unknown surface" in capsys.readouterr().err


def add_rationales(folder: Path) -> None:
    """SciFact-style extra/: each gold passage's first sentence is its evidence."""
    extra = folder / "extra"
    extra.mkdir()
    questions = [q for q in load_sample_questions() if q["answer_ids"]]
    with (extra / "claims_dev.jsonl").open("w") as out:
        for i, q in enumerate(questions):
            evidence = {doc: [{"sentences": [0]}] for doc in q["answer_ids"]}
            out.write(json.dumps({"id": f"q{i}", "evidence": evidence}) + "\n")
    with gzip.open(extra / "corpus_sentences.jsonl.gz", "wt") as out:
        for doc in load_sample_corpus():
            head, _, rest = doc.page_content.partition(". ")
            abstract = [f"{head}.", rest] if rest else [head]
            out.write(json.dumps({"doc_id": doc.id, "abstract": abstract}) + "\n")


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_evidence_survival_counts_sentences_a_slice_keeps(beir_folder: Path) -> None:
    add_rationales(beir_folder)
    dataset = load_beir(beir_folder)
    assert len(dataset.rationales) == len(dataset.queries)
    report = evaluate(dataset, load_config(), budgets=(96, 256, 4096))
    assert report.evidence_gold > 0
    for policy in ("skip",):  # whole passages: evidence goes with them
        assert report.evidence_survival[policy] == report.policy_survival[policy]
    naive_whole = [v or 0.0 for v in report.policy_survival["naive slice"]]
    naive_evidence = [v or 0.0 for v in report.evidence_survival["naive slice"]]
    assert all(e >= w for e, w in zip(naive_evidence, naive_whole, strict=True))
    assert naive_evidence[0] > naive_whole[0]  # a cut passage kept its first sentence
    markdown = to_markdown(report, "ragbudget eval")
    assert "counting evidence instead of whole passages" in markdown
    evidence_table = rich_tables(report)[-1]
    assert "gold evidence sentences" in str(evidence_table.title)
    assert evidence_table.row_count == 4  # slice, skip, trim, trim fitted


def test_malformed_rationales_are_named(beir_folder: Path) -> None:
    add_rationales(beir_folder)
    claims = beir_folder / "extra" / "claims_dev.jsonl"
    claims.write_text(json.dumps({"id": "q0", "evidence": {"x": [{"s": [0]}]}}) + "\n")
    with pytest.raises(DatasetError, match=r"claim q0, document x"):
        load_beir(beir_folder)


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_chunked_evaluation_counts_evidence_across_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_ragbudget.config._settings import load_config
    from langchain_ragbudget.evaluation._beir import BeirDataset
    from langchain_ragbudget.evaluation._chunked import chunk_k, evaluate_chunked
    from langchain_ragbudget.evidence._sentences import sentences

    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    corpus = load_sample_corpus()
    by_id = {doc.id: doc for doc in corpus}
    questions = [q for q in load_sample_questions() if q["answer_ids"]][:3]
    dataset = BeirDataset(
        "northwind",
        corpus,
        {f"q{i}": q["question"] for i, q in enumerate(questions)},
        {f"q{i}": {d: 1 for d in q["answer_ids"]} for i, q in enumerate(questions)},
        {  # the last sentence of each answer passage stands in for its evidence
            f"q{i}": {d: sentences(by_id[d].page_content)[-1:] for d in q["answer_ids"]}
            for i, q in enumerate(questions)
        },
    )
    reports: list[tuple[str, int, int | None]] = []
    first = evaluate_chunked(
        dataset,
        load_config(),
        64,
        budgets=[128, 1024],
        progress=lambda *report: reports.append(report),
    )
    stage = "64-token chunks: embedding chunks"
    embedded = [done for name, done, _ in reports if name == stage]
    totals = {total for name, _, total in reports if name == stage}
    assert embedded[0] == 0 and totals == {embedded[-1]} and embedded[-1] > 0
    assert reports[-1] == ("queries (64-token chunks)", 3, 3)
    assert first.k == chunk_k(10, 64) == 40 and first.evidence_gold > 0
    assert all(n == 0 for n in first.mid_sentence_cuts.values())
    assert set(first.evidence_survival) == {
        "naive slice",
        "skip",
        "trim",
        "trim, fitted",
    }
    for shares in first.evidence_survival.values():
        assert all(share is not None and 0 <= share <= 1 for share in shares)
    trim, skip = first.evidence_survival["trim"][1], first.evidence_survival["skip"][1]
    assert trim is not None and skip is not None and trim >= skip
    reports.clear()
    again = evaluate_chunked(
        dataset,
        load_config(),
        64,
        budgets=[128, 1024],
        progress=lambda *report: reports.append(report),
    )
    assert again == first  # the cached index gives the same result
    assert {stage for stage, _, _ in reports} == {"queries (64-token chunks)"}


def test_the_harness_leaves_out_the_query_itself_unless_told() -> None:
    from langchain_core.documents import Document

    from langchain_ragbudget.evaluation._harness import _Accumulator

    hits = [Document(id="q1", page_content="a"), Document(id="d2", page_content="b")]
    acc = _Accumulator(ignore_query="q1")
    acc.rank("fusion", hits, {"d2": 1})
    acc.ignore_query = None  # --keep-identical-ids
    acc.rank("fusion", hits, {"d2": 1})
    assert [ranked for ranked, _ in acc.rankings["fusion"]] == [["d2"], ["q1", "d2"]]


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_cli_eval_json_alone_prints_one_object_on_stdout(
    beir_folder: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    config = tmp_path / "offline.yml"
    config.write_text("rerank:\n  download: false\n")
    argv = ["eval", str(beir_folder), "--config", str(config), "--limit", "2"]
    assert main([*argv, "--surface", "chat", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)  # nothing but the object on stdout
    assert result["n_queries"] == 2
    assert "budget:chat" in {row["stage"] for row in result["quality"]}
    assert "nDCG" in err or "ndcg" in err.lower()  # the tables went to stderr


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_harness_agrees_with_pytrec_eval_when_queries_are_corpus_documents(
    tmp_path: Path,
) -> None:
    # Each query is a passage of the corpus, under its own id (as in ArguAna or
    # Quora); its judged-relevant documents are the other passages of its source.
    import pytrec_eval

    from langchain_ragbudget import HybridRetriever
    from langchain_ragbudget.evaluation._beir import BeirDataset

    corpus = [
        doc.model_copy(update={"metadata": {**doc.metadata, "doc_id": doc.id}})
        for doc in load_sample_corpus()
    ]
    by_source: dict[str, list[str]] = {}
    for doc in corpus:
        by_source.setdefault(doc.metadata["source"], []).append(str(doc.id))
    chosen = [doc for doc in corpus if len(by_source[doc.metadata["source"]]) > 1][:8]
    dataset = BeirDataset(
        "self-queries",
        corpus,
        {str(doc.id): doc.page_content[:300] for doc in chosen},
        {
            str(doc.id): {
                other: 1
                for other in by_source[doc.metadata["source"]]
                if other != doc.id
            }
            for doc in chosen
        },
    )
    config = load_config()
    retriever = HybridRetriever.from_config(config, documents=corpus)
    runs = {
        qid: [str(d.id) for d in retriever.invoke(text)]
        for qid, text in dataset.queries.items()
    }
    assert sum(runs[qid][0] == qid for qid in runs) >= 6  # a query finds itself
    measures = {"ndcg_cut_10", "recall_10", "recip_rank"}
    ndcg = []
    for ignore in (True, False):
        run = {
            qid: {
                doc: float(len(ranked) - i)
                for i, doc in enumerate(ranked)
                if not (ignore and doc == qid)
            }  # BEIR's ignore_identical_ids
            for qid, ranked in runs.items()
        }
        expected = pytrec_eval.RelevanceEvaluator(dataset.qrels, measures).evaluate(run)
        report = evaluate(dataset, config, budgets=(4096,), ignore_identical_ids=ignore)
        fusion = next(row for row in report.quality if row.stage == "fusion")

        mean = {
            measure: sum(row[measure] for row in expected.values()) / len(expected)
            for measure in measures
        }
        assert fusion.ndcg == pytest.approx(mean["ndcg_cut_10"], abs=1e-6)
        assert fusion.recall == pytest.approx(mean["recall_10"], abs=1e-6)
        assert fusion.mrr == pytest.approx(mean["recip_rank"], abs=1e-6)
        ndcg.append(fusion.ndcg)
    assert ndcg[0] != pytest.approx(ndcg[1])  # the rule changes the numbers here


@pytest.mark.needs_embedding_model
@pytest.mark.needs_tiktoken
def test_cli_weak_evidence_writes_table_plot_and_a_loadable_yaml(
    beir_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_ragbudget import ContextBudget

    monkeypatch.setenv("RAGBUDGET_CACHE_DIR", str(tmp_path / "cache"))
    qrels = beir_folder / "qrels"
    (qrels / "train.tsv").write_text((qrels / "test.tsv").read_text())
    offline = tmp_path / "offline.yml"
    offline.write_text("rerank:\n  download: false\n")
    bench, model = tmp_path / "BENCH.md", tmp_path / "weak.yml"
    code = main(
        [
            "eval",
            str(beir_folder),
            "--config",
            str(offline),
            "--weak-fit",
            "train",
            "--weak-evidence-yaml",
            str(model),
            "--calibration-plot",
            str(tmp_path / "calibration.png"),
            "--json",
            str(tmp_path / "r.json"),
            "--update",
            str(bench),
        ]
    )
    assert code == 0
    weak = json.loads((tmp_path / "r.json").read_text())["weak_evidence"]
    assert [m["method"] for m in weak["methods"]] == [
        "threshold (dense_score)",
        "combined (logistic)",
    ]
    assert weak["n_measured"] == weak["n_fit"] == 7
    assert (tmp_path / "calibration.png").read_bytes()[:4] == b"\x89PNG"
    text = bench.read_text()
    assert "| combined (logistic) |" in text and "calibration.png" in text
    config = load_config(model)  # the written model loads and wires
    settings = ContextBudget.from_config(config).settings.weak_evidence
    assert settings.method == "combined" and settings.combined is not None
    assert settings.combined.model_dump(exclude_none=True) == weak["model"]
