"""``novaberg worker``: the background work of ``novaberg serve`` without HTTP — memory jobs,
second passes (self-triggers) and turns a dead process left running — from the shared
database, every ``server.poll_s`` (:class:`novaberg.worker.Sweeper`), until SIGTERM or Ctrl-C.

Several workers and servers may share one PostgreSQL database: every event is claimed before
it runs (``FOR UPDATE SKIP LOCKED``), so each runs once. On SQLite, run one process: the
server alone (it does the same work) or one worker beside ``novaberg chat``/``ask``.
"""

from __future__ import annotations

import asyncio
import signal
import sys

import typer

from novaberg.cli.common import guarded, load, setup_logging


async def _work(stop: asyncio.Event) -> None:
    # first of all: a SIGTERM while the engine opens (seconds on a busy machine) is a clean
    # stop once it is open, not a death by signal
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    from novaberg.engine import Engine
    from novaberg.worker import Sweeper

    settings = load().settings
    engine = await Engine.open(settings)
    sweeper = Sweeper(engine, settings.server.poll_s)
    typer.echo(f"novaberg worker: running (database {engine.db.where})")
    sys.stdout.flush()
    sweeper.start()
    try:
        await stop.wait()
    finally:
        await sweeper.stop()  # a second pass cut off here is stored as aborted
        await engine.background.cancel()
        await engine.db.run(engine.events.release_mine)  # others may take them at once
        await engine.aclose()


def run_worker(*, verbose: bool) -> None:
    setup_logging(verbose)
    guarded(lambda: asyncio.run(_work(asyncio.Event())))
