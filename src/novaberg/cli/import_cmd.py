"""``novaberg import-chats``: another tool's chats as the user's conversations, with a progress
bar; with ``--remember`` also salience and the memory jobs over the imported user messages
(:mod:`novaberg.engine.import_remember`), the estimate of their model calls printed first."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from novaberg.cli.common import err_console, guarded, load
from novaberg.cli.safe import dumps, echo

if TYPE_CHECKING:
    from rich.progress import Progress

    from novaberg.config import Settings
    from novaberg.engine.chat_formats import Parsed
    from novaberg.engine.chat_import import Imported
    from novaberg.engine.import_remember import Estimate, Remembered


def run_import(file: str, fmt: str, user: str | None, remember: bool, as_json: bool) -> None:
    from novaberg.cli.memory import _read
    from novaberg.engine.chat_formats import parse

    settings = guarded(lambda: load(user).settings)
    parsed = guarded(lambda: parse(_read(Path(file)), fmt, name=file))
    for notice in dict.fromkeys(parsed.notices):
        echo(f"notice: {notice}", err=True)
    remembered: tuple[Estimate, Remembered] | None = None
    if remember:
        try:
            done, remembered = guarded(
                lambda: asyncio.run(_import_and_remember(settings, parsed, as_json))
            )
        except KeyboardInterrupt:
            echo(
                "Stopped. What was weighed is kept; run the same command again to go on "
                "(the chats are not imported twice).",
                err=True,
            )
            raise typer.Exit(130) from None
    else:
        done = guarded(lambda: _import(settings, parsed, as_json))
    if as_json:
        view: dict[str, Any] = dict(done.view())
        if remembered is not None:
            est, result = remembered
            view["remember"] = {
                "estimate": {"messages": est.messages, "calls": [est.calls_low, est.calls_high]},
                "weighed": result.weighed,
                "remembered": result.remembered,
                "failed": result.failed,
                "jobs": result.jobs,
            }
        typer.echo(dumps(view))
        return
    echo(
        f"Imported {done.conversations} conversation(s) with {done.messages} message(s) "
        f"({parsed.format}); {done.skipped} imported before, left as they were."
    )
    if remembered is not None:
        _, result = remembered
        failed = f", {result.failed} failed (novaberg memory jobs)" if result.failed else ""
        echo(
            f"Weighed {result.weighed} message(s): {result.remembered} remembered, "
            f"{result.jobs} memory job(s) after them{failed}."
        )


def _bar(as_json: bool) -> Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    return Progress(
        "{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=as_json,
    )


def _import(settings: Settings, parsed: Parsed, as_json: bool) -> Imported:
    from novaberg.engine.chat_import import import_chats
    from novaberg.storage.db import Database

    db = Database(settings.database, settings.timeouts.database_s)
    try:
        with _bar(as_json) as progress:
            task = progress.add_task("messages", total=parsed.messages)
            return import_chats(
                db, settings.user, parsed, advanced=lambda n: progress.advance(task, n)
            )
    finally:
        db.close()


async def _import_and_remember(
    settings: Settings, parsed: Parsed, as_json: bool
) -> tuple[Imported, tuple[Estimate, Remembered]]:
    from novaberg.engine import Engine
    from novaberg.engine.chat_import import import_chats
    from novaberg.engine.import_remember import (
        estimate,
        refuse_embedded,
        remember_imported,
        unweighed,
    )

    refuse_embedded(settings)  # before the engine loads a model
    engine = await Engine.open(settings)
    try:
        refuse_embedded(settings, engine)  # before anything is written
        user = settings.user
        with _bar(as_json) as progress:
            task = progress.add_task("messages", total=parsed.messages)
            done = await engine.db.run(
                lambda: import_chats(
                    engine.db,
                    user,
                    parsed,
                    remember=True,
                    advanced=lambda n: progress.advance(task, n),
                )
            )
        est = estimate(engine, await engine.db.run(unweighed, engine, user))
        echo(
            f"Remembering {est.messages} imported message(s) of yours: {est.calls_low} to "
            f"{est.calls_high} model calls at background priority (one salience call each, "
            "and the memory jobs of those worth remembering). Ctrl-C stops; the same command "
            "goes on where it stopped.",
            err=True,
        )
        with _bar(as_json) as progress:
            task = progress.add_task("weighed", total=est.messages)
            result = await remember_imported(
                engine, user, advanced=lambda _: progress.advance(task, 1)
            )
        return done, (est, result)
    finally:
        await engine.aclose()
