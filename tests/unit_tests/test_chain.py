"""The budgeted stuff chain. The chat model is a fake that streams word by word: it
stands in for an LLM API, which cannot run here; everything before it (budget,
citations, warnings) is the real code."""

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.prompts import ChatPromptTemplate
from sent_to_model import Sent

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.budget._render import ContextFormat
from langchain_ragbudget.chain._stuff import BudgetedAnswer, create_budgeted_stuff_chain
from langchain_ragbudget.config._settings import SurfaceSettings
from langchain_ragbudget.config._tokens import count_tokens
from langchain_ragbudget.ledger._records import CandidateList, Stage, StageSkip


class FakeChatModel(GenericFakeChatModel):
    """Streams like real providers do: the finish reason rides on the last chunk."""

    def _stream(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        message = next(self.messages)
        assert isinstance(message, AIMessage)
        for i, word in enumerate(str(message.content).split(" ")):
            piece = word if i == 0 else f" {word}"
            yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        final = AIMessageChunk(content="", response_metadata=message.response_metadata)
        yield ChatGenerationChunk(message=final)


def fake_llm(text: str = "The per diem is $100 [1].", **metadata: Any) -> FakeChatModel:
    return FakeChatModel(
        messages=iter([AIMessage(content=text, response_metadata=metadata)])
    )


def passage(doc_id: str, n: int, text: str, **metadata: Any) -> Document:
    return Document(
        id=f"{doc_id}::{n}",
        page_content=text,
        metadata={"doc_id": doc_id, "source": f"{doc_id}.md", **metadata},
    )


def budget(max_tokens: int, **settings: Any) -> ContextBudget:
    surface = SurfaceSettings(
        max_docs=10, max_tokens=max_tokens, model="gpt-4o", **settings
    )
    return ContextBudget(surface="chat", settings=surface)


def seed_000_docs() -> list[Document]:
    bulky = [
        passage(
            "expenses",
            i,
            f"Clause {i}. " + "Receipts are filed monthly. " * 60,
            dense_score=0.7,
        )
        for i in range(4)
    ]
    return [
        *bulky,
        passage(
            "expenses", 9, "International per diem: $100 per day.", dense_score=0.6
        ),
    ]


@pytest.mark.needs_tiktoken
def test_seed_000_answer_packed_and_dropped_passage_named() -> None:
    docs = seed_000_docs()
    sizes = [
        count_tokens(ContextFormat().render_passage(d), "o200k_base") for d in docs
    ]
    stage = budget(max_tokens=sizes[0] * 3 + sizes[4] + 40)
    recorder = Sent()
    chain = stage | create_budgeted_stuff_chain(fake_llm())
    out = chain.invoke(
        {"question": "What is the international per diem?", "documents": docs},
        {"callbacks": [recorder]},
    )
    assert out.startswith("The per diem is $100 [1].\n")
    # the per diem passage was kept with its document (its header already paid),
    # so the bigger clause above it is counted, not named as likely lost
    warning = "[warning: chat context: 1 lower-ranked left out (1 over_max_tokens)]"
    assert warning in out.split("\n")
    assert "International per diem: $100 per day." in recorder.prompts[0]
    assert "Receipts are filed monthly. " * 60 in recorder.prompts[0]
    assert "Clause 3." not in recorder.prompts[0]


@pytest.mark.needs_tiktoken
def test_truncated_answer_is_flagged() -> None:
    for metadata in ({"finish_reason": "length"}, {"stop_reason": "max_tokens"}):
        chain = budget(500) | create_budgeted_stuff_chain(
            fake_llm("Partial", **metadata)
        )
        out = chain.invoke(
            {"question": "q", "documents": [passage("a", 0, "x", dense_score=0.9)]}
        )
        assert "[warning: answer truncated at the model's output limit]" in out
    fine = budget(500) | create_budgeted_stuff_chain(
        fake_llm("Done", finish_reason="stop")
    )
    assert "truncated" not in fine.invoke(
        {"question": "q", "documents": [passage("a", 0, "x", dense_score=0.9)]}
    )


@pytest.mark.needs_tiktoken
def test_weak_evidence_in_prompt_and_output() -> None:
    recorder = Sent()
    stage = budget(
        500, weak_evidence={"thresholds": {"rerank_score": 0.5, "dense_score": 0.4}}
    )
    chain = stage | create_budgeted_stuff_chain(fake_llm("Not sure."), structured=True)
    docs = [passage("a", 0, "Unrelated text.", dense_score=0.21)]
    answer = chain.invoke(
        {"question": "q", "documents": docs}, {"callbacks": [recorder]}
    )
    assert isinstance(answer, BudgetedAnswer)
    assert (
        answer.weak_evidence is True and answer.evidence["score_key"] == "dense_score"
    )
    assert (
        "highest relevance score of the context is low (dense_score 0.21"
        in recorder.prompts[0]
    )
    assert any(
        "weak evidence: top dense_score 0.21 is below the chat threshold 0.40" in w
        for w in answer.warnings
    )
    strong = (stage | create_budgeted_stuff_chain(fake_llm(), structured=True)).invoke(
        {"question": "q", "documents": [passage("a", 0, "Text.", dense_score=0.8)]}
    )
    assert strong.weak_evidence is False and not any(
        "weak" in w for w in strong.warnings
    )


@pytest.mark.needs_tiktoken
def test_prompt_without_evidence_note_still_gets_it() -> None:
    recorder = Sent()
    prompt = ChatPromptTemplate.from_messages([("human", "{context}\nQ: {question}")])
    chain = budget(
        500, weak_evidence={"thresholds": {"dense_score": 0.9}}
    ) | create_budgeted_stuff_chain(fake_llm(), prompt)
    chain.invoke(
        {"question": "q", "documents": [passage("a", 0, "x", dense_score=0.1)]},
        {"callbacks": [recorder]},
    )
    assert recorder.prompts[0].startswith(
        "Note: the highest relevance score of the context is low"
    )


def test_prompt_must_take_context_and_question() -> None:
    with pytest.raises(ValueError, match=r"\['context'\]"):
        create_budgeted_stuff_chain(
            fake_llm(), ChatPromptTemplate.from_messages([("human", "{question}")])
        )


@pytest.mark.needs_tiktoken
def test_structured_answer_carries_everything() -> None:
    docs = CandidateList(
        [
            passage("a", 0, "one", dense_score=0.9),
            passage("a", 1, "two", dense_score=0.8),
            passage("b", 0, "word " * 300),
        ],
        skipped=[StageSkip(Stage.RERANK, "model missing")],
    )
    answer = (
        budget(60) | create_budgeted_stuff_chain(fake_llm(), structured=True)
    ).invoke({"question": "q", "documents": docs})
    assert answer.citations == [
        {"number": 1, "document": "a", "source": "a.md", "passages": ["a::0", "a::1"]}
    ]
    assert [k["id"] for k in answer.kept] == ["a::0", "a::1"] and answer.kept[0][
        "dense_score"
    ] == 0.9
    assert [(d["id"], d["reason"]) for d in answer.dropped] == [
        ("b::0", "over_max_tokens")
    ]
    assert answer.skipped_stages == [{"stage": "rerank", "reason": "model missing"}]
    assert "[warning: rerank stage skipped: model missing]" in answer.warnings
    assert answer.tokens_used <= answer.max_tokens == 60
    assert answer.model_dump_json()


def test_empty_context_says_so() -> None:
    recorder = Sent()
    out = (
        budget(100) | create_budgeted_stuff_chain(fake_llm("I cannot answer."))
    ).invoke({"question": "q", "documents": []}, {"callbacks": [recorder]})
    assert "No documents were found." in recorder.prompts[0]
    assert "[warning: weak evidence: no passage reached the context]" in out


def test_chain_without_budget_context_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="ContextBudget before it"):
        create_budgeted_stuff_chain(fake_llm()).invoke(
            {"question": "q", "context": "text"}
        )


@pytest.mark.needs_tiktoken
async def test_stream_yields_tokens_then_the_warnings() -> None:
    docs = [passage("a", 0, "kept", dense_score=0.9), passage("b", 0, "word " * 400)]
    llm = fake_llm("Five minutes [1].", finish_reason="length")
    chain = budget(60) | create_budgeted_stuff_chain(llm)
    chunks = list(chain.stream({"question": "q", "documents": docs}))
    assert chunks[:3] == ["Five", " minutes", " [1]."]
    assert chunks[-1].startswith("\n[warning: answer truncated")
    assert (
        "\n[warning: chat context: 1 lower-ranked left out (1 over_max_tokens)]"
        in (chunks[-1])
    )
    chain = budget(60) | create_budgeted_stuff_chain(fake_llm("Five minutes [1]."))
    achunks = [c async for c in chain.astream({"question": "q", "documents": docs})]
    text = "".join(achunks)
    assert text.startswith("Five minutes [1].\n[warning: chat context: 1 lower-ranked")


@pytest.mark.needs_tiktoken
async def test_structured_chain_streams_tokens_then_the_answer() -> None:
    docs = [passage("a", 0, "kept", dense_score=0.9), passage("b", 0, "word " * 400)]
    state = {"question": "q", "documents": docs}
    chain = budget(60) | create_budgeted_stuff_chain(
        fake_llm("Five minutes [1].", finish_reason="length"), structured=True
    )
    streamed: list[Any] = list(chain.stream(state))  # str tokens, then the answer
    *tokens, answer = streamed
    assert tokens[:3] == ["Five", " minutes", " [1]."]  # as the model wrote them
    assert "".join(tokens) == "Five minutes [1]."
    assert isinstance(answer, BudgetedAnswer)
    assert answer.answer == "Five minutes [1]." and answer.truncated
    assert (
        answer.warnings[0] == "[warning: answer truncated at the model's output limit]"
    )
    assert [d["id"] for d in answer.dropped] == ["b::0"]
    achain = budget(60) | create_budgeted_stuff_chain(
        fake_llm("Five minutes [1]."), structured=True
    )
    astreamed: list[Any] = [c async for c in achain.astream(state)]
    *atokens, aanswer = astreamed
    assert all(isinstance(t, str) for t in atokens)
    assert "".join(atokens) == aanswer.answer == "Five minutes [1]."
    assert not aanswer.truncated and aanswer.dropped == answer.dropped
    invoked = (
        budget(60) | create_budgeted_stuff_chain(fake_llm("Done."), structured=True)
    ).invoke(state)
    assert isinstance(invoked, BudgetedAnswer) and invoked.answer == "Done."
