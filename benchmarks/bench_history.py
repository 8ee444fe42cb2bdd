"""What chat history costs in evidence: SciFact at the chat surface's defaults.

Every SciFact test question is asked after a synthetic 10-turn conversation (ten
questions of other SciFact claims, each answered by the first two sentences of
another abstract: about 900 tokens of history). The chat surface keeps its defaults
(`max_docs` 4, `max_tokens` 1,280, `trim`) and budgets the whole prompt:
`max_prompt_tokens` (default 2,048) with `reserve_output_tokens` 256, the shipped
system prompt with a `history` placeholder. For each question the same retrieved
list (the default hybrid, k=10) goes through:

* no history: the context alone, what the chat surface keeps without a conversation;
* whole-prompt budget, `history_share` 0.25 and 0.5 (the default): history takes at
  most its share of the room the fixed parts leave, the context the rest;
* history trimmed first (`history_share` 1.0): the history keeps every turn that
  fits, newest first, and the context gets what is left, the order a chatbot gets
  when it trims history to the window and then stuffs documents.

Printed per policy: gold documents in the prompt (of those judged relevant), how
many history turns were kept, and the context's and the whole prompt's tokens.

Then the agent path (`_agent_path.py`): the same questions and retrieved lists
after a 10-turn agent conversation with tool calls, the final model request as
the chat model receives it under the whole-request budget middleware, LangChain's
`trim_messages` + stuff chain, and its `ContextEditingMiddleware`.

    python benchmarks/bench_history.py [--max-prompt-tokens 2048] [--limit 300]
"""

from __future__ import annotations

import random
import statistics

from _agent_path import AgentPath, agent_history
from _common import cached_store, console, parser_with_data, print_machine
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from rich.table import Table

from langchain_ragbudget import ContextBudget, HybridRetriever, load_config
from langchain_ragbudget.chain._stuff import DEFAULT_PROMPT
from langchain_ragbudget.evaluation import judged_id, load_beir
from langchain_ragbudget.progress import ProgressBars

TURNS = 10
RESERVE = 256
POLICIES = {  # name -> history_share (None: no history at all)
    "no history": None,
    "whole prompt, history_share 0.25": 0.25,
    "whole prompt, history_share 0.5 (default)": 0.5,
    "history trimmed first (share 1.0)": 1.0,
}
PROMPT = DEFAULT_PROMPT  # the history goes between the system text and the question


def conversation(
    rng: random.Random, claims: list[str], abstracts: list[Document]
) -> list[BaseMessage]:
    """Ten turns: a SciFact claim asked, two sentences of an abstract answered."""
    messages: list[BaseMessage] = []
    for claim, abstract in zip(
        rng.sample(claims, TURNS), rng.sample(abstracts, TURNS), strict=True
    ):
        answer = ". ".join(abstract.page_content.split(". ")[:2]).strip()
        messages += [HumanMessage(f"Is it true that {claim}"), AIMessage(answer)]
    return messages


def main() -> None:
    parser = parser_with_data(__doc__)
    parser.add_argument("--limit", type=int, default=300, help="first N test queries")
    parser.add_argument("--max-prompt-tokens", type=int, default=2_048)
    args = parser.parse_args()
    out = console(120)
    dataset = load_beir(args.data)
    config = load_config()
    with ProgressBars(transient=True) as progress:
        store = cached_store(dataset, config, progress=progress)
    retriever = HybridRetriever.from_config(
        config, documents=dataset.corpus, vectorstore=store
    )
    budgets = {
        name: ContextBudget.from_config(
            config,
            surface="chat",
            prompt=PROMPT,
            **(
                {}
                if share is None
                else {
                    "max_prompt_tokens": args.max_prompt_tokens,
                    "reserve_output_tokens": RESERVE,
                    "history_share": share,
                }
            ),
        )
        for name, share in POLICIES.items()
    }
    agent = AgentPath(
        ContextBudget.from_config(
            config,
            surface="chat",
            max_prompt_tokens=args.max_prompt_tokens,
            reserve_output_tokens=RESERVE,
        ),
        max_docs=config.surface("chat").max_docs,
    )
    rng, agent_rng = random.Random(0), random.Random(1)
    queries = list(dataset.queries.items())[: args.limit]
    claims = list(dataset.queries.values())
    found = {name: 0 for name in POLICIES}
    turns: dict[str, list[int]] = {name: [] for name in POLICIES}
    context_tokens: dict[str, list[int]] = {name: [] for name in POLICIES}
    prompt_tokens: dict[str, list[int]] = {name: [] for name in POLICIES}
    history_tokens: dict[str, list[int]] = {name: [] for name in POLICIES}
    gold_total = 0
    for query_id, question in queries:
        gold = {doc for doc, grade in dataset.qrels[query_id].items() if grade > 0}
        gold_total += len(gold)
        documents = retriever.invoke(question)
        history = conversation(rng, claims, dataset.corpus)
        past = agent_history(
            agent_rng.sample(claims, TURNS), agent_rng.sample(dataset.corpus, 2 * TURNS)
        )
        agent.ask(question, documents, past, gold)
        for name, budget in budgets.items():
            with_history = None if POLICIES[name] is None else history
            context = budget.fit(documents, question=question, history=with_history)
            kept = {judged_id(d) for d in context.documents}
            found[name] += len(gold & kept)
            turns[name].append(len(context.history) // 2)
            context_tokens[name].append(context.report.tokens_used)
            room = context.report.prompt
            if room is not None:
                prompt_tokens[name].append(room.prompt_tokens)
                history_tokens[name].append(room.history_tokens)
    table = Table(
        title=f"SciFact test, {len(queries)} questions after a {TURNS}-turn history: "
        f"chat surface, max_prompt_tokens {args.max_prompt_tokens}, reserve {RESERVE}"
    )
    for column in (
        "policy",
        "gold in the prompt",
        "history turns kept (mean)",
        "history tokens (mean)",
        "context tokens (mean)",
        "prompt tokens (mean, max)",
    ):
        table.add_column(column, justify="left" if column == "policy" else "right")
    for name in POLICIES:
        prompts = prompt_tokens[name]
        table.add_row(
            name,
            f"{found[name] / gold_total:.1%} ({found[name]} of {gold_total})",
            f"{statistics.mean(turns[name]):.1f} of {TURNS}"
            if POLICIES[name] is not None
            else "-",
            f"{statistics.mean(history_tokens[name]):.0f}" if prompts else "-",
            f"{statistics.mean(context_tokens[name]):.0f}",
            f"{statistics.mean(prompts):.0f}, {max(prompts)}" if prompts else "-",
        )
    out.print(table)
    out.print(agent.table(len(queries), gold_total))
    print_machine(out, load_average=True)


if __name__ == "__main__":
    main()
