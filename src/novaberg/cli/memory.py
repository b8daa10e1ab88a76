"""``novaberg memory``: see, search, forget, export and import what Nova remembers.

Imports beyond Typer happen inside the commands: this module loads with every ``novaberg``
start-up."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

app = typer.Typer(
    help="What Nova remembers about you: list, search, show, forget, export, import.",
    no_args_is_help=True,
)

UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="Whose memory (NOVABERG_USER).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
LIMIT = 10_000


def _open(user: str | None) -> tuple[Any, str]:
    from novaberg.cli.common import guarded, load
    from novaberg.storage.db import Database

    settings = guarded(lambda: load(user).settings)
    return guarded(lambda: Database(settings.db_path)), settings.user


def _print(items: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(items, ensure_ascii=False))
        return
    if not items:
        typer.echo("Nova remembers nothing here.")
    for item in items:
        typer.echo(
            f"[{item['id']}] {item['text']}  (score {item['score']:.2f}, "
            f"turn {item['source_turn_id']}, {item['created_at']})"
        )


@app.command("list")
def list_cmd(user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Every memory of the user, newest first."""
    db, who = _open(user)
    _print([asdict(m) for m in db.recent_memories(who, LIMIT)], as_json)


@app.command()
def search(query: str, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Memories that contain words of QUERY."""
    db, who = _open(user)
    _print([asdict(m) for m in db.search_memories(who, query, LIMIT)], as_json)


@app.command()
def show(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """One memory, with the turn it came from."""
    db, who = _open(user)
    memory = db.memory(who, memory_id)
    if memory is None:
        _missing(memory_id, who)
    item = asdict(memory)
    turn = db.turn(memory.source_turn_id) or {}
    item["source"] = {
        "turn_id": memory.source_turn_id,
        "origin": turn.get("origin"),
        "user_text": turn.get("user_text"),
    }
    if as_json:
        typer.echo(json.dumps(item, ensure_ascii=False))
    else:
        _print([item], False)
        typer.echo(f"  from: {item['source']['user_text']!r}")


@app.command()
def forget(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Delete one memory for good."""
    from novaberg.cli.common import guarded

    db, who = _open(user)
    if not guarded(lambda: db.forget_memory(who, memory_id)):
        _missing(memory_id, who)
    typer.echo(json.dumps({"forgotten": memory_id}) if as_json else f"Forgotten: {memory_id}")


@app.command()
def export(user: UserOpt = None) -> None:
    """Everything Nova knows about the user, as JSON on stdout."""
    from novaberg.memory.transfer import export_user

    db, who = _open(user)
    typer.echo(json.dumps(export_user(db, who), ensure_ascii=False, indent=2))


@app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="An export file, or - for stdin.")],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore an export (checked whole first; nothing changes if it cannot be imported)."""
    from novaberg.cli.common import guarded
    from novaberg.memory.transfer import import_user, parse_export

    db, who = _open(user)
    raw = sys.stdin.read() if str(file) == "-" else _read(file)
    export = guarded(lambda: parse_export(raw, who))
    counts = guarded(lambda: import_user(db, export))
    typer.echo(json.dumps({"imported": counts}) if as_json else f"Imported: {counts}")


def _missing(memory_id: int, who: str) -> NoReturn:
    from novaberg.cli.common import EXIT_FAILURE, err_console

    err_console.print(f"error: there is no memory {memory_id} of user {who!r}.")
    raise typer.Exit(EXIT_FAILURE)


def _read(file: Path) -> str:
    from novaberg.cli.common import err_console

    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        err_console.print(f"usage error: cannot read {file}: {exc}")
        raise typer.Exit(2) from None
