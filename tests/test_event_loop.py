"""No database call on the event loop (issue 9, point 6).

- With ``NOVABERG_LOOP_GUARD=1`` a query made on a thread that runs an event loop raises and
  names the call (a test's own ``async def`` may still inspect the database directly);
  ``await db.run(...)`` runs the same query in the database's worker threads.
- Each worker thread has its own connection, and what one commits the others see (SQLite and
  PostgreSQL); a write handed to a worker is not cut off when its caller is cancelled.
- Under load (turns, memory jobs with dateparser's first call, a forget, and another writer
  holding SQLite's write lock for 4 s) the event loop of a fresh process is never kept from
  running for long: measured by a ticker task that sleeps 5 ms again and again
  (``tests/loop_stall_worker.py``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import cast

import pytest

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.errors import StorageError
from novaberg.storage.db import LOOP_GUARD_ENV, Database
from novaberg.testing import OllamaTestServer, Reply

WORKER = Path(__file__).with_name("loop_stall_worker.py")


@pytest.fixture
def guarded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Database:
    monkeypatch.setenv(LOOP_GUARD_ENV, "1")
    return Database(tmp_path / "guarded.db")


# -- (a) the guard -----------------------------------------------------------------------------
async def test_a_query_from_a_callback_on_the_loop_raises_and_names_the_call(
    guarded: Database,
) -> None:
    loop = asyncio.get_running_loop()
    raised: list[BaseException] = []
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: raised.append(context["exception"]))
    try:  # the product's own method as the callback: no test code between it and the loop
        loop.call_soon(functools.partial(guarded.scalar, "SELECT count(*) FROM conversations"))
        await asyncio.sleep(0.01)
    finally:
        loop.set_exception_handler(handler)
    [error] = raised
    assert isinstance(error, StorageError)
    message = str(error)
    assert message.startswith("database call on the event loop: Database.scalar(")
    assert "SELECT count(*) FROM conversations" in message
    assert "await db.run" in message
    guarded.close()


async def test_a_query_made_inside_a_product_coroutine_raises(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``on_start`` runs inside Engine._run on the loop: a direct query there is refused,
    naming the method and the coroutine it came from."""
    monkeypatch.setenv(LOOP_GUARD_ENV, "1")
    engine = await Engine.open(settings)
    try:
        assert engine.db.loop_guard
        # the product's own method, called by Engine._run on the loop with the new turn's id
        peek = cast(Callable[[int], None], engine.db.turn)

        with pytest.raises(StorageError, match=r"event loop: Database\.one\('SELECT \* FROM turns"):
            await engine.run_turn("hello", on_start=peek)
    finally:
        await engine.aclose()


async def test_the_same_query_through_db_run_works_in_a_worker_thread(
    guarded: Database,
) -> None:
    def count() -> tuple[int, str]:
        return guarded.scalar("SELECT count(*) FROM conversations"), threading.current_thread().name

    found, thread = await guarded.run(count)
    assert found == 0
    assert thread.startswith("novaberg-db")
    assert thread != threading.current_thread().name
    await asyncio.to_thread(guarded.close)


async def test_a_test_body_may_still_inspect_the_database(guarded: Database) -> None:
    """Documented exemption: the guard looks for the async def that made the call; a test's
    own (``tests.*``) is not the product blocking its loop."""
    assert guarded.scalar("SELECT count(*) FROM conversations") == 0
    guarded.close()


def test_the_whole_suite_runs_with_the_guard(tmp_path: Path) -> None:
    """tests/conftest.py turns it on for every test and the processes they start."""
    db = Database(tmp_path / "n.db")
    assert db.loop_guard
    db.close()


def test_sync_code_without_a_loop_queries_as_before(guarded: Database) -> None:
    conversation = guarded.new_conversation("ada")
    assert guarded.conversation_user(conversation) == "ada"
    guarded.close()


# -- (c) a connection per thread ---------------------------------------------------------------
async def test_each_worker_has_its_own_connection_and_sees_the_others_commits(
    db: Database,
) -> None:
    """Two functions run at once (a barrier makes them meet), so on two workers: each writes
    and commits, then reads what the other committed; the calling thread sees both."""
    meet = threading.Barrier(2, timeout=10)

    def write_then_read(user: str, other: str) -> tuple[str, int, str | None]:
        db.new_conversation(user)
        meet.wait()  # both committed
        theirs = db.scalar(
            "SELECT user_id FROM conversations WHERE user_id = ? ORDER BY id LIMIT 1", (other,)
        )
        meet.wait()  # both read: neither worker is reused for the other function
        return threading.current_thread().name, id(db.conn), None if theirs is None else theirs

    first, second = await asyncio.gather(
        db.run(write_then_read, "ada", "bob"), db.run(write_then_read, "bob", "ada")
    )
    assert first[0] != second[0], "the two functions ran on one thread"
    assert first[1] != second[1], "two threads shared one connection"
    assert (first[2], second[2]) == ("bob", "ada")
    users = await db.run(db.query, "SELECT user_id FROM conversations ORDER BY user_id")
    assert [r["user_id"] for r in users] == ["ada", "bob"]


async def test_a_write_handed_to_a_worker_lands_even_if_its_caller_is_cancelled(
    db: Database,
) -> None:
    started, release, finished = threading.Event(), threading.Event(), threading.Event()

    def slow_write() -> int:
        started.set()
        release.wait(10)
        try:
            return db.new_conversation("ada")
        finally:
            finished.set()

    task = asyncio.create_task(db.run(slow_write))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()  # the caller is gone; the write goes on
    assert await asyncio.to_thread(finished.wait, 10)
    found = await db.run(db.scalar, "SELECT count(*) FROM conversations WHERE user_id = 'ada'")
    assert found == 1


def test_close_closes_every_threads_connection_and_run_refuses_after(tmp_path: Path) -> None:
    db = Database(tmp_path / "n.db")

    async def use() -> None:
        await asyncio.gather(*(db.run(db.scalar, "SELECT 1") for _ in range(8)))

    asyncio.run(use())
    db.scalar("SELECT 1")  # this thread's own
    opened = list(db._connections)
    assert len(opened) >= 2
    db.close()
    for c in opened:
        with pytest.raises(StorageError):
            c.execute("SELECT 1")
    with pytest.raises(StorageError, match="closed"):
        asyncio.run(db.run(db.scalar, "SELECT 1"))


# -- (b) the loop under load -------------------------------------------------------------------
MAX_STALL_MS = 1500.0
"""The bound for the longest gap between two 5 ms ticks. Measured before issue 9 (this worker
run against the engine of 02a38a5 on the project's shared 2-core machine): 4002 ms while the
other writer held the lock 4 s (a turn's write waited in SQLite's busy handler on the loop's
thread) and 1340 ms for dateparser's first call. After: 100-380 ms on the same machine at a load
of 4-12, all of it CPU contention (other processes; the GIL shared with the worker threads),
none of it a database call. Generous for a slow CI machine; the old engine still fails it."""


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


def test_the_event_loop_keeps_running_while_turns_jobs_and_a_forget_use_sqlite(
    server: OllamaTestServer, tmp_path: Path
) -> None:
    server.set_delay(0.02)
    server.script(  # a summary of its own per turn: an exact repeat is not stored twice
        "salience",
        *(said({"score": 0.9, "summary": f"The user visits sister {n}."}) for n in range(500)),
    )
    server.standing("salience", said({"score": 0.9, "summary": "The user visits the sister."}))
    server.standing("consolidate", said({"action": "new", "fact": "The user has a sister."}))
    server.standing("timeline", said({"events": [{"what": "Visit", "when": "next Friday"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("NOVABERG_")}
    env |= {
        "NOVABERG_HOME": str(tmp_path / "home"),
        "OLLAMA_HOST": server.url,
        "NOVABERG_BACKEND": "ollama",
        LOOP_GUARD_ENV: "1",  # and no database call on the loop in that process either
    }
    done = subprocess.run(
        [sys.executable, str(WORKER), "--seed", "1000", "--conversations", "3", "--turns", "2"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["turns"] == 6
    assert found["jobs"].get("timeline:done", 0) >= 1, found  # dateparser ran
    assert found["forgot"] is True
    # turns were still running when the lock was let go: their writes waited for it
    assert found["phases"]["turns"] >= found["phases"]["lock_released"], "no turn met the lock"
    assert found["max_stall_ms"] < MAX_STALL_MS, found
