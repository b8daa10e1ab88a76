"""``novaberg eval``: the seed's contamination scenarios, run against the configured backend.

Each scenario runs one turn in a fresh, temporary ``NOVABERG_HOME`` seeded with the profile,
timeline and memory the scenario needs, and reports rounds, calls, wall time, votes and
salience beside the figures the seed measured before and after separating situation and
subject (../shared/seeds/002, section 6). Meaningful only with a capable model; it runs on any.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database


@dataclass(frozen=True)
class Scenario:
    name: str
    message: dict[str, str]
    seed_before: str
    seed_after: str
    profile_adaptive: dict[str, str] = field(default_factory=dict)
    profile_core: dict[str, str] = field(default_factory=dict)
    timeline: dict[str, str] = field(default_factory=dict)  # for tomorrow
    drift_words: tuple[str, ...] = ()
    """Words from the situation that must not wander into the answer."""


STRESSED = {
    "en": "Currently stressed about the car's TÜV inspection.",
    "de": "Gerade gestresst wegen der TÜV-Prüfung des Autos.",
}
INTERESTS = {
    "en": "Enthusiastic about cooking, astronomy and AI.",
    "de": "Begeistert von Küche, Astronomie und KI.",
}

SCENARIOS = (
    Scenario(
        name="appointment",
        message={"en": "What's on tomorrow?", "de": "Was steht morgen an?"},
        profile_adaptive=STRESSED,
        profile_core=INTERESTS,
        timeline={"en": "Peter's birthday", "de": "Peters Geburtstag"},
        seed_before="3 rounds, ~15 calls, >60 s",
        seed_after="1 round, ~7 calls, ~20 s",
    ),
    Scenario(
        name="knowledge",
        message={
            "en": "What is the capital of Australia?",
            "de": "Was ist die Hauptstadt von Australien?",
        },
        profile_adaptive=STRESSED,
        seed_before="psychology judge: 'lacks empathy'",
        seed_after="psychology judge: ok",
    ),
    Scenario(
        name="personal_data",
        message={
            "en": "Remind me, when is my dentist appointment?",
            "de": "Erinnere mich, wann ist mein Zahnarzttermin?",
        },
        timeline={"en": "Dentist Dr. Weber at 10:00", "de": "Zahnarzt Dr. Weber um 10:00"},
        seed_before="legal judge: 'privacy'",
        seed_after="legal judge: ok",
    ),
    Scenario(
        name="overwhelmed",
        message={
            "en": "I'm totally overwhelmed with work, everything is too much!",
            "de": "Ich bin total überfordert mit der Arbeit, alles wird zu viel!",
        },
        seed_before="salience 0.40",
        seed_after="salience 0.70",
    ),
    Scenario(
        name="drift",
        message={
            "en": "Can you give me a simple pancake recipe?",
            "de": "Kannst du mir ein einfaches Pfannkuchenrezept geben?",
        },
        profile_adaptive=STRESSED,
        profile_core=INTERESTS,
        drift_words=("TÜV", "TUV", "inspection", "Prüfung"),
        seed_before="corrected answers drifted toward 'TÜV stress'",
        seed_after="no drift",
    ),
)


def _seed(db: Database, user: str, scenario: Scenario, language: str) -> None:
    store = MemoryStore(db)
    if scenario.profile_core:
        store.set_profile_text(user, "core", scenario.profile_core[language])
    if scenario.profile_adaptive:
        store.set_profile_text(user, "adaptive", scenario.profile_adaptive[language])
    if scenario.timeline:
        tomorrow = (date.today() + timedelta(days=1)).isoformat()
        store.add_event(user, tomorrow, scenario.timeline[language], "eval:timeline")


@dataclass(frozen=True)
class EvalRow:
    """One scenario's result (``novaberg eval --json``: these fields, one object per
    scenario)."""

    scenario: str
    message: str
    rounds: int
    corrections: int
    calls: int
    wall_s: float
    votes: dict[str, str]
    """Each judge's vote in the last round."""
    reasons: dict[str, str]
    """Each judge's reason, where it gave one."""
    salience: float | None
    drift: bool | None
    """Whether the reply used one of the scenario's drift words (``None``: it has none)."""
    reply: str
    seed_before: str
    seed_after: str


async def run_scenario(settings: Settings, scenario: Scenario) -> EvalRow:
    language = settings.language
    with tempfile.TemporaryDirectory(prefix="novaberg-eval-") as home:
        local = settings.model_copy(deep=True)
        local.home = Path(home)
        local.database_url = None  # scenarios run in a throwaway SQLite file
        engine = await Engine.open(local)
        try:
            await engine.db.run(_seed, engine.db, local.user, scenario, language)
            started = time.perf_counter()
            result = await engine.run_turn(scenario.message[language])
            wall = time.perf_counter() - started
        finally:
            await engine.aclose()
    out = result.contract()
    votes = out.tribunal.votes if out.tribunal is not None else []
    reply_lower = result.reply.lower()
    return EvalRow(
        scenario=scenario.name,
        message=scenario.message[language],
        rounds=out.tribunal.rounds if out.tribunal is not None else 0,
        corrections=out.tribunal.corrections if out.tribunal is not None else 0,
        calls=len(out.calls),
        wall_s=round(wall, 2),
        votes={v.judge: v.vote for v in votes},
        reasons={v.judge: v.reason for v in votes if v.reason},
        salience=out.salience.score if out.salience is not None else None,
        drift=any(w.lower() in reply_lower for w in scenario.drift_words)
        if scenario.drift_words
        else None,
        reply=result.reply,
        seed_before=scenario.seed_before,
        seed_after=scenario.seed_after,
    )


async def run_all(
    settings: Settings,
    only: list[str] | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[EvalRow]:
    rows = []
    for scenario in SCENARIOS:
        if only and scenario.name not in only:
            continue
        if progress is not None:
            progress(scenario.name)
        rows.append(await run_scenario(settings, scenario))
    return rows
