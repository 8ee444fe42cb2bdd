"""A seeded stream of facts over simulated months, for `bench_memory.py --stream`.

Each subject (a template about one codename: a meeting time, a budget, a project
lead...) is stated, then restated (the same words, other case, spacing or
punctuation), recalled, changed (a new number, time, date or name), contradicted
(negated) and sometimes changed back to an earlier statement, on random days over
26 weeks. After each week (or every `every` weeks) every subject stated so far is
asked about; the memory
section that question gets is judged: is the subject's current statement in it,
and is any statement that is no longer current (of any subject)?

The same stream runs through the package (`MemoryStore` + `MemoryRetriever`, age
from when a fact was last said, restatement by text, supersession over the whole
store) and through the clocks the anchors use, each add-only with no supersession
(a row per statement, as mem0's library, LangChain's time-weighted retriever and
LangGraph's store keep them): age from creation, age from the last access (every
recall refreshes it), and similarity alone. Every memory section is cut by
`fit_memories` with the same surface share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache, partial
from pathlib import Path

import numpy as np
from langchain_core.documents import Document

from langchain_ragbudget.config._settings import load_config
from langchain_ragbudget.ledger._metadata_keys import MEMORY_SUBJECT
from langchain_ragbudget.memory._budget import fit_memories
from langchain_ragbudget.memory._retriever import MemoryRetriever, MemoryStore
from langchain_ragbudget.memory._store import normalised

START = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
WEEKS = 26


def words(text: str) -> list[str]:
    return text.split()


CODENAMES = words(
    "Aurora Basalt Cobalt Dynamo Ember Falcon Glacier Harbor Indigo Juniper Kestrel "
    "Lumen Meridian Nimbus Obsidian Pioneer Quartz Raven Sierra Tundra Umbra Vortex "
    "Willow Xenon Zephyr Atlas Beacon Cascade Delta Echo Fjord Granite Helix Jasper "
    "Koala Lotus Mosaic Nova Orchid Pebble"
)
NAMES = words("Priya Tomasz Alice Bruno Chen Dana Emeka Fatima Goran Hana Ivan Julia")
CITIES = words("Lisbon Porto Berlin Madrid Warsaw Oslo Dublin Vienna Prague Athens")
DAYS = words("Monday Tuesday Wednesday Thursday Friday")
MONTHS = words("March April May June July September October November")
# (topic, statement, its negation, the question, what changes)
TEMPLATES = (
    ("meeting", "The {e} sync is held every {v}", "The {e} sync is not held every {v}",
     "When is the {e} sync held?", "time"),
    ("budget", "The {e} budget is {v} euros", "The {e} budget is not {v} euros",
     "What is the {e} budget?", "money"),
    ("lead", "The {e} project is led by {v}", "The {e} project is not led by {v}",
     "Who leads the {e} project?", "name"),
    ("office", "The {e} team works from the {v} office",
     "The {e} team does not work from the {v} office",
     "Where does the {e} team work from?", "city"),
    ("release", "The {e} release is planned for {v}",
     "The {e} release is not planned for {v}", "When is the {e} release planned?",
     "date"),
    ("servers", "The {e} service runs on {v} servers",
     "The {e} service does not run on {v} servers",
     "How many servers does the {e} service run on?", "count"),
    ("oncall", "{v} is on call for {e} this month", "{v} is never on call for {e}",
     "Who is on call for {e}?", "name"),
    ("limit", "The {e} API allows {v} requests per minute",
     "The {e} API no longer allows {v} requests per minute",
     "How many requests per minute does the {e} API allow?", "count"),
)  # fmt: skip
EVENTS = ("restate", "change", "contradict", "recall", "change", "revert")


def value(kind: str, rng: np.random.Generator) -> str:
    if kind == "time":
        return f"{rng.choice(DAYS)} at {rng.integers(8, 18)}:{rng.choice(['00', '30'])}"
    if kind == "money":
        return f"{rng.integers(10, 500) * 1000}"
    if kind == "name":
        return str(rng.choice(NAMES))
    if kind == "city":
        return str(rng.choice(CITIES))
    if kind == "date":
        return f"{rng.choice(MONTHS)} {rng.integers(1, 29)}"
    return f"{rng.integers(2, 400)}"


def restated(text: str, rng: np.random.Generator) -> str:
    """The same statement as a user might type it again."""
    forms = (text.lower(), text + ".", text.replace(" ", "  ", 2), text + "!")
    return str(forms[int(rng.integers(len(forms)))])


@dataclass
class Subject:
    key: str
    template: tuple[str, str, str, str, str]
    codename: str

    def text(self, fact: str, negated: bool) -> str:
        form = self.template[2] if negated else self.template[1]
        return form.format(e=self.codename, v=fact)

    @property
    def question(self) -> str:
        return self.template[3].format(e=self.codename)


Event = tuple[datetime, str, str, str]  # when, subject key, action, text


def stream(subjects: int, seed: int) -> tuple[list[Subject], list[Event]]:
    """The subjects, and every event in time order (texts decided in advance)."""
    rng = np.random.default_rng(seed)
    pairs = [(t, c) for t in TEMPLATES for c in CODENAMES]
    chosen = rng.choice(len(pairs), size=min(subjects, len(pairs)), replace=False)
    out, events = [], []
    for index in chosen:
        template, codename = pairs[int(index)]
        subject = Subject(f"{template[0]}.{codename.lower()}", template, codename)
        out.append(subject)
        moment = START + timedelta(days=float(rng.uniform(0, 56)))
        fact, negated = value(template[4], rng), False
        text = subject.text(fact, negated)
        events.append((moment, subject.key, "state", text))
        for action in rng.permutation(EVENTS):
            moment += timedelta(days=float(rng.uniform(1, 24)))
            if action == "change":
                fact, negated = value(template[4], rng), False
                text = subject.text(fact, negated)
            elif action == "contradict":
                negated = not negated
                text = subject.text(fact, negated)
            elif action == "revert":
                text = str(rng.choice(subject_texts(events, subject.key)))
            elif action == "restate":
                text = restated(text, rng)
            events.append((moment, subject.key, str(action), text))
    return out, sorted(events)


def subject_texts(events: Sequence[Event], key: str) -> list[str]:
    return [e[3] for e in events if e[1] == key and e[2] != "recall"]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class AddOnly:
    """An anchor: a row per statement, no supersession, scored on one clock.

    `clock`: "created" (age from when the row was added), "accessed" (from the
    last recall that returned it, as LangChain's time-weighted retriever), or None
    (similarity alone, as mem0's library ranks).
    """

    def __init__(self, clock: str | None, half_life_days: float) -> None:
        self.clock, self.half_life = clock, half_life_days
        self.rows: list[tuple[str, str]] = []  # (subject, text)
        self.vectors = np.empty((4096, 384), dtype=np.float32)
        self.times = np.empty(4096)  # created or last accessed, epoch seconds

    def remember(
        self, subject: str, text: str, vector: np.ndarray, now: datetime
    ) -> None:
        at = len(self.rows)
        if at == len(self.times):
            self.vectors = np.concatenate([self.vectors, np.empty_like(self.vectors)])
            self.times = np.concatenate([self.times, np.empty_like(self.times)])
        self.rows.append((subject, text))
        self.vectors[at] = vector / np.linalg.norm(vector)
        self.times[at] = now.timestamp()

    def recall(self, query: np.ndarray, clock: Clock, k: int) -> list[Document]:
        now, count = clock.now, len(self.rows)
        unit = (query / np.linalg.norm(query)).astype(np.float32)
        scores = self.vectors[:count] @ unit
        if self.clock is not None:
            ages = (now.timestamp() - self.times[:count]) / 86_400
            scores = scores * 0.5 ** (np.maximum(ages, 0) / self.half_life)
        top = np.argsort(-scores, kind="stable")[:k]
        if self.clock == "accessed":
            self.times[top] = now.timestamp()
        return [
            Document(
                id=f"row-{i}",
                page_content=self.rows[int(i)][1],
                metadata={MEMORY_SUBJECT: self.rows[int(i)][0]},
            )
            for i in top
        ]


normal = cache(normalised)  # the texts repeat; their normal form once each


@dataclass
class Tally:
    """Questions asked; sections holding the current statement; holding a stale
    one; holding any statement of the subject asked about."""

    asked: int = 0
    current: int = 0
    stale: int = 0
    subject: int = 0


Recall = Callable[[np.ndarray], Sequence[Document]]


def judge(
    served: Sequence[Document], subject: str, current: dict[str, str], tally: Tally
) -> None:
    """Count whether `subject`'s current statement, and any stale one, was served."""
    shown = [(d.metadata.get(MEMORY_SUBJECT), normal(d.page_content)) for d in served]
    tally.asked += 1
    tally.current += (subject, current[subject]) in shown
    tally.subject += any(key == subject for key, _ in shown)
    tally.stale += any(norm != current[str(key)] for key, norm in shown)


def run(
    subjects: list[Subject],
    events: list[Event],
    vectors: dict[str, np.ndarray],
    half_life_days: float,
    folder: Path,
    every: int = 1,
) -> dict[str, Tally]:
    """The stream through the package and the three anchors: a tally for each."""
    clock = Clock()
    store = MemoryStore(folder / f"stream-{half_life_days:g}.sqlite", clock=clock)
    retriever = MemoryRetriever(store=store, half_life_days=half_life_days)
    anchors = {
        "age from creation, add-only": AddOnly("created", half_life_days),
        "age from last access, add-only": AddOnly("accessed", half_life_days),
        "similarity only, add-only": AddOnly(None, half_life_days),
    }
    share = load_config().surface("chat")  # the shipped chat surface's share
    k = retriever.k

    def package(query: np.ndarray) -> Sequence[Document]:
        return retriever.recall(vector=query.tolist()).documents()

    recalls: dict[str, Recall] = {"ragbudget (said_at, supersession)": package}
    for name, anchor in anchors.items():
        recalls[name] = partial(anchor.recall, clock=clock, k=k)
    tallies = {name: Tally() for name in recalls}
    current: dict[str, str] = {}
    pending = iter(events)
    event = next(pending, None)
    for week in range(1, WEEKS + 1):
        end = START + timedelta(weeks=week)
        while event is not None and event[0] <= end:
            moment, key, action, text = event
            clock.now = moment
            if action == "recall":
                for recall in recalls.values():
                    recall(vectors[question_of(subjects, key)])
            else:
                store.remember(text, subject=key, embedding=vectors[text])
                for anchor in anchors.values():
                    anchor.remember(key, text, vectors[text], moment)
                current[key] = normal(text)
            event = next(pending, None)
        clock.now = end
        if week % every:
            continue
        for subject in subjects:
            if subject.key not in current:
                continue
            for name, recall in recalls.items():
                documents = recall(vectors[subject.question])
                section = fit_memories(
                    documents,
                    share.max_memories,
                    share.memory_tokens,
                    share.encoding_name,
                )
                judge(section.documents, subject.key, current, tallies[name])
    store.close()
    return tallies


def question_of(subjects: Sequence[Subject], key: str) -> str:
    return next(s.question for s in subjects if s.key == key)


def texts_to_embed(subjects: Sequence[Subject], events: Sequence[Event]) -> list[str]:
    return sorted({e[3] for e in events if e[2] != "recall"}) + [
        s.question for s in subjects
    ]
