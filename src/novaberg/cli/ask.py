"""``novaberg ask``: one turn, printed as text or as the contract's JSON."""

from __future__ import annotations

import asyncio
import sys

import typer

from novaberg.cli.common import err_console, guarded, load, setup_logging
from novaberg.cli.safe import dumps, echo, styled


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
                err_console.print(styled(("notice:", "yellow"), " ", notice))
            result = await engine.run_turn(text, conversation_id=conversation)
            if as_json:
                typer.echo(dumps(result.contract_json()))
            else:
                echo(result.reply)
                for followup in result.followups:  # Nova's second look, after a blank line
                    echo()
                    echo(followup.reply)
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
