"""Corrections said in conversation, scripted at scale (issue 23): do they all take?

    python -m benchmarks.corrections [--facts 200] [--corrections 50] [--retractions 20]
                                     [--embedder auto|off] [--database SERVER_URL] [--out FILE]

A user with ``--facts`` remembered facts (half English, half German, each with a made-up
word of its own so that a correction names exactly one), a core profile whose statements
rest on them, and a conversation through the real engine (the Ollama test server in this
process answering; the router's JSON scripted as a model would give it, the rest the
engine's own): ``--corrections`` messages like "No, Velmora, not Quastrin!" (German:
"Nein, Velmora, nicht Quastrin!") and ``--retractions`` like "I don't have Brimsel any
more." ("Ich habe Brimsel nicht mehr."), each followed by a question about the same fact
("What do you know about Brimsel?"). Measured, per correction:

- ``taken_before_next_answer``: when the correcting turn has ended (before the next
  message), the old version has its validity end and, for a correction, exactly one current
  successor with the corrected text (a retraction: none);
- ``old_in_next_prompt``: the old version's text is in the next turn's responder prompt;
  ``new_in_next_prompt``: the successor's is;
- ``old_returned_as_current``: :func:`~novaberg.memory.retrieval.recall` (the enricher's,
  ``memory search``'s and the API's one entry) for the question returns the old version
  (checked after the correction and once more at the end, for every pair);
- ``current_above_old``: the successor is returned and ranked above the old version (which
  is not returned at all when it is never a candidate);
- ``profile_rests_on_old``: a current profile statement names the old version as a source.

Goals (issue 23): 100% taken before the next answer, 0 old versions returned as current, the
current version above the old one in 100% of the pairs. Writes
``bench-results/corrections.json`` and prints a Markdown table. :func:`run` is also what
``tests/test_corrections_benchmark.py`` runs, smaller.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.environment import environment
from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.memory.retrieval import recall
from novaberg.memory.store import MemoryStore
from novaberg.storage.memories import Statement
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database

SYLLABLES = ("bri", "mol", "sta", "ven", "qua", "rin", "tho", "lek", "dra", "mus", "pel", "zor")
PLAIN = Reply(content=json.dumps({"score": 0.1, "summary": ""}))


@dataclass(frozen=True)
class Fact:
    language: str
    text: str
    word: str
    """The made-up word a correction names as wrong."""
    name: str
    """The made-up name the question after it asks about."""


@dataclass(frozen=True)
class Change:
    kind: str  # "correct" | "retract"
    fact: Fact
    right: str | None
    message: str
    question: str

    @property
    def new_text(self) -> str | None:
        return None if self.right is None else self.fact.text.replace(self.fact.word, self.right)


@dataclass
class Figures:
    facts: int
    corrections: int
    retractions: int
    taken_before_next_answer: int = 0
    old_in_next_prompt: int = 0
    new_in_next_prompt: int = 0
    old_returned_as_current: int = 0
    current_above_old: int = 0
    profile_rests_on_old: int = 0
    turn_ms: list[float] = field(default_factory=list)

    def view(self) -> dict[str, Any]:
        out = asdict(self)
        times = sorted(out.pop("turn_ms"))
        out["turn_p50_ms"] = round(statistics.median(times), 1) if times else None
        out["turn_p95_ms"] = round(times[int(0.95 * (len(times) - 1))], 1) if times else None
        return out

    def goals_met(self) -> bool:
        changes = self.corrections + self.retractions
        return (
            self.taken_before_next_answer == changes
            and self.old_returned_as_current == 0
            and self.current_above_old == self.corrections
            and self.old_in_next_prompt == 0
            and self.new_in_next_prompt == self.corrections
            and self.profile_rests_on_old == 0
        )


def words(count: int, seed: int = 23) -> list[str]:
    """``count`` made-up capitalised words, none inside another."""
    rng = random.Random(seed)
    found: list[str] = []
    while len(found) < count:
        word = "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize()
        if all(word.lower() not in w.lower() and w.lower() not in word.lower() for w in found):
            found.append(word)
    return found


def script(facts: int, corrections: int, retractions: int) -> tuple[list[Fact], list[Change]]:
    """The facts and, in order, the changes to them; facts alternate English and German. The
    first ``corrections`` say where a friend lives (the place is corrected), the next
    ``retractions`` name a pet (retracted by its name), the rest where a friend lives."""
    if corrections + retractions > facts:
        raise SystemExit("more corrections and retractions than facts")
    pool = iter(words(2 * facts + corrections))
    made: list[Fact] = []
    for n in range(facts):
        name, place = next(pool), next(pool)
        en = n % 2 == 0
        if corrections <= n < corrections + retractions:
            text = f"Ada has a pet called {name}." if en else f"Ada hat ein Haustier namens {name}."
            made.append(Fact("en" if en else "de", text, name, name))
        else:
            text = (
                f"Ada's friend {name} lives in {place}."
                if en
                else (f"Adas Freundin {name} wohnt in {place}.")
            )
            made.append(Fact("en" if en else "de", text, place, name))
    changes: list[Change] = []
    for fact in made[:corrections]:
        right = next(pool)
        en = fact.language == "en"
        message = f"No, {right}, not {fact.word}!" if en else f"Nein, {right}, nicht {fact.word}!"
        changes.append(Change("correct", fact, right, message, _question(fact)))
    for fact in made[corrections : corrections + retractions]:
        en = fact.language == "en"
        message = (
            f"I don't have {fact.word} any more." if en else f"Ich habe {fact.word} nicht mehr."
        )
        changes.append(Change("retract", fact, None, message, _question(fact)))
    return made, changes


def _question(fact: Fact) -> str:
    if fact.language == "en":
        return f"What do you know about {fact.name}?"
    return f"Was weißt du über {fact.name}?"


def _route(change: Change | None) -> Reply:
    correction = None
    if change is not None:
        correction = {"kind": change.kind, "wrong": change.fact.word, "right": change.right}
    return Reply(
        content=json.dumps(
            {"intent": "sharing", "tone": "warm", "needs_check": False, "correction": correction}
        )
    )


@contextmanager
def _environment(server: OllamaTestServer, embedder: str, database: str | None) -> Iterator[None]:
    wanted = {
        "NOVABERG_HOME": tempfile.mkdtemp(prefix="novaberg-corrections-"),
        "NOVABERG_BACKEND": "ollama",
        "OLLAMA_HOST": server.url,
        "NOVABERG_TRIBUNAL__JUDGES": "",
        "NOVABERG_MEMORY__JOBS": "false",
        "NOVABERG_MEMORY__EMBEDDER": embedder,
    }
    if database:
        wanted["NOVABERG_DATABASE_URL"] = database
    with environment(wanted):
        yield


async def run(
    facts: int = 200,
    corrections: int = 50,
    retractions: int = 20,
    *,
    embedder: str = "auto",
    database: str | None = None,
    server: OllamaTestServer | None = None,
) -> Figures:
    """The scripted conversation; a ``server`` of the caller's (reset first), else one here."""
    own = server is None
    test_server = OllamaTestServer().start() if server is None else server
    test_server.reset()
    try:
        with _environment(test_server, embedder, database):
            settings = load_settings().settings
            engine = await Engine.open(settings)
            try:
                return await _converse(
                    engine, settings, test_server, facts, corrections, retractions
                )
            finally:
                await engine.aclose()
    finally:
        if own:
            test_server.stop()


async def _converse(
    engine: Engine,
    settings: Settings,
    server: OllamaTestServer,
    facts: int,
    corrections: int,
    retractions: int,
) -> Figures:
    user = settings.user
    store = MemoryStore(engine.db)
    made, changes = script(facts, corrections, retractions)
    ids = await engine.db.run(_store_facts, engine, user, made)
    server.standing("responder", Reply(content="I see."))
    server.standing("salience", PLAIN)
    server.standing("router", _route(None))
    figures = Figures(facts, corrections, retractions)
    pairs: list[tuple[Change, int, int | None]] = []
    for change in changes:
        old = ids[change.fact.text]
        server.script("router", _route(change))
        began = time.perf_counter()
        await engine.run_turn(change.message)
        figures.turn_ms.append((time.perf_counter() - began) * 1000)
        taken, successor = await engine.db.run(_taken, store, user, old, change)
        figures.taken_before_next_answer += taken
        await engine.vectors_written()
        await engine.run_turn(change.question)
        prompt = str(server.requests(caller="responder")[-1].body["messages"][0]["content"])
        figures.old_in_next_prompt += change.fact.text in prompt
        figures.new_in_next_prompt += change.new_text is not None and change.new_text in prompt
        pairs.append((change, old, successor))
        await _check_recall(engine, settings, user, figures, change, old, successor, count=True)
        figures.profile_rests_on_old += await engine.db.run(_profile_rests_on, store, user, old)
    for change, old, successor in pairs:  # again at the end: nothing came back
        await _check_recall(engine, settings, user, figures, change, old, successor, count=False)
    return figures


def _store_facts(engine: Engine, user: str, made: list[Fact]) -> dict[str, int]:
    ids: dict[str, int] = {}
    with engine.db.transaction() as c:
        for n, fact in enumerate(made):
            ids[fact.text] = MemoryStore.add(c, user, "long_term", fact.text, 0.7, f"fact:{n}").id
    store = MemoryStore(engine.db)  # every fact has a statement resting on it, some two
    core = [Statement(f"Knows {f.name} well.", [ids[f.text]]) for f in made[::3]]
    store.set_profile(user, "core", core)
    adaptive = [Statement(f"Mentioned {f.name} lately.", [ids[f.text]]) for f in made]
    store.set_profile(user, "adaptive", adaptive)
    return ids


def _taken(store: MemoryStore, user: str, old: int, change: Change) -> tuple[bool, int | None]:
    """Whether the change holds now, and the successor's id (a correction's)."""
    item = store.get(user, old)
    if item is None or item.valid_to is None:
        return False, None
    current = [v for v in store.history(user, old) if v.current]
    if change.kind == "retract":
        return item.superseded_by is None and not current, None
    if len(current) != 1 or current[0].text != change.new_text:
        return False, None
    return True, current[0].id


def _profile_rests_on(store: MemoryStore, user: str, old: int) -> int:
    return sum(
        old in statement.sources
        for profile in store.profile(user).values()
        for statement in profile.statements
    )


async def _check_recall(
    engine: Engine,
    settings: Settings,
    user: str,
    figures: Figures,
    change: Change,
    old: int,
    successor: int | None,
    *,
    count: bool,
) -> None:
    found = await recall(engine.db, settings, user, change.question, max_items=10)
    ranked = [r.item.id for r in found.items]
    figures.old_returned_as_current += old in ranked
    if count and successor is not None and successor in ranked:
        figures.current_above_old += old not in ranked or ranked.index(successor) < ranked.index(
            old
        )


def _table(figures: Figures) -> str:
    view = figures.view()
    changes = figures.corrections + figures.retractions
    rows = [
        ("taken before the next answer", f"{view['taken_before_next_answer']} / {changes}", "100%"),
        ("old versions returned as current", str(view["old_returned_as_current"]), "0"),
        ("current above old", f"{view['current_above_old']} / {figures.corrections}", "100%"),
        ("old version in the next prompt", str(view["old_in_next_prompt"]), "0"),
        (
            "new version in the next prompt",
            f"{view['new_in_next_prompt']} / {figures.corrections}",
            "all",
        ),
        ("profile statements on an old version", str(view["profile_rests_on_old"]), "0"),
        ("turn p50 / p95 ms", f"{view['turn_p50_ms']} / {view['turn_p95_ms']}", "—"),
    ]
    lines = ["| figure | measured | goal |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--corrections", type=int, default=50)
    parser.add_argument("--retractions", type=int, default=20)
    parser.add_argument("--embedder", default="auto", help="memory.embedder (auto, off, …)")
    parser.add_argument(
        "--database",
        default=None,
        help="a PostgreSQL server's URL: a fresh database on it, dropped afterwards "
        "(default: SQLite)",
    )
    parser.add_argument("--out", default="bench-results/corrections.json")
    args = parser.parse_args()
    fresh = None if args.database is None else create_database(args.database)
    try:
        figures = asyncio.run(
            run(
                args.facts,
                args.corrections,
                args.retractions,
                embedder=args.embedder,
                database=fresh,
            )
        )
    finally:
        if fresh is not None:
            drop_database(args.database, fresh)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures.view(), indent=2) + "\n", encoding="utf-8")
    print(_table(figures))
    if not figures.goals_met():
        print("GOAL MISSED")


if __name__ == "__main__":
    main()
