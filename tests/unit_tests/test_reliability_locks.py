"""RELIABILITY.md's "One writer, readers isolated" table names tests that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    ROOT / "tests/integration_tests/test_index_locks.py",
    ROOT / "tests/unit_tests/test_dense.py",
    ROOT / "tests/integration_tests/test_index_disk.py",
    ROOT / "tests/unit_tests/test_index_disk_full.py",
    ROOT / "tests/integration_tests/test_chunked_cache.py",
    ROOT / "tests/integration_tests/test_ask_during_index.py",
]
NAMED_IN_FULL = (0, 2, 4, 5)  # files whose every test the table names


def test_every_case_of_the_locks_catalogue_names_an_existing_test() -> None:
    text = (ROOT / "RELIABILITY.md").read_text(encoding="utf-8")
    section = re.split(
        r"\n##+ ", text.split("### One writer, readers isolated", 1)[1], maxsplit=1
    )[0]
    named = re.findall(r"^\|[^|]+\|[^|]+\| `(test_\w+)` \|$", section, re.MULTILINE)
    defined = set()
    for path in FILES:
        defined |= set(
            re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M)
        )
    assert len(named) >= 5
    assert sorted(set(named) - defined) == []
    for position in NAMED_IN_FULL:
        tests = set(re.findall(r"^def (test_\w+)", FILES[position].read_text(), re.M))
        assert tests <= set(named), f"a test of {FILES[position].name} is not named"
