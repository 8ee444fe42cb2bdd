"""The on-disk hybrid index: files to chunks, BM25 and Chroma kept together, repair.

A wing: the runtime stages never import it.
"""

from langchain_ragbudget.index._chunking import Chunker
from langchain_ragbudget.index._hybrid_index import HybridIndex
from langchain_ragbudget.index._loaders import (
    FileError,
    FileText,
    Scan,
    Skipped,
    load_file,
    read_file,
    scan,
)
from langchain_ragbudget.index._reports import (
    IndexInspection,
    IngestSummary,
    RepairReport,
    SyncReport,
)

__all__ = [
    "Chunker",
    "FileError",
    "FileText",
    "HybridIndex",
    "IndexInspection",
    "IngestSummary",
    "RepairReport",
    "Scan",
    "Skipped",
    "SyncReport",
    "load_file",
    "read_file",
    "scan",
]
