"""``novaberg eval``: the seed's result table, against whatever backend is configured."""

from __future__ import annotations

import asyncio
from dataclasses import asdict

import typer
from rich.table import Table

from novaberg.cli.common import err_console, guarded, load, setup_logging
from novaberg.cli.safe import SafeConsole, dumps, styled


def run_eval(*, as_json: bool, only: list[str] | None, verbose: bool) -> None:
    setup_logging(verbose)
    from novaberg.evals import SCENARIOS, run_all

    names = [s.name for s in SCENARIOS]
    unknown = [n for n in only or [] if n not in names]
    if unknown:
        err_console.print(
            f"usage error: unknown scenario {', '.join(unknown)}; known: {', '.join(names)}"
        )
        raise typer.Exit(2)
    settings = guarded(lambda: load().settings)

    def progress(name: str) -> None:
        err_console.print(styled((f"running {name}…", "dim")))

    rows = guarded(lambda: asyncio.run(run_all(settings, only, progress)))
    if as_json:
        typer.echo(dumps([asdict(r) for r in rows]))
        return
    table = Table(title="Situation vs. subject — this backend beside the seed's figures")
    for column in (
        "scenario",
        "rounds",
        "calls",
        "wall s",
        "votes",
        "salience",
        "drift",
        "seed before",
        "seed after",
    ):
        table.add_column(column)
    for r in rows:
        votes = ", ".join(f"{k}:{v}" for k, v in r.votes.items()) or "-"
        table.add_row(
            r.scenario,
            str(r.rounds),
            str(r.calls),
            str(r.wall_s),
            votes,
            "-" if r.salience is None else f"{r.salience:.2f}",
            "-" if r.drift is None else ("yes" if r.drift else "no"),
            r.seed_before,
            r.seed_after,
        )
    SafeConsole().print(table)
