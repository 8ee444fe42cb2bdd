import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
import tiktoken
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig

from langchain_ragbudget import load_config
from langchain_ragbudget.budget._context_budget import REPORT_EVENT, ContextBudget
from langchain_ragbudget.budget._render import ContextFormat, quote
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.errors import InvalidInputError
from langchain_ragbudget.ledger._records import (
    CandidateList,
    DropReason,
    DropRecord,
    Stage,
)


def passage(doc_id: str, n: int, text: str, **metadata: Any) -> Document:
    return Document(
        id=f"{doc_id}::{n}",
        page_content=text,
        metadata={"doc_id": doc_id, "source": f"{doc_id}.md", **metadata},
    )


def budget(**settings: Any) -> ContextBudget:
    base = {"max_docs": 10, "max_tokens": 200, "model": "gpt-4o"}
    return ContextBudget(
        surface="chat", settings=SurfaceSettings(**{**base, **settings})
    )


@pytest.mark.needs_tiktoken
def test_model_resolves_encoding_and_tokens_match_tiktoken() -> None:
    docs = [passage("a", 0, "Hello world. " * 5), passage("b", 0, "Second one.")]
    context = budget().fit(docs)
    assert context.report.encoding == "o200k_base"
    assert context.report.tokens_used == len(
        tiktoken.get_encoding("o200k_base").encode(context.text)
    )
    cl100k = budget(encoding="cl100k_base").fit(docs)
    assert cl100k.report.encoding == "cl100k_base"
    assert cl100k.report.tokens_used == len(
        tiktoken.get_encoding("cl100k_base").encode(cl100k.text)
    )


@pytest.mark.needs_tiktoken
def test_chunks_of_one_document_share_one_citation() -> None:
    docs = [
        passage("handbook", 0, "Deploys happen on Tuesdays.", dense_score=0.9),
        passage("faq", 0, "Refunds take 5 days.", dense_score=0.8),
        passage("handbook", 1, "Rollbacks need an incident.", dense_score=0.7),
        Document(
            id="other::0",
            page_content="Same file name.",
            metadata={"doc_id": "other", "source": "handbook.md"},
        ),
    ]
    context = budget().fit(docs)
    assert [
        (c.number, c.group, [d.id for d in c.documents]) for c in context.citations
    ] == [
        (1, "handbook", ["handbook::0", "handbook::1"]),
        (2, "faq", ["faq::0"]),
        (3, "other", ["other::0"]),
    ]
    assert (
        context.text.count("handbook.md") == 2
    )  # two documents that share a file name
    assert context.text.startswith("[1] handbook.md\n> Deploys happen on Tuesdays.\n\n")


@pytest.mark.needs_tiktoken
def test_kept_text_is_verbatim() -> None:
    text = "  leading spaces, trailing newline\n\n"
    context = budget().fit([passage("a", 0, text)])
    assert "[1] a.md\n" + quote(text) + "\n\n" == context.text  # every line quoted
    assert quote(text) == ">   leading spaces, trailing newline\n>\n>"  # blank: ">"
    assert context.documents[0].page_content == text


@pytest.mark.needs_tiktoken
def test_seed_000_short_answer_ranked_last_is_packed() -> None:
    bulky = [
        passage(
            "expenses",
            i,
            f"Expense policy clause {i}. " + "Receipts are filed monthly. " * 60,
        )
        for i in range(4)
    ]
    answer = passage("expenses", 9, "Answer: international per diem is $100 per day.")
    docs = [*bulky, answer]
    sizes = [
        count_tokens(ContextFormat().render_passage(d), "o200k_base") for d in docs
    ]
    max_tokens = (
        sizes[0] * 3 + sizes[4] + 40
    )  # three bulky and the answer fit, not all five
    assert sum(sizes) > max_tokens
    context = budget(max_tokens=max_tokens).fit(docs)
    assert "expenses::9" in context.report.kept_ids
    assert [(r.key, r.reason) for r in context.report.budget_drops] == [
        ("expenses::3", DropReason.MAX_TOKENS)
    ]


@pytest.mark.needs_tiktoken
def test_over_budget_top_passage_is_kept_and_reported() -> None:
    context = budget(max_tokens=5, min_docs=1).fit(
        [passage("a", 0, "word " * 50), passage("b", 0, "x")]
    )
    assert context.report.over_budget and context.report.kept_ids == ["a::0"]
    assert context.report.tokens_used > 5


@pytest.mark.needs_tiktoken
def test_edges_order_renumbers_citations_in_reading_order() -> None:
    docs = [passage(f"d{i}", 0, f"passage {i}") for i in range(5)]
    context = budget(order="edges").fit(docs)
    assert [c.group for c in context.citations] == ["d0", "d2", "d4", "d3", "d1"]
    assert [c.number for c in context.citations] == [1, 2, 3, 4, 5]
    assert context.report.tokens_used == count_tokens(context.text, "o200k_base")


@pytest.mark.needs_tiktoken
def test_upstream_records_travel_into_the_report() -> None:
    dropped = passage("z", 0, "cut at fusion")
    upstream = DropRecord("z::0", Stage.FUSION, DropReason.FUSION_CUT, 11, dropped)
    context = budget(max_docs=1).fit(
        CandidateList([passage("a", 0, "x"), passage("b", 0, "y")], [upstream])
    )
    report = context.report.to_dict()
    assert [(d["id"], d["stage"], d["reason"]) for d in report["dropped"]] == [
        ("z::0", "fusion", "below_fusion_cut"),
        ("b::0", "budget", "over_max_docs"),
    ]
    json.dumps(report)


@pytest.mark.needs_tiktoken
def test_counts_are_cached_per_text() -> None:
    docs = [passage("cache", 0, "a text counted once " * 3)]
    budget().fit(docs)
    hits = count_tokens.cache_info().hits
    budget().fit(docs)
    assert count_tokens.cache_info().hits >= hits + 2  # passage and header


class Recorder(BaseCallbackHandler):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.metadata: list[dict[str, Any]] = []

    def on_custom_event(
        self, name: str, data: Any, *, run_id: UUID, **kwargs: Any
    ) -> None:
        self.events.append((name, data))

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.metadata.append(metadata or {})


@pytest.mark.needs_tiktoken
async def test_report_reaches_callbacks_sync_and_async() -> None:
    docs = [passage("a", 0, "x " * 400), passage("b", 0, "kept")]
    for call in ("sync", "async"):
        recorder = Recorder()
        config = RunnableConfig(callbacks=[recorder], metadata={"user": "u1"})
        stage = budget(max_tokens=50, min_docs=0)
        state = {"question": "q", "documents": docs}
        out = (
            stage.invoke(state, config)
            if call == "sync"
            else await stage.ainvoke(state, config)
        )
        assert out["context"].report.kept_ids == ["b::0"]
        ((name, data),) = recorder.events
        assert name == REPORT_EVENT and [d["id"] for d in data["dropped"]] == ["a::0"]
        report_runs = [m for m in recorder.metadata if "ragbudget_dropped_ids" in m]
        assert report_runs == [
            {
                "user": "u1",
                "ragbudget_surface": "chat",
                "ragbudget_tokens_used": out["context"].report.tokens_used,
                "ragbudget_max_tokens": 50,
                "ragbudget_dropped_ids": ["a::0"],
                "ragbudget_unaccounted_ids": [],
                "ragbudget_skipped_stages": [],
            }
        ]


@pytest.mark.needs_tiktoken
def test_list_in_context_out_and_bad_input_named() -> None:
    assert budget().invoke([passage("a", 0, "x")]).report.kept_ids == ["a::0"]
    with pytest.raises(InvalidInputError, match="list of Documents"):
        budget().invoke({"docs": []})


def test_from_config_takes_a_config_a_file_or_nothing(tmp_path: Path) -> None:
    yaml_file = tmp_path / "ragbudget.yml"
    yaml_file.write_text("surfaces:\n  search:\n    max_tokens: 777\n")
    loaded = ContextBudget.from_config(load_config(yaml_file), surface="search")
    from_file = ContextBudget.from_config(yaml_file, surface="search")
    assert loaded.surface == from_file.surface == "search"
    assert (
        loaded.settings == from_file.settings and from_file.settings.max_tokens == 777
    )
    assert ContextBudget.from_config().settings == load_config().surface("chat")


def test_format_must_keep_token_counts_additive() -> None:
    with pytest.raises(ValueError, match="non-space"):
        ContextFormat(passage="{text}")


texts = st.lists(
    st.sampled_from(
        [*"ab .,:;!?-\n\t\r 1234567890é漢🙂[]>", "word", "  ", "\n\n", "Hello"]
    ),
    max_size=40,
).map("".join)


@pytest.mark.needs_tiktoken
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), texts), min_size=0, max_size=12),
    st.integers(1, 200),
    st.integers(1, 8),
    st.just("skip"),  # whole passages only (trim: test_trim.py)
    st.sampled_from(["rank", "edges"]),
    st.sampled_from(["o200k_base", "cl100k_base"]),
)
def test_budget_is_exact_and_never_exceeded(
    rows: list[tuple[str, str]],
    max_tokens: int,
    max_docs: int,
    policy: str,
    order: str,
    encoding: str,
) -> None:
    docs = [
        passage(doc_id, i, text, dense_score=1.0 - i / 100)
        for i, (doc_id, text) in enumerate(rows)
    ]
    context = budget(
        max_tokens=max_tokens,
        max_docs=max_docs,
        packing=policy,
        order=order,
        encoding=encoding,
    ).fit(docs)
    report = context.report
    assert report.tokens_used == len(
        tiktoken.get_encoding(encoding).encode(context.text, disallowed_special=())
    )
    assert report.tokens_used <= max_tokens or report.over_budget
    keys = report.kept_ids + [r.key for r in report.drops]
    assert sorted(keys) == sorted(
        d.id for d in docs if d.id
    )  # each candidate exactly once
    for kept in context.documents:
        source = next(d for d in docs if d.id == kept.id)
        assert kept.page_content == source.page_content
        assert quote(kept.page_content) in context.text


@pytest.mark.needs_tiktoken
def test_passage_and_header_tokens_add_up_and_a_drop_names_its_header() -> None:
    from langchain_ragbudget.ledger._metadata_keys import CONTEXT_TOKENS, HEADER_TOKENS

    docs = [
        passage("handbook", 0, "Deploys happen on Tuesdays.", dense_score=0.9),
        passage("handbook", 1, "Rollbacks need an incident.", dense_score=0.8),
        passage("faq", 0, "Refunds take five working days. " * 3, dense_score=0.7),
    ]
    fitted = budget(max_tokens=400).fit(docs)
    header = [d.metadata[HEADER_TOKENS] for d in fitted.documents]
    assert header[0] > 0 and header[1] == 0  # one header per source document
    assert fitted.report.tokens_used == sum(
        d.metadata[CONTEXT_TOKENS] + d.metadata[HEADER_TOKENS] for d in fitted.documents
    )
    # a budget with room for the faq passage alone, not for its citation header
    first_two = (
        fitted.report.tokens_used
        - header[2]
        - fitted.documents[2].metadata[CONTEXT_TOKENS]
    )
    tight = budget(max_tokens=first_two + fitted.documents[2].metadata[CONTEXT_TOKENS])
    context = tight.fit(docs)
    (drop,) = context.report.budget_drops
    assert drop.key == "faq::0" and drop.reason == DropReason.MAX_TOKENS
    assert drop.header_tokens == header[2]
    assert HEADER_TOKENS not in drop.document.metadata  # the candidate is not copied
    assert f"+ a {header[2]}-token citation header" in drop.detail
