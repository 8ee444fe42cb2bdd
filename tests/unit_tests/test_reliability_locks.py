"""RELIABILITY.md's "One writer, readers isolated" table names tests that exist."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FILES = [
    ROOT / "tests/integration_tests/test_index_locks.py",
    ROOT / "tests/unit_tests/test_dense.py",
]


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
    locks = set(re.findall(r"^def (test_\w+)", FILES[0].read_text(), re.MULTILINE))
    assert locks <= set(named), "a lock test is missing from RELIABILITY.md"
