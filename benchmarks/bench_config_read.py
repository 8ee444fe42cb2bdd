"""How long `load_config` takes on files near the 1 MiB cap.

A boosted-tree weak-evidence model is the largest thing a configuration holds.
This writes one of about 800 KB (as written, and with one bad value at the end),
and a valid file of almost 1 MiB (a long placeholder list), and times
`load_config` on each.

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


def main() -> None:
    cases = [
        ("tree model", tree_file(800_000, False)),
        ("tree model, NaN last", tree_file(800_000, True)),
        ("placeholders", placeholder_file((1 << 20) - 100)),
    ]
    with tempfile.TemporaryDirectory() as folder:
        for name, text in cases:
            path = Path(folder) / "model.yml"
            path.write_text(text, encoding="utf-8")
            print(name, end=": ")
            started = time.perf_counter()
            try:
                load_config(path)
                outcome = "loaded"
            except ConfigError as exc:
                outcome = f"refused: {str(exc)[len(str(path)) :][:90]}"
            took = time.perf_counter() - started
            print(f"{path.stat().st_size:,} bytes: {took:.2f} s, {outcome}")


if __name__ == "__main__":
    main()
