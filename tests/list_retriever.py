"""A retriever that returns its list as given: duplicates, collisions, odd scores.

Stands in for a careless retriever, so tests can hand fusion exactly the input
they mean to.
"""

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field


class ListRetriever(BaseRetriever):
    """Returns `documents` for every query, the first `k` when a `k` is given.

    `calls` records the size each call asked for (None: the whole list).
    """

    documents: list[Document]
    k: int | None = None
    calls: list[int | None] = Field(default_factory=list)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
    ) -> list[Document]:
        size = self.k if k is None else k
        self.calls.append(size)
        return self.documents if size is None else self.documents[:size]
