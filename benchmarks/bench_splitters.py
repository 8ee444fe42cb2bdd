"""Sentence splitters measured against SciFact's gold sentence boundaries.

Candidates: sentencex, pysbd, nupunkt, blingfire and a regex baseline written here.
nltk's punkt is not a candidate: its model is not on PyPI (``nltk.sent_tokenize``
raises ``LookupError: Resource 'punkt_tab' not found`` until ``nltk.download`` runs).

The text of each abstract is the BEIR ``text`` field of ``corpus.jsonl.gz`` (the gold
sentences stripped and joined by one space). A boundary is where a gold sentence
starts, except the first. Positions are compared after removing all whitespace (the
index of the next non-whitespace character), so a splitter that keeps or drops the
space between two sentences, or normalises whitespace, is neither rewarded nor
punished. This script does not import ``langchain_ragbudget``: run it with a venv
that has the candidates::

    python3 -m venv /tmp/splitvenv
    /tmp/splitvenv/bin/pip install sentencex pysbd nupunkt blingfire numpy
    /tmp/splitvenv/bin/python benchmarks/bench_splitters.py \
        --data ../shared/data/scifact --json benchmarks/results/splitters.json

(blingfire imports numpy without declaring it.) Speed is measured single-threaded, all
splitters in one process, one full pass each per round, the order rotated per round;
import/load time and the hostile strings run in a fresh child process per splitter
(per case), so a crash or hang in one library cannot take the run down.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.metadata
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "RAYON_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

Splitter = Callable[[str], list[str]]

# ---------------------------------------------------------------- regex baseline

_ABBREVIATIONS = frozenset(
    {
        "e.g",
        "i.e",
        "al",
        "fig",
        "figs",
        "vs",
        "approx",
        "ca",
        "cf",
        "eq",
        "eqs",
        "ref",
        "refs",
        "no",
        "nos",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "st",
        "resp",
        "sp",
        "spp",
        "vol",
        "pp",
    }
)
# End punctuation, optional closing quotes/brackets, whitespace, then what starts a
# sentence: an optional opening quote/bracket and an uppercase letter or a digit.
_CANDIDATE = re.compile(
    r"[.?!][\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])"
)


def regex_split(text: str) -> list[str]:
    """Split after ``.?!`` + whitespace + uppercase/digit/quote, unless abbreviation.

    Returns slices of ``text`` that concatenate back to it exactly.
    """
    pieces: list[str] = []
    start = 0
    for match in _CANDIDATE.finditer(text):
        if text[match.start()] == ".":
            before = text[start : match.start()].rsplit(None, 1)
            word = before[-1].lstrip("([\"'").lower() if before else ""
            if word in _ABBREVIATIONS:
                continue
        pieces.append(text[start : match.end()])
        start = match.end()
    if start < len(text) or not pieces:
        pieces.append(text[start:])
    return pieces


# ---------------------------------------------------------------- candidates


def _make_sentencex() -> Splitter:
    import sentencex

    def split(text: str) -> list[str]:
        return list(sentencex.segment("en", text))

    return split


def _make_pysbd() -> Splitter:
    import pysbd

    segmenter = pysbd.Segmenter(language="en", clean=False)

    def split(text: str) -> list[str]:
        return list(segmenter.segment(text))

    return split


def _make_nupunkt() -> Splitter:
    import nupunkt

    def split(text: str) -> list[str]:
        return [str(sentence) for sentence in nupunkt.sent_tokenize(text)]

    return split


def _make_blingfire() -> Splitter:
    import blingfire

    def split(text: str) -> list[str]:
        out = blingfire.text_to_sentences(text)
        return out.split("\n") if out else []

    return split


def _make_regex() -> Splitter:
    return regex_split


# name -> (distribution for the version, factory, API used, offsets API)
CANDIDATES: dict[str, tuple[str | None, Callable[[], Splitter], str, str]] = {
    "regex": (None, _make_regex, "regex_split (this file)", "slices of the input"),
    "sentencex": (
        "sentencex",
        _make_sentencex,
        'segment("en", t)',
        "get_sentence_boundaries",
    ),
    "pysbd": (
        "pysbd",
        _make_pysbd,
        'Segmenter("en", clean=False)',
        "char_span=True",
    ),
    "nupunkt": ("nupunkt", _make_nupunkt, "sent_tokenize(t)", "sent_spans"),
    "blingfire": (
        "blingfire",
        _make_blingfire,
        "text_to_sentences(t)",
        "text_to_sentences_and_offsets",
    ),
}

# ---------------------------------------------------------------- data and scoring


def load_abstracts(folder: Path) -> list[tuple[str, list[int]]]:
    """(text, gold boundaries as non-whitespace offsets) for every abstract."""
    texts: dict[str, str] = {}
    with gzip.open(folder / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            texts[str(row["_id"])] = row["text"]
    out: list[tuple[str, list[int]]] = []
    path = folder / "extra" / "corpus_sentences.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            text = texts[str(row["doc_id"])]
            sentences = [s.strip() for s in row["abstract"]]
            if " ".join(sentences) != text:  # holds for all 5,183; checked, not assumed
                raise SystemExit(f"doc {row['doc_id']}: gold sentences != corpus text")
            out.append((text, _starts(sentences)))
    return out


def _nonspace(text: str) -> int:
    return len(text) - sum(1 for ch in text if ch.isspace())


def _starts(sentences: list[str]) -> list[int]:
    """Non-whitespace offsets where sentences 2..n start (empty ones are skipped)."""
    starts: list[int] = []
    pos = 0
    for sentence in sentences:
        n = _nonspace(sentence)
        if n == 0:
            continue
        if pos > 0:
            starts.append(pos)
        pos += n
    return starts


def score(
    abstracts: list[tuple[str, list[int]]], outputs: list[list[str]]
) -> dict[str, Any]:
    """Micro boundary P/R/F1, exact-doc accuracy, altered docs, mid-token splits.

    A mid-token split is a predicted boundary with no whitespace before it in the
    text (``H2A.|Z``): the piece before it ends inside a word.
    """
    tp = n_pred = n_gold = exact = altered = mid_token = 0
    for (text, gold), pred_sentences in zip(abstracts, outputs, strict=True):
        if sum(_nonspace(s) for s in pred_sentences) != _nonspace(text):
            altered += 1
        pred = set(_starts(pred_sentences))
        chars = [i for i, ch in enumerate(text) if not ch.isspace()]
        mid_token += sum(
            1 for x in pred if x < len(chars) and not text[chars[x] - 1].isspace()
        )
        gold_set = set(gold)
        tp += len(pred & gold_set)
        n_pred += len(pred)
        n_gold += len(gold_set)
        exact += pred == gold_set
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "exact_doc_accuracy": exact / len(abstracts),
        "gold_boundaries": n_gold,
        "predicted_boundaries": n_pred,
        "true_positives": tp,
        "docs_text_altered": altered,
        "mid_token_splits": mid_token,
    }


# ---------------------------------------------------------------- hostile strings

_ABBREV_CASES: dict[str, list[str]] = {
    "e.g.": ["Markers were used, e.g. CD4 and CD8.", "Results follow."],
    "i.e.": ["One arm, i.e. the control, improved.", "The other did not."],
    "Fig. 2": ["As shown in Fig. 2, the effect was large.", "It persisted."],
    "p < 0.05.": ["The effect was significant at p < 0.05.", "More work is needed."],
    "(p < 0.05).": ["The effect was significant (p < 0.05).", "More work is needed."],
    "3.5 mg": ["Patients received 3.5 mg daily.", "None died."],
    "et al.": ["Smith et al. (2019) saw 12 cases.", "We found 3 more."],
    "vs.": ["Drug A vs. B was tested.", "A won."],
}


def hostile_text(case: str) -> str:
    """The text of one hostile case (built in the child, not passed on argv)."""
    if case == "empty":
        return ""
    if case == "whitespace":
        return " \t\n\r\u00a0 " * 50
    if case == "200KB line, no punctuation":
        return ("word " * 40_000).strip()
    if case == "200KB line, sentences":
        return ("The dose was 3.5 mg in all arms. " * 6_100).strip()
    if case == "lone surrogates":
        return "Result A was found. \ud800 Result B was not.\udfff End."
    if case == "many newlines":
        return "A finding\n\n\n\n" * 5_000 + "\n" * 20_000 + "Last one."
    if case in _ABBREV_CASES:
        return " ".join(_ABBREV_CASES[case])
    raise KeyError(case)


HOSTILE_CASES = [
    "empty",
    "whitespace",
    "200KB line, no punctuation",
    "200KB line, sentences",
    "lone surrogates",
    "many newlines",
    *_ABBREV_CASES,
]


def _child_hostile(name: str, case: str) -> dict[str, Any]:
    split = CANDIDATES[name][1]()
    text = hostile_text(case)
    t0 = time.perf_counter()
    try:
        out = split(text)
    except Exception as exc:  # a crash is the measurement
        ms = (time.perf_counter() - t0) * 1000
        return {"status": f"raises {type(exc).__name__}", "ms": ms}
    ms = (time.perf_counter() - t0) * 1000
    result: dict[str, Any] = {"status": "ok", "ms": ms, "n_sentences": len(out)}
    if case in _ABBREV_CASES:
        got = [s.strip() for s in out if s.strip()]
        result["correct"] = got == _ABBREV_CASES[case]
        result["got"] = got
    else:
        result["nonspace_kept"] = sum(_nonspace(s) for s in out) == _nonspace(text)
    return result


def _child_load(name: str) -> dict[str, float]:
    t0 = time.perf_counter()
    split = CANDIDATES[name][1]()
    t1 = time.perf_counter()
    split("First sentence here. Second one follows.")
    t2 = time.perf_counter()
    return {"import_ms": (t1 - t0) * 1000, "first_call_ms": (t2 - t1) * 1000}


def _run_child(args: list[str], timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), *args]
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"status": f"hang (>{timeout:.0f} s)"}
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or [""])[-1][:120]
        return {"status": f"process died rc={proc.returncode}: {tail}"}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- main


def _version(dist: str | None) -> str:
    if dist is None:
        return "-"
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default="../shared/data/scifact")
    parser.add_argument("--json", default=None, help="write raw numbers here")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None, help="splitter names")
    parser.add_argument("--child-load", default=None, help=argparse.SUPPRESS)
    parser.add_argument(
        "--child-hostile", nargs=2, default=None, help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child_load:
        print(json.dumps(_child_load(args.child_load)))
        return
    if args.child_hostile:
        print(json.dumps(_child_hostile(*args.child_hostile)))
        return

    names = [n for n in CANDIDATES if args.only is None or n in args.only]
    names = [n for n in names if _version(CANDIDATES[n][0]) != "missing"]
    abstracts = load_abstracts(Path(args.data))
    texts = [t for t, _ in abstracts]
    splitters = {n: CANDIDATES[n][1]() for n in names}
    outputs = {n: [splitters[n](t) for t in texts] for n in names}  # also a warm-up

    seconds: dict[str, list[float]] = {n: [] for n in names}
    for r in range(args.rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            split = splitters[n]
            t0 = time.perf_counter()
            for t in texts:
                split(t)
            seconds[n].append(time.perf_counter() - t0)

    results: dict[str, Any] = {}
    for n in names:
        loads = [_run_child(["--child-load", n], 300) for _ in range(3)]
        hostile = {c: _run_child(["--child-hostile", n, c], 120) for c in HOSTILE_CASES}
        results[n] = {
            "version": _version(CANDIDATES[n][0]),
            "api": CANDIDATES[n][2],
            "offsets_api": CANDIDATES[n][3],
            **score(abstracts, outputs[n]),
            "ms_per_1000_abstracts": statistics.median(seconds[n])
            * 1000
            * 1000
            / len(texts),
            "rounds_s": seconds[n],
            "import_ms": statistics.median(
                x.get("import_ms", float("nan")) for x in loads
            ),
            "first_call_ms": statistics.median(
                x.get("first_call_ms", float("nan")) for x in loads
            ),
            "hostile": hostile,
        }

    found_by_none = 0
    for i, (_, gold) in enumerate(abstracts):
        union: set[int] = set()
        for n in names:
            union |= set(_starts(outputs[n][i]))
        found_by_none += len(set(gold) - union)

    print(
        f"SciFact: {len(texts)} abstracts, "
        f"{results[names[0]]['gold_boundaries']} gold boundaries; "
        f"python {platform.python_version()}, {os.cpu_count()} cpus, single thread"
    )
    print(f"gold boundaries that no splitter finds: {found_by_none}")
    head = (
        f"{'splitter':<10} {'version':<8} {'P':>6} {'R':>6} {'F1':>6} {'exact':>6} "
        f"{'altered':>7} {'midtok':>6} {'ms/1k':>8} {'import ms':>9} {'1st call':>8}"
    )
    print(head)
    print("-" * len(head))
    for n in names:
        r = results[n]
        print(
            f"{n:<10} {r['version']:<8} {r['precision']:6.4f} {r['recall']:6.4f} "
            f"{r['f1']:6.4f} {r['exact_doc_accuracy']:6.3f} "
            f"{r['docs_text_altered']:>7} {r['mid_token_splits']:>6} "
            f"{r['ms_per_1000_abstracts']:8.1f} "
            f"{r['import_ms']:9.1f} {r['first_call_ms']:8.1f}"
        )
    print()
    print("hostile strings: ok/ms (abbreviation cases: + = split as expected)")
    print(f"{'case':<28}" + "".join(f"{n:>16}" for n in names))
    for case in HOSTILE_CASES:
        cells = []
        for n in names:
            h = results[n]["hostile"][case]
            if h["status"] != "ok":
                cells.append(h["status"][:15])
                continue
            mark = ""
            if "correct" in h:
                mark = " +" if h["correct"] else " -"
            elif not h["nonspace_kept"]:
                mark = " lossy"
            cells.append(f"{h['ms']:.1f}ms{mark}")
        print(f"{case:<28}" + "".join(f"{c:>16}" for c in cells))

    if args.json:
        raw = {
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "n_abstracts": len(texts),
            "gold_boundaries_found_by_no_splitter": found_by_none,
            "rounds": args.rounds,
            "results": results,
        }
        Path(args.json).write_text(json.dumps(raw, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
