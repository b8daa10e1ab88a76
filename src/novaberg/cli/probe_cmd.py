"""``novaberg probe``: which of the seeds' faults does this server and model show?

A progress bar while the experiments run (on stderr with ``--json``), then a table with a
verdict per fault, or, with ``--json``, exactly the contract object. Every foreign text (a model
name, a server's error) is printed through the safe console, never as markup.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from novaberg.cli.common import err_console, guarded, load, setup_logging
from novaberg.cli.safe import SafeConsole, dumps, styled
from novaberg.errors import UsageError

if TYPE_CHECKING:
    from novaberg.probe.result import ExperimentResult, ProbeReport
    from novaberg.probe.runner import ProbeBackend

BACKENDS = ("ollama", "openai")


class _Bar:
    """The runner's progress as a Rich progress bar, shown once the experiments start (a
    server that cannot be probed gets its error message alone)."""

    def __init__(self, console: SafeConsole) -> None:
        self.progress = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("Probing", total=None)
        self.started = False

    def planned(self, total: int) -> None:
        self.progress.update(self.task, total=total)
        self.progress.start()
        self.started = True

    def advanced(self) -> None:
        self.progress.advance(self.task)

    def close(self) -> None:
        if self.started:
            self.progress.stop()


def _backend(name: str | None) -> ProbeBackend | None:
    if name is None:
        return None
    lowered = name.lower()
    if lowered == "ollama":
        return "ollama"
    if lowered == "openai":
        return "openai"
    raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, not {name!r}.")


async def _probe(
    backend: str | None, model: str | None, trials: int, timeout_s: float, console: SafeConsole
) -> ProbeReport:
    from novaberg.probe.runner import run_probe
    from novaberg.storage.db import Database

    settings = load().settings
    chosen = _backend(backend)
    if trials < 1:
        raise UsageError("--trials must be at least 1.")
    db = await asyncio.to_thread(Database, settings.database, settings.timeouts.database_s)
    bar = _Bar(console)
    try:
        return await run_probe(
            settings,
            db,
            backend=chosen,
            model=model,
            trials=trials,
            timeout_s=timeout_s,
            progress=bar,
        )
    finally:
        bar.close()
        await asyncio.to_thread(db.close)


def run_probe_cmd(
    *,
    backend: str | None,
    model: str | None,
    trials: int,
    timeout_s: float,
    as_json: bool,
    verbose: bool,
) -> None:
    setup_logging(verbose)
    console = SafeConsole(stderr=as_json)
    try:
        report = guarded(lambda: asyncio.run(_probe(backend, model, trials, timeout_s, console)))
    except KeyboardInterrupt:
        err_console.print("interrupted: the probe stopped; nothing of this run was stored.")
        raise typer.Exit(130) from None
    if as_json:
        typer.echo(dumps(report.contract_view()))
        return
    show(report, SafeConsole())


def show(report: ProbeReport, console: SafeConsole) -> None:
    """The run as a heading, a table with a verdict per fault, and what to do next."""
    console.print(
        styled(
            "Probed ",
            (f"{report.backend}/{report.model}", "bold"),
            f": {report.requests} requests, {report.answered} answered, "
            f"in {report.wall_s:.1f} s (stored as probe run {report.run_id}).",
        )
    )
    if report.capabilities is not None:
        caps = ", ".join(report.capabilities) or "none"
        console.print(styled("Capabilities as reported: ", caps))
    for notice in report.notices:
        console.print(styled(("notice:", "yellow"), " ", notice))
    table = Table()
    for column in ("experiment", "trials", "counts"):
        table.add_column(column)
    for result in report.experiments:
        table.add_row(result.name, str(result.trials), _counts(result))
    console.print(table)
    console.print(styled(("Verdicts", "bold")))
    for result in report.experiments:
        for line in _verdicts(result):
            console.print(line)
    context = next((e for e in report.experiments if e.name == "truncation"), None)
    if context is not None and not context.skipped:
        console.print(_context_line(context))


def _counts(result: ExperimentResult) -> Text | str:
    if result.skipped:
        return styled(("skipped: ", "yellow"), result.reason)
    text = ", ".join(f"{key} {value}" for key, value in result.counts.items())
    return text + (f", no answer {result.errors}" if result.errors else "")


def _verdicts(result: ExperimentResult) -> list[Text]:
    if result.skipped:
        return [
            styled("  • ", (result.name, "bold"), " — ", ("skipped: ", "yellow"), result.reason)
        ]
    lines = []
    for v in result.verdicts:
        style = "red" if v.seen and v.fault != "latency" else ""
        lines.append(styled("  • ", (result.name, "bold"), " — ", v.fault, ": ", (v.text, style)))
    return lines


def _context_line(result: ExperimentResult) -> Text:
    detail = result.detail

    def say(value: object) -> str:
        return "not reported" if value is None else f"{value} tokens"

    measured = detail.get("effective_context")
    if measured:
        found: tuple[str, str] | str = (f"measured {measured} tokens", "bold")
    elif result.counts.get("refused"):
        found = "the server refused the oversized prompt"
    else:
        found = "the whole prompt was read"
    return styled(
        "Context: ",
        found,
        f"; asked for {detail.get('window')} (limits.context_tokens)",
        f"; /api/show claims {say(detail.get('claimed_context'))}",
        f"; loaded with {say(detail.get('loaded_context'))} (/api/ps).",
    )
