"""Two processes, one job: every memory job is claimed atomically before it runs, so two
Novaberg processes on one home (SQLite) or one database (PostgreSQL) never run a job twice;
a claim whose process died, or whose lease ran out, is taken again."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.jobs.events import EventQueue, claimant
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply

WORKER = [sys.executable, str(Path(__file__).with_name("job_worker.py"))]
TURNS = 4


def said(obj: object, delay_s: float = 0.0) -> Reply:
    return Reply(content=json.dumps(obj), delay_s=delay_s)


async def _salient_turns(n: int) -> None:
    engine = await Engine.open(load_settings().settings)
    try:
        for k in range(n):
            await engine.run_turn(f"Thing {k}: I have a cat.")
    finally:
        await engine.aclose()


def test_two_processes_run_every_job_once(
    ollama_env: OllamaTestServer,
    database_target: Path | str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    else:
        monkeypatch.setenv("NOVABERG_HOME", str(database_target.parent))
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__CORE_EVERY", "2")
    server = ollama_env
    server.script(  # one memory per turn (an exact repeat would be stored once)
        "salience",
        *(said({"score": 0.9, "summary": f"The user has cat number {k}."}) for k in range(TURNS)),
    )
    asyncio.run(_salient_turns(TURNS))
    # every job makes one slow model call: consolidation fails without writing (so that every
    # profile job sees the same items), a profile version rests on item 1
    server.standing("consolidate", said({"action": "new", "fact": ""}, delay_s=0.05))
    statement = {"statements": [{"text": "Has a cat.", "sources": [1]}]}
    server.standing("profile_adaptive", said(statement, delay_s=0.05))
    server.standing("profile_core", said(statement, delay_s=0.05))

    workers = [
        subprocess.Popen(
            WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ)
        )
        for _ in range(2)
    ]
    for w in workers:
        assert w.stdout is not None and w.stdout.readline().strip() == "READY"
    for w in workers:  # both start at once
        assert w.stdin is not None
        w.stdin.write("GO\n")
        w.stdin.flush()
    outputs = [w.communicate(timeout=120)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    ran = [tuple(o) for out in outputs for o in json.loads(out.splitlines()[-1])]

    db = Database(database_target)
    try:
        jobs = db.query("SELECT id, type, status FROM events ORDER BY id")
        per_event = db.query(
            "SELECT event_id, COUNT(*) AS n FROM llm_calls WHERE event_id IS NOT NULL "
            "GROUP BY event_id"
        )
        versions = db.query("SELECT part, COUNT(*) AS n FROM profiles GROUP BY part")
    finally:
        db.close()
    types = Counter(j["type"] for j in jobs)
    assert types["profile_core"] == TURNS // 2
    assert sorted(event_id for event_id, _, _ in ran) == [j["id"] for j in jobs]  # each once
    assert {j["status"] for j in jobs} == {"done", "failed"}
    callers = Counter(r.caller for r in server.requests("/api/chat"))
    for job in ("consolidate", "profile_adaptive", "profile_core"):
        assert callers[job] == types[job], f"{job}: {callers[job]} calls for {types[job]} jobs"
    assert all(r["n"] == 1 for r in per_event)
    assert {r["part"]: r["n"] for r in versions} == {
        "adaptive": types["profile_adaptive"],
        "core": types["profile_core"],
    }


def _enqueue(db: Database, claimed_by: str, until: str | None) -> int:
    queue = EventQueue(db)
    conversation = db.new_conversation("ada")
    event_id = queue.enqueue(conversation, None, "consolidate", {"memory_id": 1, "turn_id": 1})
    with db.transaction() as c:
        c.execute(
            "UPDATE events SET status = 'running', claimed_by = ?, claimed_until = ? WHERE id = ?",
            (claimed_by, until, event_id),
        )
    return event_id


def test_a_claim_whose_process_died_is_taken_again(db: Database) -> None:
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    host = claimant().rsplit(":", 1)[0]
    event_id = _enqueue(db, f"{host}:{finished.stdout.strip()}", "9999-01-01T00:00:00+00:00")
    claimed = EventQueue(db).claim(("consolidate",))
    assert claimed is not None and claimed.id == event_id
    row = db.one("SELECT status, claimed_by FROM events WHERE id = ?", (event_id,))
    assert row == {"status": "running", "claimed_by": claimant()}


def test_a_live_claim_holds_until_its_lease_runs_out(db: Database) -> None:
    event_id = _enqueue(db, "another-host:1", "9999-01-01T00:00:00+00:00")
    queue = EventQueue(db)
    assert queue.claim(("consolidate",)) is None  # held by a process we cannot see
    with db.transaction() as c:
        c.execute(
            "UPDATE events SET claimed_until = '2000-01-01T00:00:00.000+00:00' WHERE id = ?",
            (event_id,),
        )
    claimed = queue.claim(("consolidate",))
    assert claimed is not None and claimed.id == event_id
    assert queue.claim(("consolidate",)) is None  # now ours, and claimed once
