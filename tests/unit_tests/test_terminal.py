# ruff: noqa: E501  (whole rendered lines of an 80-column terminal)
"""What the terminal shows at 80 columns, compared whole: keys, paths and ids are
never broken, a quoted prompt line keeps its `>`; and the small command-line
promises (`--version`, id prefixes, YAML hints that name the fix)."""

from __future__ import annotations

import io
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from langchain_core.documents import Document
from rich.console import Console

from langchain_ragbudget.budget._context_budget import ContextBudget
from langchain_ragbudget.chain._warnings import context_warnings
from langchain_ragbudget.cli import main
from langchain_ragbudget.cli._memory_commands import _table as memory_table
from langchain_ragbudget.cli._views import config_table, ingest_report, quoted_wrap
from langchain_ragbudget.config._settings import (
    ConfigValue,
    EffectiveConfig,
    Origin,
    SurfaceSettings,
    explain_config,
    load_config,
)
from langchain_ragbudget.errors import ConfigError
from langchain_ragbudget.retrieval._rerank import FlashRankRerank


def rendered(*items: Any) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=80, color_system=None)
    for item in items:
        console.print(item)
    return [line.rstrip() for line in out.getvalue().splitlines()]


def test_config_keeps_every_key_whole_at_80_columns() -> None:
    effective = explain_config(None)
    values = [
        ConfigValue("retrieval.k", 10, Origin.BUILT_IN),
        ConfigValue(
            "embedding.model", "sentence-transformers/all-MiniLM-L6-v2", Origin.BUILT_IN
        ),
        ConfigValue("surfaces.search.max_docs", 8, Origin.DEFAULT),
        ConfigValue(
            "surfaces.search.weak_evidence.thresholds.rerank_score", 0.3, Origin.DEFAULT
        ),
        ConfigValue("surfaces.voice.max_tokens", 300, Origin.FILE),
        ConfigValue("surfaces.voice.packing", "trim", Origin.INHERITED),
    ]
    effective = EffectiveConfig(effective.config, "mine.yml", values)
    assert rendered(config_table(effective, values)) == [
        "configuration: mine.yml merged over config_default.yml",
        "",
        " key                                                     value        from",
        " " + "─" * 78,
        " retrieval.k                                             10           built-in",
        ' embedding.model                                         "sentence-   built-in',
        "                                                         transforme",
        "                                                         rs/all-Min",
        '                                                         iLM-L6-v2"',
        " surfaces.search.max_docs                                8            defaults",
        " surfaces.search.weak_evidence.thresholds.rerank_score   0.3          defaults",
        " surfaces.voice.max_tokens                               300          your file",
        ' surfaces.voice.packing                                  "trim"       inherited',
        "",
        "from: your file = mine.yml; defaults = config_default.yml; inherited = its",
        "surfaces.chat; built-in = the package's own default",
    ]


def test_the_index_totals_are_words_not_squeezed_headers() -> None:
    summary = SimpleNamespace(
        added=["a.md", "b.txt"],
        updated=[],
        unchanged=["c.md"],
        restored=[],
        deleted=[],
        errors=[],
        notes=[],
        chunks_added=7,
        chunks_deleted=0,
    )
    index = SimpleNamespace(
        directory="/srv/ragbudget-index", document_ids=["a", "b", "c"], chunk_count=9
    )
    skipped = [("unsupported type", "logo.png", ".png")]
    lines = rendered(*ingest_report(Path("/srv/docs"), index, summary, skipped, 5))
    assert lines == [
        "indexed /srv/docs into /srv/ragbudget-index",
        "",
        "  files    2 added, 0 updated, 1 unchanged, 0 restored, 0 deleted, 0 refused,",
        "           1 skipped",
        "  chunks   7 written, 0 removed; now 3 documents, 9 chunks",
        "",
        "                files under /srv/docs",
        "┏━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━┓",
        "┃ outcome   ┃ reason           ┃ files ┃ names       ┃",
        "┡━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━┩",
        "│ added     │                  │     2 │ a.md, b.txt │",
        "│ unchanged │                  │     1 │ c.md        │",
        "│ skipped   │ unsupported type │     1 │ logo.png    │",
        "└───────────┴──────────────────┴───────┴─────────────┘",
        "skipped (unsupported type): logo.png .png",
    ]


def test_a_wrapped_quoted_line_keeps_its_mark_on_every_part() -> None:
    text = (
        "[1] notes.md\n"
        "> Logs rotate daily at midnight and are kept for seven days before they "
        "are compressed.\n"
        ">\n"
        "Question: how long?"
    )
    assert quoted_wrap(text, 40).splitlines() == [
        "[1] notes.md",
        "> Logs rotate daily at midnight and are",
        "> kept for seven days before they are",
        "> compressed.",
        ">",
        "Question: how long?",
    ]


def test_memory_list_shows_ids_whole_and_the_superseded_at_80_columns() -> None:
    rows = [
        {
            "id": "mem-0a3b86b0b1ea45a8",
            "text": "The user prefers the dark theme in the editor",
            "subject": "editor.theme",
            "said_at": "2026-12-02T14:34:10+00:00",
            "times_said": 1,
            "similarity": None,
            "importance": 0.5,
            "age_days": 0.0,
            "recency": 1.0,
            "score": None,
            "superseded_by": None,
        },
        {
            "id": "mem-0639555f176446fc",
            "text": "The user prefers the light theme in the editor",
            "subject": "editor.theme",
            "said_at": "2026-12-01T09:00:00+00:00",
            "times_said": 3,
            "similarity": 0.61,
            "importance": 0.9,
            "age_days": 1.2,
            "recency": 0.973,
            "score": 0.534,
            "superseded_by": "mem-0a3b86b0b1ea45a8",
        },
    ]
    assert rendered(memory_table(rows, half_life=30)) == [
        "score = similarity x importance x 0.5^(age since said / 30 days)",
        "mem-0a3b86b0b1ea45a8  said 2026-12-02T14:34 (1 time(s))  subject editor.theme",
        "  The user prefers the dark theme in the editor",
        "  similarity — x importance 0.50 x recency 1.000 (age 0.0 days) = score —",
        "mem-0639555f176446fc  said 2026-12-01T09:00 (3 time(s))  subject editor.theme",
        "superseded by mem-0a3b86b0b1ea45a8",
        "  The user prefers the light theme in the editor",
        "  similarity 0.610 x importance 0.90 x recency 0.973 (age 1.2 days) = score",
        "0.534",
    ]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import langchain_ragbudget

    with pytest.raises(SystemExit) as exit:
        main(["--version"])
    assert exit.value.code == 0
    assert capsys.readouterr().out == f"ragbudget {langchain_ragbudget.__version__}\n"


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("surfaces:\n  chat:\n\tmax_docs: 3\n", "tabs are not allowed in YAML"),
        ("rerank:\n  enabled: yes\n", "(use true or false; yes, no, on and off"),
        (
            "surfaces:\n  chat:\n    max_tokens: lots\n",
            "valid integer (write a whole number, e.g. 1000)",
        ),
        (
            'surfaces:\n  chat:\n    max_tokens: "900"\n',
            "(this is a string; write the number without quotes: 900)",
        ),
        (
            "surfaces:\n  chat:\n    history_share: half\n",
            "(write a number, e.g. 0.5)",
        ),
    ],
)
def test_yaml_errors_name_the_fix(tmp_path: Path, text: str, hint: str) -> None:
    path = tmp_path / "mine.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert hint in str(error.value)
    assert "1.0e+3" not in str(error.value)


@pytest.mark.needs_tiktoken
def test_offline_the_rerank_skip_is_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The report carries the skip and its warning line names it; the console
    script prints logged warnings too, so a logged warning would say it twice."""
    with caplog.at_level(logging.WARNING):
        reranker = FlashRankRerank(cache_dir=str(tmp_path), download=False)
    assert not reranker.available
    assert [r.getMessage() for r in caplog.records] == []
    candidates = reranker.compress_documents(
        [Document(id="a", page_content="Logs rotate daily.")], "logs?"
    )
    surface = SurfaceSettings(max_docs=4, max_tokens=500, encoding="cl100k_base")
    context = ContextBudget(settings=surface).fit(candidates)
    lines = [w for w in context_warnings(context) if "rerank" in w]
    assert len(lines) == 1 and lines[0].startswith("[warning: rerank stage skipped: ")
