"""The agent path of bench_history.py: one question's final model request, three ways.

Each question comes after a 10-turn agent conversation (a claim asked, a search
called, its result, an answer); the agent searches the question and answers. What
the chat model receives for that answer is captured (`Capture`, a fake standing in
for an LLM API), counted with tiktoken (`prompt_tokens`, equal to tiktoken's count
of the chat markup, plus the tool schemas as JSON), and checked for gold documents:

* `AgentBudgetMiddleware` with `create_retrieval_tool`: the whole request fitted
  into `max_prompt_tokens - reserve_output_tokens`, on the record;
* LangChain's `trim_messages` (half the window, its approximate counter, `last`,
  starting on a human turn) then a stuff chain (`create_stuff_documents_chain`)
  with the top `max_docs` documents;
* `create_agent` with LangChain's `create_retriever_tool` (top `max_docs`) and
  `ContextEditingMiddleware` (`ClearToolUsesEdit` triggered at the same limit).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.callbacks import (
    CallbackManagerForLLMRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    trim_messages,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langchain_core.tools import create_retriever_tool
from pydantic import Field
from rich.table import Table

from langchain_ragbudget import (
    AgentBudgetMiddleware,
    ContextBudget,
    create_retrieval_tool,
)
from langchain_ragbudget.agents._fit import tool_tokens
from langchain_ragbudget.budget._history import prompt_tokens
from langchain_ragbudget.budget._prompt import SYSTEM_TEXT
from langchain_ragbudget.evaluation import judged_id

TOOL = "search_documents"
ABOUT = "Search the scientific abstracts; returns passages to answer from."
POLICIES = (
    "AgentBudgetMiddleware",
    "trim_messages + stuff chain",
    "ContextEditingMiddleware",
)


class Capture(BaseChatModel):
    """A fake for an LLM API: searches a question once, then answers; keeps requests."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)
    tools: list[Any] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "capture"

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
        if isinstance(last, HumanMessage) and self.tools:
            call = {"name": TOOL, "args": {"query": last.text}, "id": "now"}
            reply = AIMessage("", tool_calls=[call])
        else:
            reply = AIMessage("The abstracts say so [1].")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class Fixed(BaseRetriever):
    """The list retrieved for the question, for every policy alike."""

    documents: list[Document] = Field(default_factory=list)
    k: int | None = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents[: self.k]


def agent_history(
    claims: Sequence[str], abstracts: Sequence[Document]
) -> list[BaseMessage]:
    """Ten agent turns: a claim, a search with a two-abstract result, an answer."""
    messages: list[BaseMessage] = []
    for turn, claim in enumerate(claims):
        pair = abstracts[2 * turn : 2 * turn + 2]
        result = "\n\n".join(". ".join(d.page_content.split(". ")[:3]) for d in pair)
        call = {"name": TOOL, "args": {"query": claim}, "id": f"past-{turn}"}
        answer = ". ".join(pair[0].page_content.split(". ")[:2])
        messages += [
            HumanMessage(f"Is it true that {claim}"),
            AIMessage("", tool_calls=[call]),
            ToolMessage(result, tool_call_id=f"past-{turn}"),
            AIMessage(answer),
        ]
    return messages


@dataclass
class Tally:
    """One policy's numbers over the questions."""

    gold: int = 0
    sent: list[int] = field(default_factory=list)
    reported: list[int] = field(default_factory=list)
    over: int = 0
    recorded: list[int] = field(default_factory=list)
    silent: list[int] = field(default_factory=list)


class AgentPath:
    """The three policies, built once; `ask` runs one question through each."""

    def __init__(self, budget: ContextBudget, max_docs: int) -> None:
        settings = budget.settings
        assert settings.max_prompt_tokens is not None
        self.limit = settings.max_prompt_tokens - settings.reserve_output_tokens
        self.encoding = settings.encoding_name
        self.max_docs = max_docs
        self.retriever = Fixed()
        self.top = Fixed(k=max_docs)
        self.models = [Capture(), Capture(), Capture()]
        self.agent: Any = create_agent(
            self.models[0],
            tools=[create_retrieval_tool(self.retriever, budget, name=TOOL)],
            system_prompt=SYSTEM_TEXT,
            middleware=[AgentBudgetMiddleware(budget)],
        )
        prompt = ChatPromptTemplate.from_messages(
            [
                ("system", SYSTEM_TEXT + "\n\n{context}"),
                MessagesPlaceholder("history"),
                ("human", "{question}"),
            ]
        )
        self.stuff = create_stuff_documents_chain(self.models[1], prompt)
        editing = ContextEditingMiddleware(
            edits=[ClearToolUsesEdit(trigger=self.limit)]
        )
        self.editing: Any = create_agent(
            self.models[2],
            tools=[create_retriever_tool(self.top, TOOL, ABOUT)],
            system_prompt=SYSTEM_TEXT,
            middleware=[editing],
        )
        self.tallies = {name: Tally() for name in POLICIES}

    def ask(
        self,
        question: str,
        documents: list[Document],
        history: list[BaseMessage],
        gold: set[str],
    ) -> None:
        """Run the question through each policy and tally its final request."""
        self.retriever.documents = self.top.documents = documents
        top = {judged_id(d) for d in documents[: self.max_docs]}
        asked = [*history, HumanMessage(question)]
        state = self.agent.invoke({"messages": asked})
        self._budgeted(state, gold)
        trimmed = trim_messages(
            history,
            max_tokens=self.limit // 2,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on="human",
        )
        self.stuff.invoke(
            {
                "context": documents[: self.max_docs],
                "history": trimmed,
                "question": question,
            }
        )
        self._tally(POLICIES[1], gold & top, len(history) - len(trimmed), None)
        self.editing.invoke({"messages": asked})
        request = self.models[2].requests[-1]
        cleared = sum(
            isinstance(m, ToolMessage) and m.text == "[cleared]" for m in request
        )
        newest = request[-1]
        kept = (
            top
            if isinstance(newest, ToolMessage) and newest.text != "[cleared]"
            else set()
        )
        self._tally(POLICIES[2], gold & kept, cleared, None)

    def _budgeted(self, state: dict[str, Any], gold: set[str]) -> None:
        report = state["messages"][-1].response_metadata["ragbudget"]
        result = self.models[0].requests[-1][-1]
        assert isinstance(result, ToolMessage)
        sent = {judged_id(Document(page_content="", **p)) for p in _passages(result)}
        recorded = len(report["dropped"])
        self._tally(POLICIES[0], gold & sent, 0, report["prompt_tokens"], recorded)

    def _tally(
        self,
        name: str,
        gold: set[str],
        silent: int,
        reported: int | None,
        recorded: int = 0,
    ) -> None:
        model = self.models[POLICIES.index(name)]
        request = model.requests[-1]
        sent = prompt_tokens(request, self.encoding) + tool_tokens(
            model.tools, self.encoding
        )
        tally = self.tallies[name]
        tally.gold += len(gold)
        tally.sent.append(sent)
        tally.over += sent > self.limit
        tally.silent.append(silent)
        tally.recorded.append(recorded)
        if reported is not None:
            tally.reported.append(reported)

    def table(self, questions: int, gold_total: int) -> Table:
        """One row per policy."""
        table = Table(
            title=f"Agent path: {questions} questions after a 10-turn agent "
            f"conversation, final request's limit {self.limit} tokens"
        )
        for column in (
            "policy",
            "gold in the prompt",
            "sent (mean, max)",
            "reported = sent",
            "over limit",
            "left out: recorded / silent",
        ):
            table.add_column(column, justify="left" if column == "policy" else "right")
        for name, t in self.tallies.items():
            same = sum(r == s for r, s in zip(t.reported, t.sent, strict=False))
            table.add_row(
                name,
                f"{t.gold / gold_total:.1%} ({t.gold} of {gold_total})",
                f"{statistics.mean(t.sent):.0f}, {max(t.sent)}",
                f"{same} of {len(t.sent)}" if t.reported else "nothing reported",
                f"{t.over} of {len(t.sent)}",
                f"{statistics.mean(t.recorded):.1f} / {statistics.mean(t.silent):.1f}",
            )
        return table


def _passages(message: ToolMessage) -> list[dict[str, Any]]:
    """The passages a retrieval result sent, as Document fields."""
    artifact = message.artifact
    assert isinstance(artifact, dict)
    return [{"id": p["id"], "metadata": p["metadata"]} for p in artifact["passages"]]
