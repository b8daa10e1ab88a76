"""Crash safety: SIGKILL a Novaberg process at random points of its turns and memory jobs,
many times, on SQLite and on PostgreSQL; after each restart nothing acknowledged is lost,
nothing is stored twice, and the database checks out."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply

WORKER = [sys.executable, str(Path(__file__).with_name("crash_worker.py"))]
KILLS = int(os.environ.get("NOVABERG_CRASH_KILLS", "12"))
"""Kills per database: 12 in the suite; ``make soak`` runs 200 (and prints the figures)."""


def said(obj: object, delay_s: float = 0.02) -> Reply:
    return Reply(content=json.dumps(obj), delay_s=delay_s)


def check(db: Database, acked_turns: dict[int, int], acked_jobs: set[int]) -> None:
    assert db.integrity_check() == "ok"
    for turn_id, memory_id in acked_turns.items():
        turn = db.turn(turn_id)
        assert turn is not None and turn["status"] == "done", f"acknowledged turn {turn_id} lost"
        rows = db.query(
            "SELECT id FROM memories WHERE source_turn_id = ? AND kind = 'short_term'", (turn_id,)
        )
        assert [r["id"] for r in rows] == [memory_id]
    for event_id in acked_jobs:
        status = db.scalar("SELECT status FROM events WHERE id = ?", (event_id,))
        assert status in ("done", "failed"), f"acknowledged job {event_id} is {status}"
    # every finished turn is whole; an unfinished one left no messages and no memory
    for turn in db.query("SELECT id, status FROM turns"):
        messages = db.scalar("SELECT COUNT(*) AS n FROM messages WHERE turn_id = ?", (turn["id"],))
        memories = db.scalar(
            "SELECT COUNT(*) AS n FROM memories WHERE source_turn_id = ? AND kind = 'short_term'",
            (turn["id"],),
        )
        if turn["status"] == "done":
            assert messages == 2 and memories == 1
        else:
            assert messages == 0 and memories == 0
    # nothing twice: one fact per consolidated item, one set of jobs per memory
    facts = db.query(
        "SELECT derived_from, COUNT(*) AS n FROM memories WHERE kind = 'long_term' "
        "GROUP BY derived_from"
    )
    assert all(f["n"] == 1 for f in facts)
    jobs = db.query(
        "SELECT turn_id, type, COUNT(*) AS n FROM events GROUP BY turn_id, type HAVING COUNT(*) > 1"
    )
    assert jobs == []


def test_sigkill_at_random_points_loses_no_acknowledged_write_and_duplicates_nothing(
    ollama_env: OllamaTestServer,
    database_target: Path | str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    else:
        monkeypatch.setenv("NOVABERG_HOME", str(database_target.parent))
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    server = ollama_env
    server.script(  # a summary of its own per turn: an exact repeat is not stored twice
        "salience",
        *(said({"score": 0.9, "summary": f"The user adopted cat {n}."}) for n in range(20_000)),
    )
    server.standing("salience", said({"score": 0.9, "summary": "The user adopted a cat."}))
    server.standing("consolidate", said({"action": "new", "fact": "The user has a cat."}))
    server.standing("profile_adaptive", said({"statements": []}))
    server.standing("*", Reply(content='{"intent": "sharing", "tone": "warm"}', delay_s=0.02))

    seed = int(os.environ.get("NOVABERG_CRASH_SEED", time.time_ns() % 100_000))
    rng = random.Random(seed)
    acked_turns: dict[int, int] = {}
    acked_jobs: set[int] = set()
    kills_during_work = 0
    for _ in range(KILLS):
        worker = subprocess.Popen(WORKER, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "READY", f"seed {seed}: the worker failed"
        time.sleep(rng.uniform(0.0, 1.5))  # somewhere in a turn or a job
        worker.send_signal(signal.SIGKILL)
        out, _ = worker.communicate(timeout=30)
        assert worker.returncode == -signal.SIGKILL, f"seed {seed}: the worker ended by itself"
        lines = out.splitlines()
        kills_during_work += bool(lines)
        for line in lines:
            parts = line.split()
            if parts[:2] == ["ACK", "turn"]:
                acked_turns[int(parts[2])] = int(parts[4])
            elif parts[:2] == ["ACK", "job"]:
                acked_jobs.add(int(parts[2]))
        db = Database(database_target)
        try:
            check(db, acked_turns, acked_jobs)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from exc
        finally:
            db.close()
    assert kills_during_work >= KILLS // 2, f"seed {seed}: most kills came before any work"
    assert len(acked_turns) >= 3
    print(  # the soak run's figures (`make soak` shows them; the suite captures them)
        f"\ncrash soak on {'postgres' if isinstance(database_target, str) else 'sqlite'}: "
        f"seed {seed}, {KILLS} kills, {kills_during_work} during work, "
        f"{len(acked_turns)} acknowledged turns and {len(acked_jobs)} acknowledged jobs intact"
    )

    drained = subprocess.run([*WORKER, "--drain"], capture_output=True, text=True, timeout=120)
    assert drained.returncode == 0, drained.stderr
    db = Database(database_target)
    try:
        check(db, acked_turns, acked_jobs)
        left = db.scalar("SELECT COUNT(*) AS n FROM events WHERE status IN ('pending', 'running')")
        assert left == 0  # every job interrupted by a kill was redone after the restart
    finally:
        db.close()
