"""``novaberg chat``: the REPL. One event loop for the session (``asyncio.Runner``), so Ctrl-C
during a reply cancels just that turn; at the prompt it ends the chat."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.status import Status

from novaberg.cli.common import err_console, guarded, load, setup_logging
from novaberg.errors import NovabergError

if TYPE_CHECKING:
    from novaberg.engine import Engine

NODE_LABELS = {
    "router": "reading your message",
    "enricher": "remembering",
    "responder": "answering",
    "thinker": "checking facts",
    "tribunal": "judging the answer",
    "corrector": "correcting",
    "salience": "weighing what matters",
    "memory_write": "storing memories",
}


class TurnView:
    """Shows the running node on a live line, then the streamed reply."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.status: Status | None = None
        self.streaming = False
        self.streamed: list[str] = []

    def progress(self, node: str) -> None:
        label = f"[dim]Nova · {node}: {NODE_LABELS.get(node, node)}…[/]"
        if not self.live:
            return
        if self.streaming:  # the draft is on screen; the review goes on below it
            self.console.print()
            self.streaming = False
        if self.status is None:
            self.status = self.console.status(label, spinner="dots")
            self.status.start()
        else:
            self.status.update(label)

    def token(self, piece: str) -> None:
        if not self.streaming:
            self.stop_status()
            self.streaming = True
            self.console.print("[bold magenta]Nova ›[/] ", end="")
        self.streamed.append(piece)
        self.console.print(piece, end="", markup=False, highlight=False, soft_wrap=True)

    def stop_status(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def finish(self, reply: str) -> None:
        """End the turn on screen; a reply the tribunal revised is shown in full below the draft."""
        self.stop_status()
        if self.streaming:
            self.console.print()
        shown = "".join(self.streamed).strip()
        final = reply.strip()
        if not shown:
            self.console.print(f"[bold magenta]Nova ›[/] {reply}", highlight=False)
        elif final.startswith(shown) and final != shown:  # something was appended (a gesture)
            self.console.print(
                f"[bold magenta]Nova ›[/] {final[len(shown) :].strip()}", highlight=False
            )
        elif shown != final:
            self.console.print(
                f"[dim](revised after review)[/]\n[bold magenta]Nova ›[/] {reply}", highlight=False
            )


def _read(console: Console) -> str | None:
    try:
        return console.input("[bold cyan]you ›[/] ") if console.is_terminal else input("you › ")
    except EOFError:
        return None


def run_chat(*, conversation: int | None, resume: bool, user: str | None, verbose: bool) -> None:
    setup_logging(verbose)
    console = Console()
    settings = guarded(lambda: load(user).settings)
    with asyncio.Runner() as runner:
        from novaberg.engine import Engine

        engine: Engine = guarded(lambda: runner.run(Engine.open(settings)))
        try:
            for notice in engine.notices:
                err_console.print(f"[yellow]notice:[/] {notice}", highlight=False)
            current = conversation
            if current is None and resume:
                current = engine.db.latest_conversation(settings.user)
            console.print(
                f"[dim]Nova on {engine.chain.primary.name}/{engine.chain.primary.model} — "
                "/new starts over, /exit leaves.[/]"
            )
            _loop(runner, engine, console, current)
            _finish_memory_work(runner, engine, console)
        finally:
            runner.run(engine.aclose())


async def _start_background(engine: Engine) -> None:
    """Memory jobs go on in this loop while the next turn runs, at background priority."""
    engine.start_background()


def _finish_memory_work(runner: asyncio.Runner, engine: Engine, console: Console) -> None:
    """Let the memory jobs of the last turns finish; Ctrl-C leaves them for next time."""
    if not engine.background_pending():
        return
    console.print("[dim]Nova is sorting her memories (Ctrl-C leaves that for next time)…[/]")
    try:
        runner.run(engine.finish_background())
    except KeyboardInterrupt:
        console.print("[dim]Left for next time; nothing is lost.[/]")


def _loop(runner: asyncio.Runner, engine: Engine, console: Console, current: int | None) -> None:
    while True:
        try:
            line = _read(console)
        except KeyboardInterrupt:
            console.print()
            return
        if line is None or line.strip() in ("/exit", "/quit"):
            return
        if line.strip() == "/new":
            current = None
            console.print("[dim]New conversation.[/]")
            continue
        if not line.strip():
            continue
        view = TurnView(console)
        try:
            result = runner.run(
                engine.run_turn(
                    line, conversation_id=current, on_token=view.token, on_progress=view.progress
                )
            )
        except KeyboardInterrupt:
            view.stop_status()
            console.print(
                "\n[yellow]Turn aborted: recorded as aborted, nothing half-stored. "
                "Go on whenever you like.[/]"
            )
            continue
        except NovabergError as exc:
            view.stop_status()
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False)
            continue
        current = result.conversation_id
        runner.run(_start_background(engine))
        view.finish(result.reply)
        for followup in result.followups:  # Nova's second look, in her own words
            console.print(f"[bold magenta]Nova ›[/] {followup['reply']}", highlight=False)
        sys.stdout.flush()
