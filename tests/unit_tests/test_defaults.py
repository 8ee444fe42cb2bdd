"""The shipped numbers fit each other: every cap is reachable, none warns alone.

Every default is written once (the settings models; `config_default.yml` holds
the surfaces); these check what they do together, on the real budget.
"""

from typing import Any

import pytest

from langchain_ragbudget import ContextBudget, load_config

SURFACES = sorted(load_config().surfaces)


@pytest.mark.parametrize("surface", SURFACES)
def test_every_max_docs_is_reachable_through_rerank_and_fusion(surface: str) -> None:
    config = load_config()
    assert config.surface(surface).max_docs <= config.rerank.top_n
    assert config.rerank.top_n <= config.retrieval.k


def largest_default_chunks(config: Any, encoding: str) -> list[int]:
    """Rendered costs of the sample corpus chunked as `ragbudget index` does,
    each with a citation header of its own (the worst case), largest first."""
    from langchain_ragbudget.budget._render import ContextFormat
    from langchain_ragbudget.config._tokens import count_tokens
    from langchain_ragbudget.index._chunking import Chunker
    from langchain_ragbudget.sample import load_sample_corpus

    chunker, fmt = Chunker(config.index), ContextFormat()
    documents: dict[str, list[Any]] = {}
    for passage in load_sample_corpus():
        documents.setdefault(passage.metadata["source"], []).append(passage)
    costs = []
    for source, passages in documents.items():
        text = "\n\n".join(p.page_content for p in passages)
        whole = passages[0].model_copy(update={"page_content": text, "id": None})
        for chunk in chunker.split(whole, source):
            chunk.metadata["dense_score"] = 0.5  # headers show a score
            header = fmt.render_header(1, chunk)
            costs.append(
                count_tokens(header, encoding)
                + count_tokens(fmt.render_passage(chunk), encoding)
            )
    return sorted(costs, reverse=True)


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("surface", SURFACES)
def test_a_surface_holds_max_docs_default_chunks_whole(surface: str) -> None:
    config = load_config()
    settings = config.surface(surface)
    costs = largest_default_chunks(config, settings.encoding_name)
    assert len(costs) > settings.max_docs  # the sample has chunks enough to tell
    assert sum(costs[: settings.max_docs]) <= settings.max_tokens
    # the allowance the YAML states covers what was measured here
    assert costs[0] <= config.index.chunk_size + 64


@pytest.mark.needs_tiktoken
@pytest.mark.parametrize("surface", SURFACES)
def test_the_default_pipeline_counts_its_cuts_and_names_none(surface: str) -> None:
    from langchain_core.documents import Document

    from langchain_ragbudget.chain._stuff import context_warnings

    config = load_config()
    settings = config.surface(surface)
    # k same-sized full chunks, fused: the budget keeps max_docs, drops the rest
    words = " ".join(["word"] * (config.index.chunk_size - 8))
    docs = [
        Document(
            id=f"c{i}",
            page_content=f"Chunk {i}: {words}.",
            metadata={"fused_rank": i + 1, "source": f"file-{i}.md"},
        )
        for i in range(config.retrieval.k)
    ]
    context = ContextBudget.from_config(config, surface=surface).fit(docs)
    assert len(context.report.kept_ids) == settings.max_docs
    cut = config.retrieval.k - settings.max_docs
    assert [line for line in context_warnings(context) if "context:" in line] == [
        f"[warning: {surface} context: {cut} lower-ranked left out ({cut} "
        "over_max_docs)]"
    ]
