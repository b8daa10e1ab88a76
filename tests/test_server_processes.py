"""Several processes on one PostgreSQL database: two ``novaberg serve`` processes and a
``novaberg worker`` share the event queue. 20 conversations, spread over both servers, each
with a salient turn (three memory jobs) that ends in the thinker's last resort (a second
pass): every job and every second pass runs exactly once, and none is lost."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, novaberg_env, running_nova, stopped_while_opening
from tests.test_stats import CHECK, DRAFT, said

CONVERSATIONS = 20
NO_TRIBUNAL = {"NOVABERG_TRIBUNAL__JUDGES": ""}
"""Fewer calls per turn (the tribunal is not what this test is about): 20 conversations stay
quick on a small machine."""
JOB_TYPES = ("consolidate", "timeline", "profile_adaptive", "profile_core")


@pytest.fixture
def database(postgres_server: str) -> Iterator[str]:
    url = create_database(postgres_server)
    try:
        yield url
    finally:
        drop_database(postgres_server, url)


def start_worker(server: OllamaTestServer, home: Path, database: str) -> subprocess.Popen[bytes]:
    env = novaberg_env(server.url, home, database)
    env |= {"NOVABERG_SERVER__POLL_S": "0.2", **NO_TRIBUNAL}
    with (home / "worker.err").open("wb") as err:
        worker = subprocess.Popen(
            [sys.executable, "-m", "novaberg", "worker", "--verbose"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
        )
    # the turns start once the worker runs: otherwise the servers may do all the work while it
    # is still starting (a busy CI machine), and the test would not be about the worker
    assert worker.stdout is not None
    line = worker.stdout.readline().decode()
    assert line.startswith("novaberg worker: running"), (home / "worker.err").read_text()
    return worker


def rows(database: str, sql: str) -> list[dict[str, Any]]:
    db = Database(database)
    try:
        return db.query(sql)
    finally:
        db.close()


def test_two_servers_and_a_worker_run_every_job_and_second_pass_once(
    server: OllamaTestServer, tmp_path: Path, database: str
) -> None:
    # every turn: salient (memory jobs) and a last resort (a second pass)
    server.standing("router", CHECK)
    server.standing("responder", Reply(content=DRAFT))
    server.standing("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    server.standing("thinker_nachfass", Reply(content="still prose"))
    server.script(  # a summary of its own per turn: an exact repeat is not stored twice
        "salience",
        *(said({"score": 0.9, "summary": f"Asked about mountain {n}."}) for n in range(500)),
    )
    server.standing("salience", said({"score": 0.9, "summary": "Asked about a mountain."}))
    env = {"NOVABERG_SERVER__POLL_S": "0.2", **NO_TRIBUNAL}
    with ExitStack() as stack:
        servers: list[Nova] = [
            stack.enter_context(
                running_nova(server, tmp_path / name, (user,), extra_env=env, database=database)
            )
            for name, user in (("a", "ada"), ("b", "bob"))
        ]
        worker = start_worker(server, tmp_path / "w", database)
        try:

            def turn(n: int) -> int:
                nova = servers[n % 2]
                user = "ada" if n % 2 == 0 else "bob"
                response = httpx.post(
                    f"{nova.url}/api/turns",
                    json={"message": f"How high is mountain number {n}?"},
                    headers=nova.auth(user),
                    timeout=120,
                )
                assert response.status_code == 200, response.text
                return int(response.json()["turn_id"])

            with ThreadPoolExecutor(CONVERSATIONS) as pool:
                turn_ids = list(pool.map(turn, range(CONVERSATIONS)))

            deadline = time.monotonic() + 120
            while rows(database, "SELECT id FROM events WHERE status IN ('pending', 'running')"):
                assert time.monotonic() < deadline, "events left waiting"
                time.sleep(0.2)
        finally:
            worker.send_signal(signal.SIGTERM)
            worker.communicate(timeout=30)
        assert worker.returncode == 0, (tmp_path / "w" / "worker.err").read_text()

    events = rows(database, "SELECT id, turn_id, type, status, claimed_by FROM events")
    triggers = [e for e in events if e["type"] == "self_trigger"]
    jobs = [e for e in events if e["type"] in JOB_TYPES]
    # one second pass per turn, each delivered once
    assert sorted(e["turn_id"] for e in triggers) == sorted(turn_ids)
    assert {e["status"] for e in triggers} == {"delivered"}
    passes = rows(
        database,
        "SELECT parent_turn_id, status FROM turns WHERE origin = 'self_trigger'",
    )
    assert Counter(p["parent_turn_id"] for p in passes) == Counter(dict.fromkeys(turn_ids, 1))
    assert {p["status"] for p in passes} == {"done"}
    # three jobs per salient turn at least (profile_core every memory.core_every items), each
    # finished, each run once: no job has two first attempts of one caller
    per_turn = Counter(e["turn_id"] for e in jobs)
    assert set(per_turn) == set(turn_ids) and min(per_turn.values()) >= 3
    assert {e["status"] for e in jobs} <= {"done", "failed"}
    firsts = rows(
        database,
        "SELECT event_id, caller, COUNT(*) AS n FROM llm_calls WHERE event_id IS NOT NULL "
        "AND attempt = 1 GROUP BY event_id, caller",
    )
    assert [f for f in firsts if f["n"] != 1] == []
    assert {f["event_id"] for f in firsts} <= {e["id"] for e in jobs}
    # nothing left running, nothing half-written
    assert rows(database, "SELECT id FROM turns WHERE status <> 'done'") == []
    runners = Counter(str(e["claimed_by"]).rsplit(":", 1)[-1] for e in events)
    assert len(runners) >= 2, f"one process ran everything: {runners}"


def test_a_worker_told_to_stop_while_it_starts_stops_cleanly(tmp_path: Path) -> None:
    """SIGTERM while the engine opens, its backend not answering: the worker stops at once
    with exit 0, neither killed by the signal (a CI run stopped a worker still starting) nor
    waiting for the backend's timeout."""
    returncode, out, errors = stopped_while_opening(tmp_path, "worker")
    assert returncode == 0, errors
    assert out == "novaberg worker: stopped while starting\n"
