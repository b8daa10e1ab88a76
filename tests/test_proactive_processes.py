"""Proactive messages across processes (issue 26): two ``novaberg worker`` processes on one
PostgreSQL database, each sweeping every 0.2 s, send every due reminder exactly once (each
claim is ``FOR UPDATE SKIP LOCKED``; the turn that writes a message marks it sent in its own
transaction). Real processes over the Ollama test server."""

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
                workers.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "novaberg", "worker"],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                    )
                )
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
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
        drop_database(postgres_server, url)
