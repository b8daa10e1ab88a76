"""A Novaberg process for the event-loop stall test: an in-process engine under load on SQLite,
with a ticker task that measures how long the event loop was kept from running.

Run in a fresh interpreter (so that dateparser's first call is really a first call), with
``NOVABERG_HOME``, ``OLLAMA_HOST`` and ``NOVABERG_BACKEND`` set by the test. It seeds the
database with ``--seed`` memories (before the loop starts), then on one loop: opens the engine,
runs ``--conversations`` conversations of ``--turns`` salient turns concurrently (their memory
jobs run beside them: consolidate, timeline with dateparser, profiles) while, after the first
turn, another writer holds SQLite's write lock for ``--lock-s`` seconds (as a CLI command or a
second process may), waits for the jobs, forgets a memory; and prints one JSON line: the
longest gap between two 5 ms ticks beyond the 5 ms asked for (``max_stall_ms``), the gaps over
50 ms with when they happened, and what ran.

The same script runs against the engine before issue 9 (no ``Database.run``): there a forget is
called as the server's route called it then, on the loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import threading
import time
from typing import Any

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.sql import sqlite_module

TICK_S = 0.005
WORDS = ["sister", "garden", "boat", "violin", "river", "mountain", "coffee", "train"]


def seed(target: str, user: str, n: int) -> None:
    db = Database(target)
    try:
        with db.transaction() as c:
            for i in range(n):
                words = " ".join(WORDS[(i + k) % len(WORDS)] for k in range(5))
                text = f"Remembered {i}: the user mentioned {words} on day {i % 97}."
                MemoryStore.add(c, user, "short_term", text, 0.5, f"seed:{i}")
    finally:
        db.close()


class Ticker:
    """Sleeps 5 ms again and again; a gap longer than that is time the loop could not run."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.at: list[float] = []
        self.stop = False
        self.start = time.perf_counter()

    async def run(self) -> None:
        while not self.stop:
            before = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.gaps.append(time.perf_counter() - before - TICK_S)
            self.at.append(time.perf_counter() - self.start)


def hold_write_lock(path: str, held: threading.Event, seconds: float) -> None:
    """Another writer (a CLI command, a second process): holds SQLite's write lock a while.
    Through Novaberg's own SQLite library: Python's sqlite3 in this process would not see its
    locks, take itself for the only user and reset the shared-memory file that the engine's
    connections have mapped (a bus error, seen about one run in ten)."""
    other = sqlite_module().connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        held.set()
        time.sleep(seconds)
        other.execute("COMMIT")
    finally:
        other.close()


async def conversation(engine: Engine, n: int, turns: int, first: asyncio.Event) -> int:
    current = None
    done = 0
    for t in range(turns):
        text = f"Conversation {n}, turn {t}: I visit my sister next Friday and bake a cake."
        result = await engine.run_turn(text, conversation_id=current)
        current = result.conversation_id
        engine.start_background()
        done += 1
        first.set()
    return done


async def lock_while_turns_run(
    path: str, first: asyncio.Event, seconds: float, phases: dict[str, float], start: float
) -> None:
    """Once a turn is done, hold the write lock; the turns after it wait for it."""
    await first.wait()
    held = threading.Event()
    holding = asyncio.create_task(asyncio.to_thread(hold_write_lock, path, held, seconds))
    await asyncio.to_thread(held.wait)
    phases["lock_taken"] = time.perf_counter() - start
    await holding
    phases["lock_released"] = time.perf_counter() - start


async def load(args: argparse.Namespace) -> dict[str, Any]:
    if args.debug:  # name each slow step: asyncio logs callbacks over 40 ms
        logging.basicConfig(level=logging.WARNING)
        loop = asyncio.get_running_loop()
        loop.set_debug(True)
        loop.slow_callback_duration = 0.04
    ticker = Ticker()
    ticking = asyncio.create_task(ticker.run())
    await asyncio.sleep(0.05)
    settings = load_settings().settings
    phases: dict[str, float] = {}
    engine = await Engine.open(settings)
    phases["opened"] = time.perf_counter() - ticker.start
    try:
        first = asyncio.Event()
        locking = asyncio.create_task(
            lock_while_turns_run(str(settings.database), first, args.lock_s, phases, ticker.start)
        )
        turns = await asyncio.gather(
            *(conversation(engine, n, args.turns, first) for n in range(args.conversations))
        )
        await locking
        phases["turns"] = time.perf_counter() - ticker.start
        jobs = await engine.finish_background()
        phases["jobs"] = time.perf_counter() - ticker.start
        store = MemoryStore(engine.db)
        run = getattr(engine.db, "run", None)
        if run is not None:
            forgotten = await run(store.forget, settings.user, 1)
        else:  # before issue 9: the route called forget on the loop
            forgotten = store.forget(settings.user, 1)
    finally:
        await engine.aclose()
        ticker.stop = True
        await ticking
    gaps = sorted(ticker.gaps)
    return {
        "max_stall_ms": round(gaps[-1] * 1000, 1),
        "p99_stall_ms": round(gaps[int(len(gaps) * 0.99)] * 1000, 1),
        "over_50ms": [round(g * 1000, 1) for g in gaps if g > 0.05],
        "when": [
            (round(a, 2), round(g * 1000))
            for a, g in zip(ticker.at, ticker.gaps, strict=True)
            if g > 0.05
        ],
        "phases": {k: round(v, 2) for k, v in phases.items()},
        "ticks": len(gaps),
        "turns": sum(turns),
        "jobs": _count(jobs),
        "forgot": forgotten is not None,
        "has_run": run is not None,
    }


def _count(jobs: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for o in jobs:
        key = f"{o.type}:{o.status}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=2000)
    parser.add_argument("--conversations", type=int, default=6)
    parser.add_argument("--turns", type=int, default=2)
    parser.add_argument("--lock-s", type=float, default=4.0)
    parser.add_argument("--debug", action="store_true")
    args = parser.parse_args()
    settings = load_settings().settings
    seed(str(settings.database), settings.user, args.seed)
    print(json.dumps(asyncio.run(load(args))), flush=True)


if __name__ == "__main__":
    main()
