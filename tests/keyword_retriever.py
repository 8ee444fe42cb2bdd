"""A small sparse retriever outside the package, chosen in YAML by class path.

It ranks passages by how many distinct query words they contain: real retrieval,
not a fixed list, so a test can see the class path reach fusion and the budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

_WORDS = re.compile(r"\w{3,}")


class KeywordRetriever(BaseRetriever):
    """Passages sharing the most distinct words with the query, best first."""

    documents: list[Document]
    k: int = 4
    made_with: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_documents(
        cls, documents: Iterable[Document], **kwargs: Any
    ) -> KeywordRetriever:
        return cls(documents=list(documents), made_with=dict(kwargs), **kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        words = set(_WORDS.findall(query.lower()))
        scored = [
            (len(words & set(_WORDS.findall(doc.page_content.lower()))), i)
            for i, doc in enumerate(self.documents)
        ]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))
        return [self.documents[i] for _, i in ranked[: self.k]]
