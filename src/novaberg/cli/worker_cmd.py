"""``novaberg worker``: the background work of ``novaberg serve`` without HTTP — memory jobs,
second passes (self-triggers) and turns a dead process left running — from the shared
database, every ``server.poll_s`` (:class:`novaberg.jobs.worker.Sweeper`), until SIGTERM or Ctrl-C.

Several workers and servers may share one PostgreSQL database: every event is claimed before
it runs (``FOR UPDATE SKIP LOCKED``), so each runs once. On SQLite, run one process: the
server alone (it does the same work) or one worker beside ``novaberg chat``/``ask``.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import TYPE_CHECKING

import typer

from novaberg.cli.common import guarded, load, setup_logging

if TYPE_CHECKING:
    from novaberg.config import Settings
    from novaberg.engine import Engine


async def _open_unless_stopped(settings: Settings, stop: asyncio.Event) -> Engine | None:
    """The engine, or None when ``stop`` is set first: opening waits for the backend (up to
    its timeouts), and SIGTERM or Ctrl-C meanwhile cancels it (the engine closes what it had
    opened) rather than waiting or killing the process."""
    from novaberg.engine import Engine

    opening = asyncio.create_task(Engine.open(settings))
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait((opening, stopping), return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    if opening.done():
        return opening.result()
    opening.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await opening
    return None


async def _work(stop: asyncio.Event) -> None:
    # first of all: a SIGTERM while the engine opens (seconds on a busy machine, longer with a
    # backend that does not answer) is a clean stop, not a death by the signal
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    from novaberg.jobs.worker import Sweeper

    settings = load().settings
    engine = await _open_unless_stopped(settings, stop)
    if engine is None:
        typer.echo("novaberg worker: stopped while starting")
        return
    sweeper = Sweeper(engine, settings.server.poll_s)
    typer.echo(f"novaberg worker: running (database {engine.db.where})")
    sys.stdout.flush()
    sweeper.start()
    try:
        await stop.wait()
    finally:
        await sweeper.stop()  # a second pass cut off here is stored as aborted
        await sweeper.service.finish(settings.server.shutdown_grace_s)  # a proactive turn
        await engine.aclose()  # its events released: others may take them at once


def run_worker(*, verbose: bool) -> None:
    setup_logging(verbose)
    guarded(lambda: asyncio.run(_work(asyncio.Event())))
