"""Token-aware chunking with LangChain's recursive splitter.

Each chunk carries its source document id, source, position and token count, and a
deterministic id `<doc_id>::<position>`, so an update can replace exactly the chunks
of one document on both sides of the index. A chunk that shows no text (only
whitespace, control or zero-width characters) is never made: `split_counted` says
how many were left out, so the caller can report them.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_text_splitters import RecursiveCharacterTextSplitter

from langchain_ragbudget._tokens import count_tokens, get_encoding
from langchain_ragbudget.config import IndexSettings
from langchain_ragbudget.index._loaders import is_blank


class Chunker:
    """Split source documents into chunks of at most `chunk_size` tokens."""

    def __init__(self, settings: IndexSettings) -> None:
        self.settings = settings
        get_encoding(settings.encoding)  # load (offline-aware, with timeout) first
        encoding = settings.encoding
        self._splitter = RecursiveCharacterTextSplitter(
            chunk_size=settings.chunk_size,
            chunk_overlap=settings.chunk_overlap,
            length_function=lambda text: count_tokens(text, encoding),
        )

    def split(self, document: Document, doc_id: str) -> list[Document]:
        """The chunks of one source document, in order (blank pieces left out)."""
        return self.split_counted(document, doc_id)[0]

    def split_counted(
        self, document: Document, doc_id: str
    ) -> tuple[list[Document], int]:
        """The chunks of one source document, and how many blank pieces were left out.

        Positions (and so chunk ids) count the kept chunks only: 0, 1, 2, ...
        """
        encoding = self.settings.encoding
        pieces = self._splitter.split_text(document.page_content)
        texts = [text for text in pieces if not is_blank(text)]
        chunks = []
        for position, text in enumerate(texts):
            chunk_id = f"{doc_id}::{position}"
            chunks.append(
                Document(
                    id=chunk_id,
                    page_content=text,
                    metadata={
                        **document.metadata,
                        "doc_id": doc_id,
                        "chunk_id": chunk_id,
                        "position": position,
                        "tokens": count_tokens(text, encoding),
                    },
                )
            )
        return chunks, len(pieces) - len(texts)
