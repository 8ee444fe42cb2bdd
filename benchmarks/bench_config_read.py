"""How long `load_config` takes on files near the 1 MiB cap.

A boosted-tree weak-evidence model is the largest thing a configuration holds.
This times `load_config` on: the model `ragbudget eval` fitted on SciFact (300
trees of depth 3), alone and shared through an alias by five surfaces; a tree
model just under the YAML node bound (refused only for its number of trees); one
of about 800 KB (past the node bound), as written and with one bad value at the
end; and a valid file of almost 1 MiB (a long placeholder list). The first
case's first call also reads the shipped defaults, once per process.

    python benchmarks/bench_config_read.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from langchain_ragbudget import load_config
from langchain_ragbudget.errors import ConfigError

_HEAD = (
    "surfaces:\n  chat:\n    weak_evidence:\n      combined:\n        kind: trees\n"
    "        baseline: 0\n        learning_rate: 0.1\n        threshold: 0.5\n"
    "        trees:\n"
)
_TREE = (
    "        - nodes:\n"
    "          - {feature: dense_top, threshold: 0.4, left: 1, right: 2}\n"
    "          - {value: 1.5}\n"
    "          - {value: -0.5}\n"
)


def tree_file(size: int, bad: bool) -> str:
    """A tree model of about `size` bytes; `bad` makes its last threshold NaN."""
    trees = max(1, (size - len(_HEAD)) // len(_TREE))
    text = _HEAD + _TREE * trees
    if bad:
        text = text.replace("threshold: 0.4", "threshold: .nan", 1)[::-1]
        text = text.replace("4.0 :dlohserht", "nan. :dlohserht", 1)[::-1]
    return text


def placeholder_file(size: int) -> str:
    """A valid file of about `size` bytes: a long `index.placeholders` list."""
    item = "  - placeholder text number %06d\n"
    return "index:\n  placeholders:\n" + "".join(
        item % i for i in range(size // len(item % 0))
    )


FITTED = Path(__file__).parent / "results" / "scifact_weak_evidence.yml"


def shared_by(text: str, surfaces: int) -> str:
    """`text` (a fitted model for two surfaces, the second an alias) for more."""
    alias = text[
        text.rindex("\n  search:") :
    ]  # "...search:\n    weak_evidence: *id001"
    more = "".join(alias.replace("search", f"surface{i}") for i in range(surfaces - 2))
    return text.rstrip("\n") + more + "\n"


def main() -> None:
    fitted = FITTED.read_text(encoding="utf-8")
    cases = [
        ("fitted model (2 surfaces)", fitted),
        ("fitted model shared by 5 surfaces", shared_by(fitted, 5)),
        ("tree model under the node bound", _HEAD + _TREE * 2_700),
        ("tree model", tree_file(800_000, False)),
        ("tree model, NaN last", tree_file(800_000, True)),
        ("placeholders", placeholder_file((1 << 20) - 100)),
    ]
    with tempfile.TemporaryDirectory() as folder:
        for name, text in cases:
            path = Path(folder) / "model.yml"
            path.write_text(text, encoding="utf-8")
            times = []
            for _ in range(3):
                started = time.perf_counter()
                try:
                    load_config(path)
                    outcome = "loaded"
                except ConfigError as exc:
                    outcome = f"refused: {str(exc)[len(str(path)) :][:80]}"
                times.append(time.perf_counter() - started)
            print(
                f"{name}: {path.stat().st_size:,} bytes: {times[0]:.2f} s first, "
                f"{min(times):.2f} s best of 3, {outcome}"
            )


if __name__ == "__main__":
    main()
