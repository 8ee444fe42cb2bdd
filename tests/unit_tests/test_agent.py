"""The budget middleware and the retrieval tool inside `langchain.agents.create_agent`.

Real parts throughout (BM25 over the sample corpus, the context budget, tiktoken,
LangGraph's InMemorySaver); the chat model is `ScriptedModel`, a fake standing in
for an LLM API: it keeps every request it receives, exactly as the agent sends
it, and calls the retrieval tool once per question before it answers.
"""

import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from langchain_ragbudget import (
    AgentBudgetMiddleware,
    BM25Retriever,
    ContextBudget,
    InvalidInputError,
    create_retrieval_tool,
    load_config,
)
from langchain_ragbudget.agents._fit import tool_tokens
from langchain_ragbudget.budget._history import prompt_tokens
from langchain_ragbudget.errors import MissingExtraError
from langchain_ragbudget.sample import demo_config_path, load_sample_corpus

pytestmark = pytest.mark.needs_tiktoken

SYSTEM = "Answer from the documents the search tool returns. Cite them as [n]."
QUESTIONS = [
    "How long does a refund take?",
    "What is the data retention policy for customer records?",
    "How do I reset my password?",
]


class ScriptedModel(BaseChatModel):
    """A fake for an LLM API: keeps each request; one tool call per question.

    Its answers are long (`answer_words`), so a conversation outgrows a budget.
    """

    requests: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)
    answer_words: int = 120

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        self.tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        last = messages[-1]
        n = len(self.requests)
        if isinstance(last, HumanMessage):
            call = {"name": "search_documents", "args": {"query": last.text}}
            reply = AIMessage("", tool_calls=[{**call, "id": f"call-{n}"}])
        else:
            reply = AIMessage(f"Answer {n}: " + "according to [1] " * self.answer_words)
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(load_sample_corpus(), k=6)


def budget_of(**overrides: Any) -> ContextBudget:
    config = load_config(demo_config_path())
    return ContextBudget.from_config(config, surface="chat", **overrides)


def agent_of(
    retriever: BM25Retriever, budget: ContextBudget, model: ScriptedModel, **kw: Any
) -> Any:
    return create_agent(
        model,
        tools=[create_retrieval_tool(retriever, budget)],
        system_prompt=SYSTEM,
        middleware=[AgentBudgetMiddleware(budget)],
        **kw,
    )


def requests_in(state: dict[str, Any], model: ScriptedModel) -> list[tuple[Any, ...]]:
    """Per model call: what the agent held, what the model got, the report."""
    calls = []
    answers = [
        i
        for i, m in enumerate(state["messages"])
        if isinstance(m, AIMessage) and "ragbudget" in m.response_metadata
    ]
    assert len(answers) == len(model.requests)
    for index, received in zip(answers, model.requests, strict=True):
        report = state["messages"][index].response_metadata["ragbudget"]
        calls.append((state["messages"][:index], received, report))
    return calls


def check_request(
    held: list[BaseMessage], received: list[BaseMessage], report: dict[str, Any]
) -> None:
    """What the model got is what the report says, within the limit, nothing silent."""
    encoding = report["encoding"]
    assert isinstance(received[0], SystemMessage)
    assert prompt_tokens(received, encoding) == report["message_tokens"]
    limit = report["max_prompt_tokens"] - report["reserve_output_tokens"]
    assert report["prompt_tokens"] <= limit or report["over_budget"]
    if report["over_budget"]:  # only what is never dropped is left
        question = [m for m in held if isinstance(m, HumanMessage)][-1]
        assert received[1].id == question.id
        callers = [m for m in received if isinstance(m, AIMessage) and m.tool_calls]
        assert len(callers) <= 1
    dropped = {r["id"] for r in report["dropped"]}
    sent = {m.id: m for m in received[1:]}
    for message in held:
        assert (message.id in sent) != (message.id in dropped), message
    assert not isinstance(received[1], ToolMessage)  # never an orphan first
    calls: set[str | None] = set()
    for message in received[1:]:
        if isinstance(message, AIMessage):
            calls |= {c["id"] for c in message.tool_calls}
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in calls
    for message in held:
        if isinstance(message, ToolMessage) and message.id in sent:
            got = sent[message.id]
            assert isinstance(got, ToolMessage)
            if got.content == message.content:
                continue
            before = {p["id"] for p in message.artifact["passages"]}
            after = {p["id"] for p in got.artifact["passages"]}
            shortened = {r["id"] for r in report["trimmed"]}
            assert before == after | (before & dropped)
            assert after < before or after & shortened


def test_three_turns_fit_every_request_and_keep_the_records(
    retriever: BM25Retriever,
) -> None:
    budget = budget_of(max_prompt_tokens=1400, reserve_output_tokens=200)
    model = ScriptedModel()
    agent = agent_of(retriever, budget, model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "support"}}
    for question in QUESTIONS:
        state = agent.invoke({"messages": [HumanMessage(question)]}, config)

    assert len(model.requests) == 6  # a tool call and an answer per question
    for held, received, report in requests_in(state, model):
        check_request(held, received, report)
        assert report["tool_tokens"] == tool_tokens(model.tools, report["encoding"])
    final = state["messages"][-1]
    report = final.response_metadata["ragbudget"]
    turns = [r for r in report["dropped"] if r["stage"] == "history"]
    assert {r["id"] for r in turns} >= {state["messages"][0].id}  # the oldest
    assert any(r["detail"].startswith("turn 3 (tool)") for r in turns)
    assert any("earlier message(s) left out" in w for w in report["warnings"])
    assert "[warning" not in final.text  # shown beside the answer, not in it
    records = state["ragbudget_drops"]
    identities = [(r["id"], r["stage"], r["reason"]) for r in records]
    assert len(set(identities)) == len(identities)  # each drop once, every turn
    assert {(r["id"], r["stage"]) for r in turns} <= {
        (r["id"], r["stage"]) for r in records
    }
    later = agent_of(retriever, budget, ScriptedModel(), checkpointer=InMemorySaver())
    assert "ragbudget_drops" not in later.get_state(config).values  # per saver
    assert agent.get_state(config).values["ragbudget_drops"] == records


def test_the_newest_result_loses_its_lowest_ranked_passages_first(
    retriever: BM25Retriever,
) -> None:
    budget = budget_of(
        max_prompt_tokens=1200, reserve_output_tokens=100, max_tokens=1500, max_docs=4
    )
    model = ScriptedModel()
    state = agent_of(retriever, budget, model).invoke(
        {"messages": [HumanMessage(QUESTIONS[1])]}
    )

    held, received, report = requests_in(state, model)[-1]
    check_request(held, received, report)
    result = held[-1]
    assert isinstance(result, ToolMessage)
    got = received[-1]
    assert isinstance(got, ToolMessage)
    assert got.id == result.id and len(got.text) < len(result.text)
    ranked = [p["id"] for p in result.artifact["passages"]]
    kept = [p["id"] for p in got.artifact["passages"]]
    assert 0 < len(kept) < len(ranked)
    assert kept == ranked[: len(kept)]  # a rank prefix: the lowest went first
    passages = [r for r in report["dropped"] if r["stage"] == "budget"]
    assert [r["id"] for r in passages] == ranked[len(kept) :]
    assert all(r["detail"].startswith("left out of tool result") for r in passages)
    assert any("lowest-ranked passage(s)" in w for w in report["warnings"])


async def test_an_async_agent_gets_the_same_fit_as_a_sync_one(
    retriever: BM25Retriever,
) -> None:
    budget = budget_of(
        max_prompt_tokens=1200, reserve_output_tokens=100, max_tokens=1500, max_docs=4
    )
    sync_model, async_model = ScriptedModel(), ScriptedModel()
    asked = {"messages": [HumanMessage(QUESTIONS[1])]}
    agent_of(retriever, budget, sync_model).invoke(asked)
    state = await agent_of(retriever, budget, async_model).ainvoke(asked)

    for held, received, report in requests_in(state, async_model):
        check_request(held, received, report)
    texts = [[m.text for m in request] for request in async_model.requests]
    assert texts == [[m.text for m in request] for request in sync_model.requests]
    assert any(r["stage"] == "budget" for r in report["dropped"])


def test_a_request_that_cannot_fit_says_what_takes_the_room(
    retriever: BM25Retriever,
) -> None:
    budget = budget_of(max_prompt_tokens=120, reserve_output_tokens=20)
    model = ScriptedModel()
    state = agent_of(retriever, budget, model).invoke(
        {"messages": [HumanMessage("refund " * 150)]}
    )

    report = state["messages"][-1].response_metadata["ragbudget"]
    assert report["prompt_tokens"] > 100
    assert "the system prompt" in report["over_budget"]
    assert any(
        f"over its budget ({report['prompt_tokens']} > 100 tokens)" in w
        for w in report["warnings"]
    )


def test_a_run_on_another_surface_is_budgeted_on_that_surface(
    retriever: BM25Retriever,
) -> None:
    config = load_config(demo_config_path())  # overrides stay on their surface:
    for name in ("chat", "search"):
        config.surfaces[name] = config.surfaces[name].model_copy(
            update={"max_prompt_tokens": 3000}
        )
    budget = ContextBudget.from_config(config, surface="chat")
    model = ScriptedModel()
    state = agent_of(retriever, budget, model).invoke(
        {"messages": [HumanMessage(QUESTIONS[1])]},
        {"configurable": {"surface": "search"}},
    )

    result = state["messages"][-2]
    assert isinstance(result, ToolMessage)
    assert result.artifact["surface"] == "search"
    assert (
        result.artifact["report"]["max_docs"] == budget.settings_of("search").max_docs
    )
    assert state["messages"][-1].response_metadata["ragbudget"]["surface"] == "search"


def test_bad_arguments_are_refused_by_name(retriever: BM25Retriever) -> None:
    with pytest.raises(InvalidInputError, match="has no max_prompt_tokens"):
        AgentBudgetMiddleware(budget_of())
    with pytest.raises(InvalidInputError, match="budget must be a ContextBudget"):
        AgentBudgetMiddleware("chat")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="retriever must be"):
        create_retrieval_tool(load_sample_corpus(), budget_of())  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="budget must be a ContextBudget"):
        create_retrieval_tool(retriever, None)  # type: ignore[arg-type]


def test_the_tool_returns_the_budgeted_context_and_its_report(
    retriever: BM25Retriever,
) -> None:
    budget = budget_of()
    tool = create_retrieval_tool(retriever, budget)
    call = {"name": tool.name, "args": {"query": QUESTIONS[0]}, "id": "c1"}
    message = tool.invoke({**call, "type": "tool_call"})

    assert isinstance(message, ToolMessage)
    context = budget.fit(retriever.invoke(QUESTIONS[0]), question=QUESTIONS[0])
    assert message.text.endswith(context.text)
    assert message.artifact["report"]["kept_ids"] == context.report.kept_ids
    assert [p["id"] for p in message.artifact["passages"]] == context.report.kept_ids
    dropped = {r["id"] for r in message.artifact["report"]["dropped"]}
    assert dropped | set(context.report.kept_ids) == {
        d.id for d in retriever.invoke(QUESTIONS[0])
    }


def test_importing_the_package_does_not_import_langchain() -> None:
    code = "import sys, langchain_ragbudget; print('langchain' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_without_the_agents_extra_the_error_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import langchain_ragbudget

    monkeypatch.setitem(sys.modules, "langchain.agents", None)
    monkeypatch.delitem(sys.modules, "langchain_ragbudget.agents", raising=False)
    monkeypatch.delitem(
        langchain_ragbudget.__dict__, "AgentBudgetMiddleware", raising=False
    )
    with pytest.raises(MissingExtraError, match=r"\[agents\]"):
        langchain_ragbudget.AgentBudgetMiddleware  # noqa: B018


# Histories in every format `add_messages` accepts: message objects (text or
# content parts), ("role", text) tuples and OpenAI-style dicts, with tool calls.
WORDS = st.text(
    alphabet=st.sampled_from("refund policy data password é 数 \n{}\"'"), max_size=400
)


@st.composite
def turns(draw: st.DrawFn, number: int) -> list[Any]:
    """A user turn, maybe a tool exchange, an answer; in a random format each."""
    messages: list[Any] = []
    fmt = draw(st.sampled_from(["object", "parts", "tuple", "dict"]))
    text = draw(WORDS)
    messages.append(
        {
            "object": HumanMessage(text),
            "parts": HumanMessage([{"type": "text", "text": text}]),
            "tuple": ("human", text),
            "dict": {"role": "user", "content": text},
        }[fmt]
    )
    if draw(st.booleans()):
        calls = [
            {"name": "lookup", "args": {"q": draw(WORDS)}, "id": f"h{number}-{i}"}
            for i in range(draw(st.integers(1, 2)))
        ]
        messages.append(AIMessage("", tool_calls=calls))
        messages += [
            ToolMessage(draw(WORDS), tool_call_id=c["id"])
            if fmt != "dict"
            else {"role": "tool", "content": draw(WORDS), "tool_call_id": c["id"]}
            for c in calls
        ]
    answer = draw(WORDS)
    messages.append(
        ("ai", answer) if fmt == "tuple" else AIMessage(answer, name=fmt or None)
    )
    return messages


@st.composite
def conversations(draw: st.DrawFn) -> list[Any]:
    history = [m for n in range(draw(st.integers(0, 6))) for m in draw(turns(n))]
    return [*history, HumanMessage(draw(st.sampled_from(QUESTIONS)))]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    messages=conversations(),
    limit=st.integers(60, 3000),
    reserve=st.integers(0, 300),
    max_docs=st.integers(1, 6),
    packing=st.sampled_from(["skip", "trim"]),
)
def test_every_request_is_counted_as_sent_and_nothing_goes_silently(
    retriever: BM25Retriever,
    messages: list[Any],
    limit: int,
    reserve: int,
    max_docs: int,
    packing: str,
) -> None:
    budget = budget_of(
        max_prompt_tokens=limit + reserve,
        reserve_output_tokens=reserve,
        max_docs=max_docs,
        packing=packing,
    )
    model = ScriptedModel(answer_words=5)
    state = agent_of(retriever, budget, model).invoke({"messages": messages})

    assert len(model.requests) == 2
    for held, received, report in requests_in(state, model):
        check_request(held, received, report)
        assert report["tool_tokens"] == tool_tokens(model.tools, report["encoding"])
