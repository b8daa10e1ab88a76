"""``novaberg stats``: how often each defence fired, over the recorded calls, turns and events."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from novaberg.cli.common import guarded, load
from novaberg.cli.safe import SafeConsole, dumps, styled

if TYPE_CHECKING:
    from novaberg.stats import Stats

FAULTS = ("error", "timeout", "truncated")
"""Outcomes that are failures of the request, not defences that fired."""


def run_stats(*, since: str, as_json: bool, user: str | None) -> None:
    from novaberg.stats import parse_since

    window = guarded(lambda: parse_since(since))
    stats = guarded(lambda: _collect(window, user))
    if as_json:
        typer.echo(dumps(stats.contract_json()))
        return
    _print(stats, since)


def _collect(window: Any, user: str | None) -> Stats:
    from novaberg.stats import collect
    from novaberg.storage.db import Database

    settings = load(user).settings  # refuses a blank --user, like every command
    db = Database(settings.database, settings.timeouts.database_s)
    try:
        return collect(db, window, user)
    finally:
        db.close()


def _rate(n: int, total: int) -> str:
    return f"{n} ({100 * n / total:.0f}%)" if total else str(n)


def _print(stats: Stats, since: str) -> None:
    console = SafeConsole()
    whose = f" of user {stats.user}" if stats.user is not None else ""
    if stats.empty:
        hint = (
            f" There are older records: try a longer --since than {since}."
            if stats.older_records
            else " Run a turn (novaberg chat or novaberg ask) and look again."
        )
        console.print(styled(f"Nothing recorded yet{whose} in the last {since.strip()}.", hint))
        return
    console.print(
        styled(
            ("How often each defence fired", "bold"),
            f"{whose} since {stats.since:%Y-%m-%d %H:%M} UTC (the last {since.strip()})",
        )
    )
    calls = Table(title="Model calls (one per request sent, retries included)")
    for column in ("caller", "backend", "calls", "p50 ms", "p95 ms", "outcomes"):
        calls.add_column(column, justify="right" if "ms" in column or column == "calls" else "left")
    for c in stats.calls:
        view = c.view()
        seen = [(o, n) for o, n in view["outcomes"].items() if n]
        outcomes = styled(
            *[
                piece
                for i, (o, n) in enumerate(seen)
                for piece in (
                    ", " if i else "",
                    (f"{o} {_rate(n, c.count)}", _style(o)),
                )
            ]
        )
        calls.add_row(
            c.caller,
            c.backend,
            str(c.count),
            f"{view['p50_ms']:.1f}",
            f"{view['p95_ms']:.1f}",
            outcomes,
        )
    if stats.calls:
        console.print(calls)
    else:
        console.print("Model calls: none in this window.")
    total_turns = sum(stats.turns.values())
    turns = ", ".join(f"{s} {_rate(n, total_turns)}" for s, n in stats.turns.items())
    console.print(styled(("Turns: ", "bold"), turns or "none"))
    thinker = ", ".join(f"{r} {n}" for r, n in stats.thinker.items())
    console.print(styled(("Thinker results: ", "bold"), thinker or "the thinker did not run"))
    console.print(
        styled(
            ("Follow-up calls (thinker_nachfass): ", "bold"),
            f"{stats.followup_calls} in {stats.followup_turns} turn(s)",
        )
    )
    resorts = sum(stats.last_resorts.values())
    passes = ", ".join(f"{s} {n}" for s, n in stats.last_resorts.items())
    console.print(
        styled(
            ("Last resorts: ", "bold"),
            str(resorts),
            f" (second passes: {passes})" if passes else "",
        )
    )
    if stats.corrections:
        judges = Table(title="Tribunal: corrections per judge")
        for column in ("judge", "votes", "revise", "corrections", "abstained", "malformed"):
            judges.add_column(column, justify="left" if column == "judge" else "right")
        for name, j in stats.corrections.items():
            judges.add_row(
                name,
                str(j.votes),
                _rate(j.revise, j.votes),
                str(j.corrections),
                str(j.abstained),
                str(j.malformed),
            )
        console.print(judges)
    if stats.jobs:
        statuses = sorted({s for by in stats.jobs.values() for s in by})
        jobs = Table(title="Background jobs by outcome")
        jobs.add_column("job")
        for status in statuses:
            jobs.add_column(status, justify="right")
        for kind, by in stats.jobs.items():
            jobs.add_row(kind, *(str(by.get(s, 0)) for s in statuses))
        console.print(jobs)
    else:
        console.print(styled(("Background jobs: ", "bold"), "none"))
    sent = ", ".join(f"{s} {n}" for s, n in sorted(stats.proactive.items()))
    why = ", ".join(f"{k} {n}" for k, n in sorted(stats.dropped.items()))
    console.print(
        styled(
            ("Proactive messages: ", "bold"),
            sent or "none",
            f" (dropped: {why})" if why else "",
        )
    )


def _style(outcome: str) -> str:
    if outcome == "ok":
        return "green"
    return "red" if outcome in FAULTS else "yellow"
