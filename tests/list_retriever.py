"""A retriever that returns its list as given: duplicates, collisions, odd scores.

Stands in for a careless retriever, so tests can hand fusion exactly the input
they mean to.
"""

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever


class ListRetriever(BaseRetriever):
    """Returns `documents` for every query."""

    documents: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return self.documents
