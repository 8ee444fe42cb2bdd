"""Every setting applied or refused, and YAML that means what it looks like.

Keyword overrides to `from_config` are applied (a surface setting replaces the
surface's value) or refused with a `TypeError` naming the key and the choices;
components refuse keywords they have no field for. The keyword catalogue below is
listed in RELIABILITY.md ("Catalogue: keyword overrides") and checked against it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from list_retriever import ListRetriever
from pydantic import ValidationError

from langchain_ragbudget import ContextBudget, FlashRankRerank, HybridRetriever
from langchain_ragbudget.config import _yaml as yaml_reader
from langchain_ragbudget.config._settings import RagBudgetConfig, load_config
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.retrieval._fusion import fuse, weighted_rrf

RELIABILITY = Path(__file__).resolve().parents[2] / "RELIABILITY.md"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ragbudget.yml"
    path.write_text(text, encoding="utf-8")
    return path


def hybrid(**fields: Any) -> HybridRetriever:
    docs = [Document(page_content="a", id="a"), Document(page_content="b", id="b")]
    return HybridRetriever(
        retrievers=[ListRetriever(documents=docs), ListRetriever(documents=docs[::-1])],
        **fields,
    )


@dataclass(frozen=True)
class Case:
    """One bad keyword or keyword value: what is called, what must be raised."""

    id: str
    run: Callable[[], Any]
    raises: type[Exception]
    match: str


def _settings() -> Any:
    return load_config().surface("chat")


KEYWORD_CASES = [
    Case("budget-override-typo", lambda: ContextBudget.from_config(max_tokenz=100),
         TypeError, "'max_tokenz'; did you mean 'max_tokens'"),
    Case("budget-override-settings",
         lambda: ContextBudget.from_config(settings=_settings()),
         TypeError, "unexpected keyword argument 'settings'"),
    Case("budget-override-zero", lambda: ContextBudget.from_config(max_tokens=0),
         ValidationError, "greater than or equal to 1"),
    Case("budget-override-packing", lambda: ContextBudget.from_config(packing="cut"),
         ValidationError, "'skip' or 'trim'"),
    Case("budget-unknown-keyword",
         lambda: ContextBudget(settings=_settings(), max_tokens=5),
         TypeError,
         "valid: format, id_key, models, name, overrides, prompt, settings, "
         "surface, surfaces"),
    Case("rerank-override-typo",
         lambda: FlashRankRerank.from_config(top_nn=3, download=False),
         TypeError, "'top_nn'; did you mean 'top_n'"),
    Case("rerank-override-enabled",
         lambda: FlashRankRerank.from_config(enabled=False),
         TypeError, "unexpected keyword argument 'enabled'"),
    Case("rerank-unknown-keyword", lambda: FlashRankRerank(top_nn=3, download=False),
         TypeError, "did you mean 'top_n'"),
    Case("hybrid-c-keyword", lambda: hybrid(c=math.inf),
         TypeError, r"unexpected keyword argument 'c' \(valid: .*rrf_c"),
    Case("hybrid-rrf-c-zero", lambda: hybrid(rrf_c=0.0),
         ValidationError, "greater than 0"),
    Case("fuse-c-inf",
         lambda: fuse("minmax", [["a"]], [1.0], scores=[[1.0]], c=math.inf),
         ValueError, "finite number > 0"),
    Case("rrf-c-bool", lambda: weighted_rrf([["a"]], [1.0], c=True),
         ValueError, "finite number > 0"),
]  # fmt: skip


@pytest.mark.parametrize("case", KEYWORD_CASES, ids=[c.id for c in KEYWORD_CASES])
def test_bad_keyword(case: Case) -> None:
    with pytest.raises(case.raises, match=case.match):
        case.run()


def test_keyword_catalogue_is_listed_in_reliability_md() -> None:
    text = RELIABILITY.read_text(encoding="utf-8")
    table = re.split(
        r"\n##+ ", text.split("### Catalogue: keyword overrides", 1)[1], maxsplit=1
    )[0]
    ids = [case.id for case in KEYWORD_CASES]
    assert len(ids) == len(set(ids))
    assert [i for i in ids if f"| `{i}` |" not in table] == []


# --- overrides are applied


@pytest.mark.needs_tiktoken
def test_budget_overrides_replace_the_surface_settings() -> None:
    configured = load_config().surface("chat")
    budget = ContextBudget.from_config(
        surface="chat", max_tokens=100, max_docs=2, packing="skip", id_key="doc"
    )
    assert budget.settings.max_tokens == 100 != configured.max_tokens
    assert (budget.settings.max_docs, budget.settings.packing) == (2, "skip")
    assert budget.id_key == "doc"
    assert budget.settings.weak_evidence == configured.weak_evidence  # the rest kept
    words = " ".join(["word"] * 60)
    docs = [Document(page_content=words, id=str(i)) for i in range(4)]
    report = budget.fit(docs).report
    assert report.max_tokens == 100 and report.tokens_used <= 100


@pytest.mark.needs_tiktoken
def test_no_override_keeps_the_configured_surface() -> None:
    budget = ContextBudget.from_config(surface="search")
    assert budget.settings == load_config().surface("search")
    assert budget.id_key == load_config().retrieval.id_key


def test_rerank_overrides_are_applied(tmp_path: Path) -> None:
    rerank = FlashRankRerank.from_config(
        top_n=3, score_floor=0.25, download=False, cache_dir=str(tmp_path)
    )
    assert rerank is not None
    assert (rerank.top_n, rerank.score_floor, rerank.cache_dir) == (
        3,
        0.25,
        str(tmp_path),
    )


def test_programmatic_surface_names_are_checked() -> None:
    settings = load_config().surface("chat")
    with pytest.raises(ValidationError, match="must not start or end with blanks"):
        RagBudgetConfig(surfaces={"chat ": settings})


# --- YAML 1.2 core schema


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("017", 17),  # YAML 1.1: octal 15
        ("0o17", 15),
        ("0x1F", 31),
        ("-12", -12),
        ("+7", 7),
        ("1e3", 1000.0),  # YAML 1.1 (PyYAML): the string '1e3'
        ("1.5", 1.5),
        (".5", 0.5),
        ("-.inf", -math.inf),
        ("True", True),
        ("FALSE", False),
        ("Null", None),
        ("", None),
        ("1:30", "1:30"),  # YAML 1.1: 90
        ("1_000", "1_000"),
        ("0b101", "0b101"),
        ("+0x1F", "+0x1F"),
        ("yes", "yes"),
        ("off", "off"),
        ("2024-05-13", "2024-05-13"),  # YAML 1.1: a date
        ("=", "="),
        ("0o8", "0o8"),
    ],
)
def test_yaml_1_2_core_schema(text: str, value: Any) -> None:
    read = yaml_reader.read_yaml(f"v: {text}\n", "t.yml")["v"]
    assert read == value and type(read) is type(value)


def test_quoted_values_stay_strings() -> None:
    read = yaml_reader.read_yaml("a: '17'\nb: \"true\"\nc: 'null'\n", "t.yml")
    assert read == {"a": "17", "b": "true", "c": "null"}


def test_a_base_60_looking_budget_is_refused_as_not_a_number(tmp_path: Path) -> None:
    path = write(tmp_path, "surfaces:\n  chat:\n    max_tokens: 1:30\n")
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert caught.value.key == "surfaces.chat.max_tokens"
    assert caught.value.value == "1:30"
    assert "valid integer" in str(caught.value)


def test_merge_keys_still_share_a_surface(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "surfaces:\n  chat: &base {max_docs: 3, max_tokens: 700}\n"
        "  voice:\n    <<: *base\n    max_docs: 2\n",
    )
    voice = load_config(path).surface("voice")
    assert (voice.max_docs, voice.max_tokens) == (2, 700)


def test_keys_are_checked_with_and_without_aliases() -> None:
    for text in ("a:\n  b: 1\n  b: 2\n", "x: &x [1]\na:\n  b: *x\n  b: 2\n"):
        with pytest.raises(ConfigError, match="duplicate key") as caught:
            yaml_reader.read_yaml(text, "t.yml")
        assert caught.value.key == "a.b"


# --- the reader runs once


def test_the_file_is_parsed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    real = yaml_reader._ConfigLoader.__init__

    def counting(self: Any, text: str, file: str) -> None:
        parsed.append(file)
        real(self, text, file)

    monkeypatch.setattr(yaml_reader._ConfigLoader, "__init__", counting)
    path = write(tmp_path, "retrieval:\n  k: 7\n")
    load_config()  # the shipped defaults, parsed at most once per process
    parsed.clear()
    for _ in range(3):
        assert load_config(path).retrieval.k == 7
    assert parsed == [str(path)] * 3
