"""``novaberg users``: the server's users and their API keys (add, list, revoke).

Imports beyond Typer happen inside the commands: this module loads with every ``novaberg``
start-up."""

from __future__ import annotations

from typing import Annotated, Any

import typer

app = typer.Typer(
    help="Users of `novaberg serve` and their API keys (a key is shown once, only its hash "
    "is stored).",
    no_args_is_help=True,
)

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _users() -> Any:
    from novaberg.cli.common import guarded, load
    from novaberg.storage.api_users import UserStore
    from novaberg.storage.db import Database

    settings = guarded(lambda: load().settings)
    db = guarded(lambda: Database(settings.database, settings.timeouts.database_s))
    return UserStore(db)


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="The user's name (like --user).")],
    as_json: JsonOpt = False,
    frontend: Annotated[
        bool,
        typer.Option(
            "--frontend",
            help="A front-end's key (e.g. Open WebUI): it may name its end users, each then a "
            "user NAME/ID of their own.",
        ),
    ] = False,
) -> None:
    """Add a user and print their new API key, once (only its hash is stored)."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo

    store = _users()
    try:
        key = guarded(lambda: store.add(name, frontend=frontend))
    finally:
        store.db.close()
    if as_json:
        typer.echo(dumps({"user": name, "key": key}))
        return
    echo(key)
    echo(
        "This key is shown once; only its hash is stored. Send it as: Authorization: Bearer KEY",
        err=True,
    )
    if frontend:
        echo(
            f"A front-end's key: each end user it names (X-OpenWebUI-User-Id, or the signed "
            f"X-OpenWebUI-User-Jwt when NOVABERG_FRONTEND_JWT_SECRET is set) is the user "
            f"{name}/ID, with their own memory.",
            err=True,
        )


@app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List the users, whether each key is a front-end's, and which are revoked."""
    from novaberg.cli.safe import dumps, echo

    store = _users()
    try:
        users = store.list()
    finally:
        store.db.close()
    rows = [
        {
            "user": u.name,
            "frontend": u.frontend,
            "created_at": u.created_at,
            "revoked_at": u.revoked_at,
        }
        for u in users
    ]
    if as_json:
        typer.echo(dumps(rows))
        return
    if not rows:
        echo("No users yet: novaberg users add NAME")
    for u in users:
        state = f"revoked {u.revoked_at}" if u.revoked_at else "active"
        kind = " (frontend)" if u.frontend else ""
        echo(f"{one_line_name(u.name)}{kind}: {state}, key issued {u.created_at}")


def one_line_name(name: str) -> str:
    """A user name as one line shows it: as it is, or quoted with its escapes when it holds
    a character that does not show (a name stored before such names were refused)."""
    from novaberg.storage.api_users import MAX_NAME_CHARS
    from novaberg.text import invisible_at, quoted

    return name if invisible_at(name) is None else quoted(name, limit=MAX_NAME_CHARS)


@app.command("revoke")
def revoke(name: Annotated[str, typer.Argument(help="The user whose key to revoke.")]) -> None:
    """Revoke a user's key: the server refuses it from its next request on."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import echo

    store = _users()
    try:
        guarded(lambda: store.revoke(name))
    finally:
        store.db.close()
    echo(f"Revoked the key of {name}.")
