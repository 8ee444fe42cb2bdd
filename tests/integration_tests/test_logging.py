"""Loading FlashRank leaves the root logger alone, seen from a fresh process
(pytest installs root handlers of its own, which would hide the problem)."""

import subprocess
import sys
from pathlib import Path


def test_loading_flashrank_leaves_the_root_logger_alone(
    tiny_flashrank_dir: Path,
) -> None:
    # pytest installs root handlers, which would hide the problem: use a fresh process.
    code = (
        "import logging; from langchain_ragbudget.retrieval import FlashRankRerank; "
        f"s = FlashRankRerank(cache_dir={str(tiny_flashrank_dir)!r}); "
        "assert s.available; "
        "root = logging.getLogger(); print(len(root.handlers), root.level)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["0", str(30)]  # no handler added, level still WARNING
