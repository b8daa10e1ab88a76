"""Running waiting memory jobs as a task beside the turns of this process (at background
priority in the shared model queue); which jobs a new item gets is
:mod:`novaberg.memory.job_policy`.

The jobs themselves live in :mod:`novaberg.memory.jobs`; each gets a fresh
:class:`~novaberg.memory.job_context.JobContext` and runs for the user whose conversation
enqueued it, so nothing here is tied to one user.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from typing import TYPE_CHECKING

from novaberg import otel
from novaberg.config import Settings
from novaberg.errors import NovabergError, error_kind
from novaberg.jobs.events import EventQueue
from novaberg.memory.job_context import JobContext
from novaberg.queue import ModelQueue
from novaberg.storage.db import Database
from novaberg.switching import short_turns

if TYPE_CHECKING:
    from novaberg.memory.jobs import JobOutcome

log = logging.getLogger("novaberg")


def warm_dateparser() -> None:
    """dateparser's first call loads its language data (about 300 ms of CPU, compiling its
    patterns): :meth:`BackgroundJobRunner.warm` runs this in a thread with the first memory
    jobs, with short turns at the interpreter's lock (:func:`~novaberg.switching.short_turns`),
    so that a turn running beside it is not held up at every hand-over of the lock."""
    from datetime import UTC, datetime

    from novaberg.memory.jobs import date_expressions, resolve_date

    at = datetime.now(UTC)
    with short_turns():
        for language in ("en", "de"):
            date_expressions("tomorrow at noon", at, language)
            resolve_date("next Friday", at, language)


def import_jobs() -> None:
    """The jobs' code (:mod:`novaberg.memory.jobs`: about 20 ms of the interpreter in a fresh
    process, mostly defining its pydantic models), with short turns at the interpreter's lock."""
    with short_turns():
        importlib.import_module("novaberg.memory.jobs")


def _report_background_failure(task: asyncio.Task[list[JobOutcome]]) -> None:
    """A job failure is recorded by the job; this catches what stopped the whole runner (an
    unusable database, say): its jobs stay pending and run next time."""
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        assert exc is not None
        log.error("memory jobs stopped (%s); they run again next time", error_kind(exc))


class BackgroundJobRunner:
    """Runs the memory jobs waiting in the event queue, at most one runner task at a time."""

    def __init__(
        self, settings: Settings, queue: ModelQueue, db: Database, events: EventQueue
    ) -> None:
        self.settings = settings
        self.queue = queue
        self.db = db
        self.events = events
        self._task: asyncio.Task[list[JobOutcome]] | None = None
        self._dateparser: asyncio.Task[None] | None = None
        self._imported: asyncio.Task[None] | None = None

    def prepare(self) -> None:
        """Import the jobs' code in a thread (:func:`import_jobs`), once a process. The engine
        calls this as a turn starts, so that it is done beside the router's call: left to the
        first run of the jobs, a fresh ``novaberg ask`` spent it between the turn's last model
        call and the first job's (issue 21). Not when the engine opens: that would be before
        the first request. A failed import shows where the jobs are run."""
        if self._imported is None and self.settings.memory.jobs:
            self._imported = asyncio.create_task(asyncio.to_thread(import_jobs))
            self._imported.add_done_callback(lambda t: t.cancelled() or t.exception())

    def warm(self) -> asyncio.Task[None]:
        """dateparser's warm-up (:func:`warm_dateparser`), started once. Not when the engine
        opens: beside the first turn's model calls it slowed the sending of each by about
        90 ms at 200 ms per call (issue 21), short turns at the interpreter's lock or not (what
        holds the lock that long is most likely its pattern compiling, calls into C that a
        switch interval does not split). Nor beside the first memory job: ``consolidate``
        embeds its fact after its model call, and on two cores the warm-up thread held that
        up by 40-70 ms, a gap before the next job's call. :meth:`run` starts it after the
        first job, beside the profile jobs' model calls; the timeline job, enqueued last,
        awaits it (:meth:`dates`). A turn itself does not use dateparser."""
        if self._dateparser is None:
            self._dateparser = asyncio.create_task(asyncio.to_thread(warm_dateparser))
        return self._dateparser

    async def dates(self) -> None:
        """dateparser ready: the warm-up started if it was not, and awaited (a failure is
        left to show where dateparser is used)."""
        self.warm()
        await self.warmed()

    async def warmed(self) -> None:
        """Wait for the warm-up and the import, where started (a thread cannot be stopped)."""
        for started in (self._dateparser, self._imported):
            if started is not None:
                with contextlib.suppress(Exception):  # a failure shows where it is used
                    await asyncio.shield(started)

    def job_context(self) -> JobContext:
        """A fresh context (its own trace) for one job."""
        return JobContext(
            settings=self.settings,
            queue=self.queue,
            db=self.db,
            events=self.events,
            dates_ready=self.dates,
        )

    def start(self) -> None:
        """Start running waiting memory jobs as a task of this event loop (if none runs)."""
        if not self.settings.memory.jobs:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run())
            self._task.add_done_callback(_report_background_failure)

    def pending(self) -> bool:
        """Whether a runner task is going, or a job is waiting to be run. Sync: it queries
        the database, so call it off the event loop (the chat asks between turns)."""
        from novaberg.memory.jobs import JOB_TYPES

        running = self._task is not None and not self._task.done()
        return self.settings.memory.jobs and (
            running or bool(self.events.unfinished(JOB_TYPES, limit=1))
        )

    async def finish(self) -> list[JobOutcome]:
        """Wait for the running jobs, then run whatever is still waiting."""
        done: list[JobOutcome] = []
        if self._task is not None:
            done += await self._task
            self._task = None
        return done + await self.run()

    async def run(self, limit: int = 100) -> list[JobOutcome]:
        """Run the memory jobs waiting in the event queue (background priority)."""
        from novaberg.memory.jobs import BackgroundJobs

        if not self.settings.memory.jobs:
            return []
        jobs = BackgroundJobs(self.job_context)
        # dateparser's warm-up after the first job, beside the next one's model call
        return await otel.background(jobs.run_pending(limit, between=self.warm))

    async def cancel(self) -> None:
        """Stop the running task; its event stays 'running' and is redone next time."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, NovabergError):
                await self._task
