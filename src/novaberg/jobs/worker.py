"""The work no request asks for, done every ``server.poll_s`` by each ``novaberg serve`` and
each ``novaberg worker`` process over the shared database:

- a turn left ``running`` by a dead process of this host is marked ``aborted`` (a turn is
  stored whole or not at all, so it has no messages to clean up);
- memory jobs waiting in the event queue run (another process may have enqueued them, or died
  running them);
- second passes (self-triggers) whose turn ended without running them run
  (:meth:`~novaberg.engine.Engine.resume_self_triggers`);
- proactive messages that came due are sent (:mod:`novaberg.proactive.sender`).

Every event is claimed before it runs (:meth:`~novaberg.jobs.events.EventQueue.claim`: an atomic
``UPDATE … RETURNING`` whose inner select takes ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so
with several processes on one PostgreSQL each runs once. On SQLite, one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket

from novaberg.engine import Engine
from novaberg.engine.service import TurnService
from novaberg.errors import NovabergError, error_kind
from novaberg.jobs.events import alive
from novaberg.proactive.sender import Outcome, send_due
from novaberg.storage import turns
from novaberg.storage.db import Database

log = logging.getLogger("novaberg")

SENDING = 64
"""Sweeps whose proactive messages may still be sending while the next sweep starts (their
turns run at background priority: on a busy server each takes as long as the queue makes it
wait, and a message that comes due meanwhile must not wait for them)."""
SETTLE_S = 2.0
"""A second pass is taken over only this long after its turn ended: a live process drains its
own turn's second pass at once, and keeps the follow-up in the same response."""


def abort_orphaned_turns(db: Database) -> list[int]:
    """Mark aborted the turns left ``running`` by a process of this host that is gone; return
    their ids. A turn of another host's process is left alone (its liveness is unknown here)."""
    host = socket.gethostname()
    aborted = []
    for turn in turns.running_turns(db):
        owner, _, pid = turn.runner.rpartition(":")
        if owner != host or not pid.isdigit() or int(pid) == os.getpid() or alive(int(pid)):
            continue
        if turns.abort_running(db, turn.id, "the process running it ended before the turn did"):
            aborted.append(turn.id)
            log.warning("turn %d: its process is gone; marked aborted", turn.id)
    return aborted


class Sweeper:
    """Runs :meth:`once` every ``interval_s`` as a task of the event loop. ``service``: the
    turn service the proactive messages' turns are admitted by (the server's; a worker's
    own by default)."""

    def __init__(
        self, engine: Engine, interval_s: float, service: TurnService | None = None
    ) -> None:
        self.engine = engine
        self.interval_s = interval_s
        self.service = service if service is not None else TurnService(engine)
        self._task: asyncio.Task[None] | None = None
        self._sending: set[asyncio.Task[list[Outcome]]] = set()

    async def once(self) -> None:
        engine = self.engine
        await engine.db.run(abort_orphaned_turns, engine.db)
        engine.start_background()  # no-op while a runner task is going
        await engine.resume_self_triggers(SETTLE_S)
        self._send_due()

    def _send_due(self) -> None:
        """The proactive messages due now, sent in a task of their own: the next sweep does
        not wait for their turns (under load a turn takes seconds), so a message that comes
        due meanwhile is claimed at that sweep, not after them. At most :data:`SENDING` such
        tasks at once."""
        if len(self._sending) >= SENDING:
            return
        task = asyncio.create_task(send_due(self.engine, self.service))
        self._sending.add(task)
        task.add_done_callback(self._sent)

    def _sent(self, task: asyncio.Task[list[Outcome]]) -> None:
        self._sending.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("sending proactive messages failed (%s); trying again", error_kind(exc))

    async def forever(self) -> None:
        while True:
            try:
                await self.once()
            except NovabergError as exc:
                log.error("looking for waiting work failed (%s); trying again", error_kind(exc))
            await asyncio.sleep(self.interval_s)

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.forever())

    async def stop(self) -> None:
        """Stop looking; a second pass or a proactive message's turn running now is cancelled
        (stored as aborted, its event claimable again)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        sending = list(self._sending)
        for task in sending:
            task.cancel()
        await asyncio.gather(*sending, return_exceptions=True)
