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
    database = _database(settings)
    if not database["ok"]:
        fixes.append(f"database: {database['detail']}")
    return {
        "mode": settings.backend,
        "would_answer": f"{chain.primary.name}/{chain.primary.model}",
        "notices": notices,
        "backends": [asdict(s) for s in statuses],
        "database": database,
        "fixes": fixes,
        "ok": statuses[0].reachable and not statuses[0].fix and database["ok"],
    }


def _database(settings: Any) -> dict[str, Any]:
    """Open the database (applying migrations) and count what it holds for this user."""
    from novaberg.errors import StorageError
    from novaberg.storage.db import Database

    try:
        db = Database(settings.database, settings.timeouts.database_s)
    except StorageError as exc:
        return {"where": "?", "ok": False, "detail": str(exc)}
    try:
        memories = db.scalar(
            "SELECT COUNT(*) AS n FROM memories WHERE user_id = ?", (settings.user,)
        )
        waiting = db.scalar(
            "SELECT COUNT(*) AS n FROM events WHERE status IN ('pending', 'running') "
            "AND type <> 'self_trigger'"
        )
        return {
            "where": f"{db.dialect}: {db.where}",
            "ok": True,
            "detail": f"{memories} memories of {settings.user!r}, {waiting} memory jobs waiting",
        }
    finally:
        db.close()


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
        if report["fixes"]:
            console.print(styled(("What to fix:", "bold")))
            for fix in report["fixes"]:
                console.print(f"  • {fix}")
        else:
            console.print(styled(("Nothing to fix.", "green")))
    if not report["ok"]:
        raise typer.Exit(EXIT_FAILURE)
