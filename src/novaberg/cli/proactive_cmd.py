"""``novaberg proactive``: the messages Nova will write first — set a reminder, see what is
scheduled and why, cancel one, switch them on or off (all, or one kind).

Imports beyond Typer happen inside the commands: this module loads with every ``novaberg``
start-up."""

from __future__ import annotations

from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Messages Nova writes first (reminders): set, list, cancel, switch on or off.",
    no_args_is_help=True,
)

UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="Whose (NOVABERG_USER).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
KindArg = Annotated[
    str | None, typer.Argument(help="reminder | event | checkin | followup (default: all).")
]


def _open(user: str | None) -> tuple[Any, Any]:
    from novaberg.cli.common import guarded, load
    from novaberg.storage.db import Database

    settings = guarded(lambda: load(user).settings)
    return guarded(lambda: Database(settings.database, settings.timeouts.database_s)), settings


def _line(s: Any) -> str:
    repeat = f", repeats {s.repeat}" if s.repeat else ""
    reason = f" ({s.reason})" if s.reason and s.status != "scheduled" else ""
    return f"[{s.id}] {s.kind} {s.status}{reason}, due {s.local}{repeat}: {s.text}  ({s.cause})"


@app.command()
def remind(
    text: Annotated[str, typer.Argument(help="What to remind you of.")],
    at: Annotated[
        str,
        typer.Option(
            "--at",
            help="When: ISO 8601 (2026-06-02T09:00) or words ('tomorrow at 9', 'on Friday at "
            "18:00', 'every Monday at 8:30'), in proactive.timezone.",
        ),
    ],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Set a reminder: Nova writes to you when it is due (sent by novaberg serve or worker)."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo
    from novaberg.proactive.schedule import remind as set_reminder
    from novaberg.proactive.when import spoken

    db, settings = _open(user)
    try:
        made = guarded(
            lambda: set_reminder(
                db, settings, settings.user, text, at, cause="novaberg proactive remind"
            )
        )
    finally:
        db.close()
    if as_json:
        typer.echo(dumps({"id": made.id, "due_at": made.due_at}))
        return
    from datetime import datetime

    echo(f"Reminder {made.id}: {spoken(datetime.fromisoformat(made.local), settings.language)}.")


@app.command("list")
def list_cmd(
    every: Annotated[
        bool, typer.Option("--all", help="Also what was sent, dropped or cancelled.")
    ] = False,
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What Nova will write first, soonest first, each with its cause.

    With --all also what was sent, dropped (and why) or cancelled."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo
    from novaberg.proactive.schedule import listing, switches

    db, settings = _open(user)
    try:
        found = guarded(lambda: listing(db, settings.user, everything=every))
        on = guarded(lambda: switches(db, settings.user))
    finally:
        db.close()
    if as_json:
        typer.echo(dumps({"scheduled": [s.view() for s in found], "switches": on}))
        return
    if not found:
        echo("Nothing is scheduled.")
    for s in found:
        echo(_line(s))
    off = [kind for kind, enabled in on.items() if not enabled]
    if off:
        echo(f"Off: {', '.join(off)} (novaberg proactive on).", err=True)


@app.command()
def cancel(event_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Cancel scheduled message ID (it stays listed under --all, as cancelled)."""
    from novaberg.cli.common import EXIT_FAILURE, err_console, guarded
    from novaberg.cli.safe import dumps, echo
    from novaberg.proactive.schedule import cancel as cancel_one

    db, settings = _open(user)
    try:
        done = guarded(lambda: cancel_one(db, settings.user, event_id))
    finally:
        db.close()
    if done is None:
        err_console.print(f"error: there is no scheduled message {event_id} of {settings.user}.")
        raise typer.Exit(EXIT_FAILURE)
    if as_json:
        typer.echo(dumps(done.view()))
        return
    echo(f"Cancelled: {_line(done)}")


def _switch(enabled: bool, kind: str | None, user: str | None) -> None:
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import echo
    from novaberg.proactive.schedule import switch

    db, settings = _open(user)
    try:
        guarded(lambda: switch(db, settings.user, enabled, kind))
    finally:
        db.close()
    what = f"{kind} messages" if kind else "Proactive messages"
    echo(f"{what[0].upper()}{what[1:]} {'on' if enabled else 'off'} for {settings.user}.")


@app.command()
def on(kind: KindArg = None, user: UserOpt = None) -> None:
    """Let Nova write first again (all kinds, or one)."""
    _switch(True, kind, user)


@app.command()
def off(kind: KindArg = None, user: UserOpt = None) -> None:
    """Stop Nova writing first (all kinds, or one): what comes due meanwhile is dropped."""
    _switch(False, kind, user)
