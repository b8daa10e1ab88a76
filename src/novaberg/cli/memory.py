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
    help="What Nova remembers about you, and your control over it.",
    no_args_is_help=True,
)

UserOpt = Annotated[str | None, typer.Option("--user", "-u", help="Whose memory (NOVABERG_USER).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON.")]
LIMIT = 10_000


def _open(user: str | None) -> tuple[Any, str]:
    from novaberg.cli.common import guarded, load
    from novaberg.storage.db import Database

    settings = guarded(lambda: load(user).settings)
    return guarded(lambda: Database(settings.database, settings.timeouts.database_s)), settings.user


def _store(user: str | None) -> tuple[Any, str]:
    from novaberg.memory.store import MemoryStore

    db, who = _open(user)
    return MemoryStore(db), who


def _print(items: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(items, ensure_ascii=False))
        return
    if not items:
        typer.echo("Nova remembers nothing here.")
    for item in items:
        status = "" if item.get("valid_to") is None else f", superseded {item['valid_to']}"
        when = f" on {item['happens_on']}" if item.get("happens_on") else ""
        typer.echo(
            f"[{item['id']}] {item['kind']}{when}: {item['text']}  (importance "
            f"{item['importance']:.2f}, from {item['item_key']}{status})"
        )


@app.command("list")
def list_cmd(
    user: UserOpt = None,
    as_json: JsonOpt = False,
    kind: Annotated[
        str | None, typer.Option(help="Only short_term, long_term or event items.")
    ] = None,
) -> None:
    """Every memory of the user (superseded facts included, marked), newest first."""
    store, who = _store(user)
    _print([m.view() for m in store.items(who, kind=kind, limit=LIMIT)], as_json)


@app.command()
def search(query: str, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """What Nova would recall for QUERY, best first, with the reason for each."""
    from novaberg.memory.retrieval import Retriever

    store, who = _store(user)
    found = Retriever(store, budget_tokens=100_000, max_items=50).retrieve(who, query)
    items = [{**r.item.view(), "score": round(r.score, 3), "reason": r.reason} for r in found]
    _print(items, as_json)
    if not as_json:
        for r in found:
            typer.echo(f"  [{r.item.id}] why: {r.reason}")


@app.command()
def show(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """One memory, with the turn and message it came from."""
    store, who = _store(user)
    memory = store.get(who, memory_id)
    if memory is None:
        _missing(memory_id, who)
    item = memory.view()
    turn = (store.db.turn(memory.source_turn_id) if memory.source_turn_id else None) or {}
    item["source"] = {
        "turn_id": memory.source_turn_id,
        "message_id": memory.source_message_id,
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
    """Delete one memory for good: with the facts derived from it, the profile statements
    built on it, and the words of the turn it came from."""
    from novaberg.cli.common import guarded

    store, who = _store(user)
    done = guarded(lambda: store.forget(who, memory_id))
    if done is None:
        _missing(memory_id, who)
    if as_json:
        typer.echo(json.dumps({"forgotten": memory_id, **asdict(done)}))
        return
    also = [i for i in done.ids if i != memory_id]
    typer.echo(f"Forgotten: {memory_id}" + (f" (and derived items {also})" if also else ""))
    if done.profile_versions:
        typer.echo(f"  removed its statements from {done.profile_versions} profile version(s)")
    if done.turns_scrubbed:
        typer.echo(f"  erased the words of {done.turns_scrubbed} turn(s) it came from")


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


@app.command()
def profile(user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """The current profile: core (stable) and adaptive (lately), each statement with the
    memories it rests on."""
    store, who = _store(user)
    parts = {part: asdict(p) for part, p in sorted(store.profile(who).items())}
    if as_json:
        typer.echo(json.dumps(parts, ensure_ascii=False))
        return
    if not parts:
        typer.echo("No profile yet.")
    for part, p in parts.items():
        typer.echo(f"{part} (version {p['version']}, {p['created_at']}):")
        for statement in p["statements"]:
            sources = ", ".join(str(i) for i in statement["sources"]) or "no recorded source"
            typer.echo(f"  - {statement['text']}  (from {sources})")


@app.command()
def jobs(user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """The background memory jobs (consolidation, profile, timeline) and how they ended."""
    db, _ = _open(user)
    from novaberg.memory.jobs import JOB_TYPES

    marks = ", ".join("?" for _ in JOB_TYPES)
    rows = db.query(
        f"SELECT id, type, status, result, turn_id, updated_at FROM events "
        f"WHERE type IN ({marks}) ORDER BY id",
        JOB_TYPES,
    )
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False))
        return
    for r in rows:
        typer.echo(f"[{r['id']}] {r['type']} (turn {r['turn_id']}): {r['status']} {r['result']}")


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
