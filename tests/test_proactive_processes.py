"""Proactive messages across processes (issue 26): two ``novaberg worker`` processes on one
PostgreSQL database, each sweeping every 0.2 s, send every due reminder exactly once (each
claim is ``FOR UPDATE SKIP LOCKED``; the turn that writes a message marks it sent in its own
transaction); a worker killed (SIGKILL) between its claim and its store loses no message and
sends none twice. Real processes over the Ollama test server."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from novaberg.proactive import schedule
from novaberg.proactive.when import When
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import novaberg_env

USERS = ("ada", "bob", "cyd")
EACH = 4


def _worker(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "novaberg", "worker"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop(workers: list[subprocess.Popen[str]]) -> None:
    for w in workers:
        if w.poll() is None:
            w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


def test_a_worker_killed_between_claim_and_store_loses_no_message_and_sends_none_twice(
    server: OllamaTestServer, postgres_server: str, tmp_path: Path
) -> None:
    server.script("responder", Reply(content="Never delivered: killed first.", delay_s=60))
    server.standing("responder", Reply(content="Your reminder: the kettle."))
    url = create_database(postgres_server)
    workers: list[subprocess.Popen[str]] = []
    db = Database(url)
    try:
        due = datetime.now(UTC) - timedelta(minutes=1)
        with db.transaction() as c:
            made = schedule.schedule(
                c, "dee", "the kettle", When(due, due.astimezone(ZoneInfo("UTC"))), cause="test"
            )
        env = novaberg_env(server.url, tmp_path / "home", url) | {
            "NOVABERG_SERVER__POLL_S": "0.2",
            "NOVABERG_TRIBUNAL__JUDGES": "",
            "NOVABERG_MEMORY__EMBEDDER": "off",
        }
        asked = len(server.requests(caller="responder"))
        workers.append(_worker(env))
        deadline = time.monotonic() + 60
        while len(server.requests(caller="responder")) == asked:  # claimed, its turn running
            assert workers[0].poll() is None, workers[0].communicate()
            assert time.monotonic() < deadline, "the first worker never wrote the message"
            time.sleep(0.05)
        assert str(db.one("SELECT status FROM events WHERE id = ?", (made,))["status"]) == (
            "running"
        )
        workers[0].send_signal(signal.SIGKILL)  # between the claim and the store
        workers[0].wait(timeout=30)
        workers.append(_worker(env))
        while (row := db.one("SELECT status FROM events WHERE id = ?", (made,)))["status"] != (
            "sent"
        ):
            assert workers[1].poll() is None, workers[1].communicate()
            assert time.monotonic() < deadline, dict(row)
            time.sleep(0.1)
        turns = db.query(
            "SELECT t.status, m.content FROM turns t LEFT JOIN messages m ON m.turn_id = t.id "
            "WHERE t.origin = 'proactive' ORDER BY t.id"
        )
        assert [(str(t["status"]), t["content"]) for t in turns] == [
            ("aborted", None),  # the killed worker's, marked by the next one, nothing stored
            ("done", "Your reminder: the kettle."),
        ]
    finally:
        db.close()
        _stop(workers)
        drop_database(postgres_server, url)


def test_two_workers_on_postgresql_send_each_due_reminder_once(
    server: OllamaTestServer, postgres_server: str, tmp_path: Path
) -> None:
    server.standing("responder", Reply(content="A reminder, as asked."))
    url = create_database(postgres_server)
    workers: list[subprocess.Popen[str]] = []
    try:
        db = Database(url)
        try:
            due = datetime.now(UTC) - timedelta(minutes=1)
            when = When(due, due.astimezone(ZoneInfo("Europe/Berlin")))
            made = []
            with db.transaction() as c:
                for user in USERS:
                    for n in range(EACH):
                        made.append(schedule.schedule(c, user, f"thing {n}", when, cause="test"))
            env = novaberg_env(server.url, tmp_path / "home", url) | {
                "NOVABERG_SERVER__POLL_S": "0.2",
                "NOVABERG_TRIBUNAL__JUDGES": "",
                "NOVABERG_MEMORY__EMBEDDER": "off",
            }
            for _ in range(2):
                workers.append(_worker(env))
            deadline = time.monotonic() + 90
            while True:
                statuses = [
                    str(r["status"])
                    for r in db.query("SELECT status FROM events WHERE type = 'proactive'")
                ]
                if statuses.count("sent") == len(made):
                    break
                assert all(w.poll() is None for w in workers), [w.communicate() for w in workers]
                assert time.monotonic() < deadline, Counter(statuses)
                time.sleep(0.1)
            turns = db.query(
                "SELECT t.id, v.user_id FROM turns t JOIN conversations v "
                "ON v.id = t.conversation_id WHERE t.origin = 'proactive'"
            )
            assert len(turns) == len(made)  # one message per reminder, none twice
            assert Counter(str(t["user_id"]) for t in turns) == dict.fromkeys(USERS, EACH)
        finally:
            db.close()
    finally:
        _stop(workers)
        drop_database(postgres_server, url)
