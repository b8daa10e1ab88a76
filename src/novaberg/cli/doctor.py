"""``novaberg doctor``: which backend would answer, is it reachable, what to fix."""

from __future__ import annotations

import asyncio
from dataclasses import asdict
from typing import Any

import typer
from rich.table import Table

from novaberg.cli.common import EXIT_FAILURE, guarded, load
from novaberg.cli.safe import SafeConsole, dumps, styled


async def _diagnose() -> dict[str, Any]:
    from novaberg.backends.select import build_chain

    settings = load().settings
    notices: list[str] = []
    chain = await build_chain(settings, notices)
    try:
        statuses = [await backend.status() for backend in chain.backends]
    finally:
        await chain.aclose()
    fixes = [f"{s.name}: {s.fix}" for s in statuses if s.fix]
    database = await asyncio.to_thread(_database, settings)  # the database off the loop
    if not database["ok"]:
        fixes.append(f"database: {database['detail']}")
    vectors = database.pop("vectors", None)
    if vectors is not None:
        fixes.extend(f"memory search by meaning: {fix}" for fix in vectors["fixes"])
    files = await asyncio.to_thread(_private_files, settings)
    speech = _speech(settings)
    mcp = await _mcp_servers(settings)
    fixes.extend(f"MCP server {s['name']}: {s['failure']}" for s in mcp if s["failure"])
    fixes.extend(f"private files: {fix}" for fix in files["fixes"])  # a warning, not a failure
    return {
        "mode": settings.backend,
        "would_answer": f"{chain.primary.name}/{chain.primary.model}",
        "notices": notices,
        "backends": [asdict(s) for s in statuses],
        "database": database,
        "vectors": vectors,
        "files": files,
        "speech": speech,
        "mcp": mcp,
        "fixes": fixes,
        "ok": statuses[0].reachable and not statuses[0].fix and database["ok"],
    }


def _database(settings: Any) -> dict[str, Any]:
    """Open the database (applying migrations) and count what it holds for this user."""
    from novaberg.errors import StorageError
    from novaberg.storage import counts
    from novaberg.storage.db import Database

    try:
        db = Database(settings.database, settings.timeouts.database_s)
    except StorageError as exc:
        return {"where": "?", "ok": False, "detail": str(exc)}
    try:
        memories = counts.memories_of(db, settings.user)
        waiting = counts.jobs_waiting(db)
        return {
            "where": f"{db.dialect}: {db.where}",
            "ok": True,
            "detail": f"{memories} memories of {settings.user!r}, {waiting} memory jobs waiting",
            "vectors": _vectors(settings, db),
        }
    finally:
        db.close()


def _private_files(settings: Any) -> dict[str, Any]:
    """The modes of the home, its config.toml (which may hold keys) and the database files in
    it (those that exist): which ones other accounts on this machine can open, and the
    ``chmod`` that fixes each. PostgreSQL keeps no database file here: only the home and
    config.toml are looked at then."""
    from novaberg.storage.private import exposed, file_modes, sqlite_files

    paths = [settings.home, settings.config_file]
    if settings.database_url is None:
        paths += sqlite_files(settings.db_path)
    found = file_modes(paths)
    fixes = exposed(found)
    checked = [{"path": str(f.path), "mode": f.shown_mode, "private": f.private} for f in found]
    return {"private": not fixes, "checked": checked, "fixes": fixes}


async def _mcp_servers(settings: Any) -> list[dict[str, Any]]:
    """Each configured MCP server (``mcp.servers``): started here once, whether it started
    (or why not) and its tools as the thinker gets them; then stopped."""
    from novaberg.tools.mcp_servers import McpServers

    servers = McpServers(settings.mcp)
    try:
        await servers.tools()
        return [asdict(s) for s in servers.report()]
    finally:
        await servers.aclose()


def _print_mcp(console: SafeConsole, servers: list[dict[str, Any]]) -> None:
    """One line per MCP server: its tools, or why it did not start."""
    for s in servers:
        state = (", ".join(s["tools"]) or "no tools", "") if s["started"] else (s["failure"], "red")
        console.print(styled(f"MCP server {s['name']} ({s['transport']}): ", state))


def _speech(settings: Any) -> dict[str, Any]:
    """The speech engines of each language and what each lacks here (none is loaded: voice
    is optional, so a missing one is said, not a failure)."""
    from novaberg.speech.engines import Engines

    engines = [asdict(e) for e in Engines(settings.speech).describe()]
    for engine in engines:
        del engine["loaded"]
    return {"language": settings.language, "engines": engines}


def _print_speech(console: SafeConsole, speech: dict[str, Any]) -> None:
    """One line per engine of Nova's language: what hears and speaks it, or what to install."""
    for e in speech["engines"]:
        if e["language"] != speech["language"]:
            continue
        verb = "hears" if e["kind"] == "listen" else "speaks"
        state = ("ready", "") if e["missing"] is None else (e["missing"], "yellow")
        note = f" ({e['note']})" if e["note"] else ""
        console.print(
            styled(
                f"Speech ({e['language']}): {verb} with {e['name']} {e['model']}{note} — ", state
            )
        )


def _print_files(console: SafeConsole, files: dict[str, Any]) -> None:
    """One line: are the home and its database files for this account only."""
    if not files["checked"]:
        return
    shown = ", ".join(f"{c['path']} {c['mode']}" for c in files["checked"])
    state = ("private", "") if files["private"] else ("other accounts can open some", "yellow")
    console.print(styled("Files: ", state, " — ", shown))


def _vectors(settings: Any, db: Any) -> dict[str, Any]:
    """The vector index: what serves search by meaning, each embedder's vectors, and what
    lacks one (without loading an embedder)."""
    from novaberg.cli.reindex import current_embedder
    from novaberg.embedders import NAMES, runtime_of
    from novaberg.embedders.minilm import ONNX_HINT
    from novaberg.storage.vectors import open_vector_index

    index = open_vector_index(db)
    fixes = [index.notice] if index.notice else []
    current = current_embedder(settings)
    spaces = [
        {"embedder": s.embedder, "dim": s.dim, "vectors": s.vectors, "indexed": s.indexed}
        for s in index.stats()
    ]
    runtime = None
    if current in NAMES:
        runtime = runtime_of(current)
        if runtime == "numpy":
            fixes.append(
                f"{current} runs in numpy, slower than in onnxruntime, which cannot be imported "
                f"here: {ONNX_HINT}"
            )
    elif current is not None:
        runtime = "backend"
    lacking = len(index.missing(current, limit=10**9)) if current else 0
    if lacking:
        fixes.append(
            f"{lacking} memory item(s) have no vector of {current}: run `novaberg memory "
            "reindex` (they are found by their words only until then)"
        )
    return {
        "mode": index.mode,
        "embedder": current,
        "runtime": runtime,
        "spaces": spaces,
        "missing": lacking,
        "notice": index.notice,
        "fixes": fixes,
    }


def run_doctor(*, as_json: bool) -> None:
    report = guarded(lambda: asyncio.run(_diagnose()))
    if as_json:
        typer.echo(dumps(report))
    else:
        console = SafeConsole()
        console.print(
            styled(
                "Backend mode: ",
                (report["mode"], "bold"),
                " — would answer: ",
                (report["would_answer"], "bold"),
            )
        )
        for notice in report["notices"]:
            console.print(styled(("notice:", "yellow"), " ", notice))
        table = Table()
        for column in ("backend", "model", "reachable", "capabilities", "detail"):
            table.add_column(column)
        for b in report["backends"]:
            table.add_row(
                b["name"],
                b["model"],
                "yes" if b["reachable"] else styled(("no", "red")),
                ", ".join(b["capabilities"]),
                b["detail"],
            )
        console.print(table)
        database = report["database"]
        state = ("ok", "") if database["ok"] else ("not usable", "red")
        console.print(
            styled("Database: ", database["where"], " — ", state, " — ", database["detail"])
        )
        vectors = report["vectors"]
        if vectors is not None:
            held = ", ".join(
                f"{s['embedder']} ({s['dim']} numbers): {s['vectors']}" for s in vectors["spaces"]
            )
            console.print(
                styled(
                    "Search by meaning: ",
                    (vectors["mode"], "bold"),
                    f" — embedder {vectors['embedder'] or 'off'}"
                    + (f" ({vectors['runtime']})" if vectors["runtime"] else "")
                    + f" — vectors: {held or 'none yet'}",
                )
            )
        _print_files(console, report["files"])
        _print_speech(console, report["speech"])
        _print_mcp(console, report["mcp"])
        if report["fixes"]:
            console.print(styled(("What to fix:", "bold")))
            for fix in report["fixes"]:
                console.print(f"  • {fix}")
        else:
            console.print(styled(("Nothing to fix.", "green")))
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILURE)
