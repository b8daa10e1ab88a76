"""``novaberg ask``: one turn, printed as text or as the contract's JSON."""

from __future__ import annotations

import asyncio
import json
import sys

import typer

from novaberg.cli.common import err_console, guarded, load, setup_logging


def run_ask(
    text: str, *, as_json: bool, conversation: int | None, user: str | None, verbose: bool
) -> None:
    setup_logging(verbose)

    async def turn() -> None:
        from novaberg.engine import Engine
        from novaberg.validation import validate_message

        settings = load(user).settings
        validate_message(text, settings)  # a usage error before any backend is touched
        engine = await Engine.open(settings)
        try:
            for notice in engine.notices:
                err_console.print(f"[yellow]notice:[/] {notice}", highlight=False)
            result = await engine.run_turn(text, conversation_id=conversation)
            payload = result.contract_json()
            if as_json:
                typer.echo(json.dumps(payload, ensure_ascii=False))
            else:
                typer.echo(str(payload["reply"]))
            sys.stdout.flush()
            # The reply is out; the memory jobs this turn enqueued run now (an interruption
            # leaves them pending for the next process: they are idempotent).
            await engine.finish_background()
        finally:
            await engine.aclose()

    try:
        guarded(lambda: asyncio.run(turn()))
    except KeyboardInterrupt:
        err_console.print("interrupted: what was not stored yet is recorded as unfinished.")
        raise typer.Exit(130) from None
