"""Stopping ``novaberg serve`` (a real uvicorn process) during a running turn: SIGTERM lets
the turn finish within ``server.shutdown_grace_s`` and store it whole, or aborts it after the
grace (SQLite and PostgreSQL); SIGKILL leaves a ``running`` turn that the next process marks
aborted, and a second pass (follow-up) cut off by the kill runs exactly once in the next
process (SQLite and PostgreSQL). Never a turn left ``running``, never a message without its
finished turn."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, running_nova, stopped_while_opening
from tests.test_stats import CHECK, DRAFT, OK_VOTE, said

WAIT_S = 30.0
STOPPED = (0, -signal.SIGTERM)
"""How a stopped server exits: uvicorn raises the SIGTERM it caught again after its graceful
shutdown (so the exit status says what ended it)."""


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def post_turn_in_thread(nova: Nova, message: str) -> tuple[threading.Thread, dict[str, Any]]:
    """POST /api/turns from a thread; ``outcome`` gets the status (or the transport error)."""
    outcome: dict[str, Any] = {}

    def post() -> None:
        try:
            response = httpx.post(
                f"{nova.url}/api/turns",
                json={"message": message},
                headers=nova.auth(),
                timeout=60,
            )
            outcome["status"] = response.status_code
            if response.status_code == 200:
                outcome["body"] = response.json()
        except httpx.HTTPError as exc:
            outcome["error"] = type(exc).__name__

    thread = threading.Thread(target=post)
    thread.start()
    return thread, outcome


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, str | None]]:
    """NOVABERG_HOME and the PostgreSQL URL the server uses (None: SQLite in the home)."""
    home = tmp_path / "home"
    if request.param == "sqlite":
        yield home, None
        return
    server = request.getfixturevalue("postgres_server")
    url = create_database(server)
    try:
        yield home, url
    finally:
        drop_database(server, url)


def rows(db_target: Path | str, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    db = Database(db_target)
    try:
        return db.query(sql, params)
    finally:
        db.close()


def nothing_half_written(target: Path | str) -> None:
    """No turn left running; every message belongs to a finished (done) turn."""
    assert rows(target, "SELECT id FROM turns WHERE status = 'running'") == []
    orphans = rows(
        target,
        "SELECT m.id FROM messages m JOIN turns t ON t.id = m.turn_id WHERE t.status <> 'done'",
    )
    assert orphans == []


def test_sigterm_lets_a_running_turn_finish_within_the_grace(
    server: OllamaTestServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = {"NOVABERG_SERVER__SHUTDOWN_GRACE_S": "20"}
    with running_nova(server, home, ("ada",), extra_env=env) as nova:
        server.script("responder", Reply(content="Late but whole.", delay_s=1.5))
        thread, outcome = post_turn_in_thread(nova, "Tell me slowly")
        wait_for(lambda: bool(server.requests(caller="responder")), "the responder call")
        nova.proc.send_signal(signal.SIGTERM)
        thread.join(WAIT_S)
        assert nova.proc.wait(WAIT_S) in STOPPED
    assert outcome.get("status") == 200, outcome
    assert outcome["body"]["reply"] == "Late but whole."
    target = home / "novaberg.db"
    [turn] = rows(target, "SELECT id, status FROM turns")
    assert turn["status"] == "done" and turn["id"] == outcome["body"]["turn_id"]
    stored = rows(target, "SELECT role, content FROM messages WHERE turn_id = ?", (turn["id"],))
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "Tell me slowly"),
        ("assistant", "Late but whole."),
    ]
    nothing_half_written(target)


def test_sigterm_aborts_a_turn_still_running_after_the_grace(
    server: OllamaTestServer, store: tuple[Path, str | None]
) -> None:
    home, database = store
    target = database or home / "novaberg.db"
    env = {"NOVABERG_SERVER__SHUTDOWN_GRACE_S": "1"}
    with running_nova(server, home, ("ada",), extra_env=env, database=database) as nova:
        server.script("responder", Reply(content="Too late.", delay_s=20))
        thread, outcome = post_turn_in_thread(nova, "Take your time")
        wait_for(lambda: bool(server.requests(caller="responder")), "the responder call")
        stopped = time.monotonic()
        nova.proc.send_signal(signal.SIGTERM)
        assert nova.proc.wait(WAIT_S) in STOPPED
        took = time.monotonic() - stopped
        thread.join(WAIT_S)
    assert took < 10, f"the process took {took:.1f} s to stop with a 1 s grace"
    assert outcome.get("status") != 200, outcome
    [turn] = rows(target, "SELECT id, status, error FROM turns")
    assert turn["status"] == "aborted"
    assert rows(target, "SELECT id FROM messages") == []
    calls = rows(target, "SELECT caller, outcome FROM llm_calls WHERE turn_id = ?", (turn["id"],))
    assert ("responder", "error") in {(c["caller"], c["outcome"]) for c in calls}
    nothing_half_written(target)


def test_sigkill_during_a_second_pass_the_next_process_aborts_it_and_runs_it_once(
    server: OllamaTestServer, store: tuple[Path, str | None]
) -> None:
    """A last resort schedules a second pass; the process is killed while that pass waits for
    its responder. The next process marks the killed turn aborted and runs the second pass
    again, once: one delivered follow-up, stored whole."""
    home, database = store
    target = database or home / "novaberg.db"
    server.standing("router", CHECK)
    server.standing("salience", said({"score": 0.1, "summary": ""}))
    for judge in ("legal", "psychology", "persona"):
        server.standing(f"judge_{judge}", OK_VOTE)
    server.script(
        "responder",
        Reply(content=DRAFT),
        Reply(content="never sent", delay_s=60),  # the second pass: killed while waiting
        Reply(content="A second look: 2,962 m."),  # the second pass, run again
    )
    server.script(
        "thinker",
        Reply.thinking_swallowed_answer("Hmm, prose only."),
        Reply(content="RESULT: OK"),
    )
    server.script("thinker_nachfass", Reply(content="still prose"), Reply(content="more prose"))
    with running_nova(server, home, ("ada",), database=database) as nova:
        thread, _ = post_turn_in_thread(nova, "How high is the Zugspitze?")
        wait_for(lambda: len(server.requests(caller="responder")) == 2, "the second pass")
        nova.proc.send_signal(signal.SIGKILL)
        nova.proc.wait(WAIT_S)
        thread.join(WAIT_S)
    [first, killed] = rows(target, "SELECT id, origin, status FROM turns ORDER BY id")
    assert (first["origin"], first["status"]) == ("user", "done")
    assert (killed["origin"], killed["status"]) == ("self_trigger", "running")
    [event] = rows(target, "SELECT id, status FROM events WHERE type = 'self_trigger'")
    assert event["status"] == "running"

    with running_nova(server, home, ("bob",), database=database):

        def delivered() -> bool:
            found = rows(target, "SELECT status FROM events WHERE id = ?", (event["id"],))
            return found[0]["status"] == "delivered"

        wait_for(delivered, "the second pass to be delivered")
        wait_for(
            lambda: not rows(target, "SELECT id FROM turns WHERE status = 'running'"),
            "the killed turn to be marked",
        )
    turns = rows(target, "SELECT id, origin, status, parent_turn_id, error FROM turns ORDER BY id")
    assert [(t["origin"], t["status"]) for t in turns] == [
        ("user", "done"),
        ("self_trigger", "aborted"),
        ("self_trigger", "done"),
    ]
    assert turns[1]["id"] == killed["id"]
    assert turns[2]["parent_turn_id"] == first["id"]
    followups = rows(
        target,
        "SELECT role, content FROM messages WHERE turn_id = ? ORDER BY id",
        (turns[2]["id"],),
    )
    assert [(m["role"], m["content"]) for m in followups] == [
        ("assistant", "A second look: 2,962 m.")
    ]
    [result] = rows(target, "SELECT status, result FROM events WHERE id = ?", (event["id"],))
    assert result["result"] == f"follow-up in turn {turns[2]['id']}"
    assert len(server.requests(caller="responder")) == 3  # the pass ran once more, not twice
    nothing_half_written(target)
    assert server.pending() == {}


def test_sigterm_while_the_server_starts_before_a_silent_backend_stops_it_in_seconds(
    tmp_path: Path,
) -> None:
    """The Ollama server accepts the connection and never answers: opening waits for its
    capabilities no longer than ``timeouts.connect_s`` (5 s), so SIGTERM during the start ends
    the server in seconds, not after the model call's timeout (600 s here), and cleanly."""
    returncode, out, errors = stopped_while_opening(tmp_path, "serve", "--port", "0")
    assert returncode in STOPPED, errors
    assert out.startswith("novaberg serve: http://127.0.0.1:")
    assert "Traceback" not in errors and "startup failed" not in errors, errors
