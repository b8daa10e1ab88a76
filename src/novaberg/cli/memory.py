"""``novaberg memory``: see, search, forget, export and import what Nova remembers.

Imports beyond Typer happen inside the commands: this module loads with every ``novaberg``
start-up."""

from __future__ import annotations

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
PAGE = 1000


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
    from novaberg.cli.safe import dumps, echo

    if as_json:
        typer.echo(dumps(items))
        return
    if not items:
        echo("Nova remembers nothing here.")
    for item in items:
        status = "" if item.get("valid_to") is None else f", superseded {item['valid_to']}"
        when = f" on {item['happens_on']}" if item.get("happens_on") else ""
        echo(
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
    limit: Annotated[int, typer.Option(min=1, help="Items per page at most.")] = PAGE,
    offset: Annotated[int, typer.Option(min=0, help="Skip this many of the newest items.")] = 0,
) -> None:
    """Every memory of the user (superseded facts included, marked), newest first, a page at a
    time; when there is more, stderr says how to get the next page."""
    store, who = _store(user)
    page = store.items(who, kind=kind, limit=limit + 1, offset=offset)
    more = len(page) > limit
    _print([m.view() for m in page[:limit]], as_json)
    if more:
        from novaberg.cli.common import err_console

        err_console.print(
            f"more: items {offset + 1}–{offset + limit} shown, there are more; "
            f"the next page: --offset {offset + limit}"
        )


@app.command()
def search(query: str, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """What Nova would recall for QUERY, best first, with the reason for each."""
    import asyncio

    from novaberg.cli.common import err_console, guarded, load
    from novaberg.cli.safe import dumps, echo
    from novaberg.engine.memory_pages import HeardView
    from novaberg.memory.retrieval import SEARCH_MESSAGES, Heed, recall

    settings = guarded(lambda: load(user).settings)
    store, who = _store(user)
    result = guarded(
        lambda: asyncio.run(
            recall(
                store.db, settings, who, query, max_items=50, budget_tokens=100_000,
                what="memory search", messages=Heed(SEARCH_MESSAGES),
            )
        )
    )  # fmt: skip
    for notice in result.notices:
        err_console.print(f"notice: {notice}", markup=False, highlight=False)
    found = result.items
    items = [{**r.item.view(), "score": round(r.score, 3), "reason": r.reason} for r in found]
    said = [HeardView.of(h).model_dump() for h in result.heard]
    if as_json:  # the items, then the messages (kind "message", with message_id)
        typer.echo(dumps([*items, *said]))
        return
    if items or not said:
        _print(items, False)
    for r in found:
        echo(f"  [{r.item.id}] why: {r.reason}")
    for m in said:
        who_said = "you" if m["role"] == "user" else "Nova"
        echo(f"[message {m['message_id']}] {who_said}, {m['said_at'][:10]}: {m['text']}")
        echo(f"  why: {m['reason']}")


@app.command()
def show(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """One memory, with the turn and message it came from, and its history (each version,
    newest first: what replaced it and why)."""
    from novaberg.cli.safe import dumps, echo
    from novaberg.engine.memory_pages import VersionView
    from novaberg.storage.turns import source_of

    store, who = _store(user)
    memory = store.get(who, memory_id)
    if memory is None:
        _missing(memory_id, who)
    item = memory.view()
    turn = source_of(store.db, memory.source_turn_id) if memory.source_turn_id else None
    item["source"] = {
        "turn_id": memory.source_turn_id,
        "message_id": memory.source_message_id,
        "origin": None if turn is None else turn.origin,
        "user_text": None if turn is None else turn.user_text,
    }
    item["history"] = [VersionView.of(v).model_dump() for v in store.history(who, memory_id)]
    if as_json:
        typer.echo(dumps(item))
    else:
        _print([item], False)
        echo(f"  from: {item['source']['user_text']!r}")
        if len(item["history"]) > 1:
            echo("  history, newest first:")
            for v in item["history"]:
                until = f" until {v['valid_to']} ({v['ended']})" if v["valid_to"] else " (current)"
                echo(f"    [{v['id']}] {v['text']}  from {v['valid_from']}{until}; {v['why']}")


@app.command()
def correct(memory_id: int, text: str, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Replace what memory ID says by TEXT: the new version becomes current, the old one is
    kept in the memory's history (memory show) until forgotten."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo

    store, who = _store(user)
    new = guarded(lambda: store.correct(who, memory_id, text))
    if new is None:
        _missing(memory_id, who)
    if as_json:
        typer.echo(dumps(new.view()))
        return
    echo(f"Corrected: {memory_id} is now [{new.id}] {new.text}")


@app.command()
def retract(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """End memory ID with no successor (it is wrong, or no longer true): never recalled as
    current again, kept in its history (memory show) until forgotten."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo

    store, who = _store(user)
    ended = guarded(lambda: store.retract(who, memory_id))
    if ended is None:
        _missing(memory_id, who)
    if as_json:
        typer.echo(dumps(ended.view()))
        return
    echo(f"Retracted: {memory_id} (valid until {ended.valid_to})")


@app.command()
def forget(memory_id: int, user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """Delete one memory for good: with the facts derived from it, the profile statements
    built on it, and the words of the turn it came from."""
    from novaberg.cli.common import guarded
    from novaberg.cli.safe import dumps, echo

    store, who = _store(user)
    done = guarded(lambda: store.forget(who, memory_id))
    if done is None:
        _missing(memory_id, who)
    if as_json:
        typer.echo(dumps({"forgotten": memory_id, **asdict(done)}))
        return
    also = [i for i in done.ids if i != memory_id]
    echo(f"Forgotten: {memory_id}" + (f" (and derived items {also})" if also else ""))
    if done.profile_versions:
        echo(f"  removed its statements from {done.profile_versions} profile version(s)")
    if done.turns_scrubbed:
        echo(f"  erased the words of {done.turns_scrubbed} turn(s) it came from")


@app.command()
def export(user: UserOpt = None) -> None:
    """Everything Nova knows about the user, as JSON on stdout."""
    from novaberg.cli.safe import dumps
    from novaberg.memory.transfer import export_user

    db, who = _open(user)
    typer.echo(dumps(export_user(db, who).model_dump(mode="json"), indent=2))


@app.command("import")
def import_cmd(
    file: Annotated[Path, typer.Argument(help="An export file, or - for stdin.")],
    user: UserOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Restore an export (checked whole first; nothing changes if it cannot be imported)."""
    from novaberg.cli.common import err_console, guarded, load
    from novaberg.cli.safe import dumps, echo
    from novaberg.memory.transfer import embed_imported, import_user, parse_export

    db, who = _open(user)
    # bytes: invalid UTF-8 in a text becomes U+FFFD (counted), not a codec error
    raw = sys.stdin.buffer.read() if str(file) == "-" else _read(file)
    export = guarded(lambda: parse_export(raw, who))
    counts = guarded(lambda: import_user(db, export))
    _, notice = guarded(lambda: embed_imported(db, guarded(lambda: load(user).settings), who))
    if notice:
        err_console.print(f"notice: {notice}", markup=False, highlight=False)
    if as_json:
        typer.echo(dumps({"imported": counts}))
        return
    for line in import_sentences(counts):
        echo(line)


@app.command()
def profile(user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """The current profile: core (stable) and adaptive (lately), each statement with the
    memories it rests on."""
    from novaberg.cli.safe import dumps, echo

    store, who = _store(user)
    parts = {part: asdict(p) for part, p in sorted(store.profile(who).items())}
    if as_json:
        typer.echo(dumps(parts))
        return
    shown = {part: p for part, p in parts.items() if p["statements"]}
    if not shown:
        echo("No profile yet: Nova has not written down anything about you.")
    for part, p in shown.items():
        echo(f"{part} (version {p['version']}, {p['created_at']}):")
        for statement in p["statements"]:
            sources = ", ".join(str(i) for i in statement["sources"]) or "no recorded source"
            echo(f"  - {statement['text']}  (from {sources})")


@app.command()
def jobs(user: UserOpt = None, as_json: JsonOpt = False) -> None:
    """The background memory jobs (consolidation, profile, timeline) and how they ended."""
    from novaberg.cli.safe import dumps, echo
    from novaberg.memory.jobs import JOB_TYPES
    from novaberg.storage.events import jobs_of

    db, who = _open(user)
    rows = jobs_of(db, who, JOB_TYPES)  # the user's own, as GET /api/memory/jobs
    if as_json:
        typer.echo(dumps([asdict(r) for r in rows]))
        return
    for r in rows:
        echo(f"[{r.id}] {r.type} (turn {r.turn_id}): {r.status} {r.result}")


@app.command()
def reindex(
    user: Annotated[
        str | None, typer.Option("--user", "-u", help="Only this user's items (default: all).")
    ] = None,
    embedder: Annotated[
        str | None, typer.Option(help="Embedder to compute (default: the one memory uses).")
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Drop that embedder's vectors, compute all again.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Compute the vectors that search by meaning lacks (after a change of embedder or model,
    or for items stored without one), in batches, with a progress bar."""
    from novaberg.cli.reindex import command

    command(user, embedder, rebuild, as_json)


IMPORT_SENTENCES = {
    "memories": ("Imported {n} memory item(s).", "No new memory items (all were there already)."),
    "profile": ("Imported {n} profile version(s).", "No new profile versions."),
    "truncated": ("{n} text(s) were over the length limit and were truncated.", ""),
    "invalid_utf8": ("{n} text(s) had invalid UTF-8, replaced by U+FFFD.", ""),
}


def import_sentences(counts: dict[str, int]) -> list[str]:
    """What an import did, a sentence per count (counts nobody named here included)."""
    lines = []
    for key, n in counts.items():
        some, none = IMPORT_SENTENCES.get(key, (f"{key.replace('_', ' ')}: {{n}}.", ""))
        if n or none:
            lines.append(some.format(n=n) if n else none)
    return lines


def _missing(memory_id: int, who: str) -> NoReturn:
    from novaberg.cli.common import EXIT_FAILURE, err_console

    err_console.print(f"error: there is no memory {memory_id} of user {who!r}.")
    raise typer.Exit(EXIT_FAILURE)


def _read(file: Path) -> bytes:
    from novaberg.cli.common import err_console

    try:
        return file.read_bytes()
    except OSError as exc:
        err_console.print(f"usage error: cannot read {file}: {exc}")
        raise typer.Exit(2) from None
