"""``novaberg chat``: the REPL. One event loop for the session (``asyncio.Runner``), so Ctrl-C
during a reply cancels just that turn; at the prompt it ends the chat."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner

from novaberg.cli.arrivals import Watcher, arrived
from novaberg.cli.common import err_console, guarded, load, setup_logging
from novaberg.cli.safe import SafeConsole, styled
from novaberg.cli.typeahead import TypedAhead, held, read_line
from novaberg.errors import NovabergError
from novaberg.text import is_blank

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

NOVA = styled(("Nova ›", "bold magenta"), " ")
YOU = styled(("you ›", "bold cyan"), " ")


class TurnView:
    """Shows the running node on a live line, then the streamed reply."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.live = console.is_terminal
        self.status: Live | None = None
        self.spinner = Spinner("dots")
        self.streaming = False
        self.streamed: list[str] = []

    def progress(self, node: str) -> None:
        label = styled((f"Nova · {node}: {NODE_LABELS.get(node, node)}…", "dim"))
        if not self.live:
            return
        if self.streaming:  # the draft is on screen; the review goes on below it
            self.console.print()
            self.streaming = False
        self.spinner.update(text=label)
        if self.status is None:  # shown at once, not at the next refresh (a node may be quick)
            self.status = Live(self.spinner, console=self.console, transient=True)
            self.status.start(refresh=True)
        else:
            self.status.refresh()

    def token(self, piece: str) -> None:
        if not self.streaming:
            self.stop_status()
            self.streaming = True
            self.console.print(NOVA, end="")
        self.streamed.append(piece)
        self.console.print(piece, end="", soft_wrap=True)

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
            self.console.print(NOVA + styled(reply))
        elif final.startswith(shown) and final != shown:  # something was appended (a gesture)
            self.console.print(NOVA + styled(final[len(shown) :].strip()))
        elif shown.startswith(final.removesuffix("…").rstrip()) and shown != final:
            # cut at limits.reply_chars: what was shown beyond the cut is not kept
            self.console.print(
                styled((f"(too long: Nova keeps the first {len(final)} characters)", "dim"))
            )
        elif shown != final:
            self.console.print(styled(("(revised after review)", "dim")))
            self.console.print(NOVA + styled(reply))


def _read(console: Console, ahead: TypedAhead) -> str | None:
    """The next message: one typed while the last reply streamed, else one read now."""

    def prompt() -> str:
        return console.input(YOU) if console.is_terminal else input("you › ")

    try:
        return read_line(ahead, prompt, lambda line: console.print(YOU + styled(line)))
    except EOFError:
        return None


def run_chat(*, conversation: int | None, resume: bool, user: str | None, verbose: bool) -> None:
    setup_logging(verbose)
    console = SafeConsole()
    settings = guarded(lambda: load(user).settings)
    with asyncio.Runner() as runner:
        from novaberg.engine import Engine

        engine: Engine = guarded(lambda: runner.run(Engine.open(settings)))
        try:
            for notice in engine.notices:
                err_console.print(styled(("notice:", "yellow"), " ", notice))
            current = conversation
            if current is None and resume:
                current = engine.db.latest_conversation(settings.user)
            primary = engine.chain.primary
            console.print(
                styled(
                    (
                        f"Nova on {primary.name}/{primary.model} — /new starts over, /exit leaves.",
                        "dim",
                    )
                )
            )
            runner.run(_send_due(engine))  # what came due while nothing ran, if not too late
            for text in arrived(engine.db, settings.user):  # while the chat was closed
                console.print(NOVA + styled(text))
            watcher = Watcher(
                engine.db,
                settings.user,
                settings.server.events_poll_s,
                lambda text: _arrived_at_prompt(console, text),
            )
            watcher.start()
            try:
                _loop(runner, engine, console, current)
            finally:
                watcher.stop()
            _finish_memory_work(runner, engine, console)
        finally:
            runner.run(engine.aclose())


def _arrived_at_prompt(console: Console, text: str) -> None:
    """A message Nova wrote first, printed while the prompt waits; the prompt again after."""
    console.print()
    console.print(NOVA + styled(text))
    console.print(YOU, end="")


async def _send_due(engine: Engine) -> None:
    """Send the proactive messages due now (as ``novaberg serve`` and ``worker`` do; the
    watcher prints them): a chat alone sends what came due when it starts and after each
    turn, so reminders on time need one of those running beside it."""
    from novaberg.engine.service import TurnService
    from novaberg.proactive.sender import send_due

    try:
        await send_due(engine, TurnService(engine))
    except NovabergError as exc:
        err_console.print(styled(("error:", "bold red"), " ", f"sending reminders: {exc}"))


async def _start_background(engine: Engine) -> None:
    """Memory jobs go on in this loop while the next turn runs, at background priority."""
    engine.start_background()


def _finish_memory_work(runner: asyncio.Runner, engine: Engine, console: Console) -> None:
    """Let the memory jobs of the last turns finish; Ctrl-C leaves them for next time."""
    if not engine.background_pending():
        return
    console.print(
        styled(("Nova is sorting her memories (Ctrl-C leaves that for next time)…", "dim"))
    )
    try:
        runner.run(engine.finish_background())
    except KeyboardInterrupt:
        console.print(styled(("Left for next time; nothing is lost.", "dim")))


def _loop(runner: asyncio.Runner, engine: Engine, console: Console, current: int | None) -> None:
    ahead = TypedAhead()  # what is typed while a reply streams waits for the next prompt
    while True:
        try:
            line = _read(console, ahead)
        except KeyboardInterrupt:
            console.print()
            return
        if line is None or line.strip() in ("/exit", "/quit"):
            return
        if line.strip() == "/new":
            current = None
            console.print(styled(("New conversation.", "dim")))
            continue
        if is_blank(line):  # nothing visible (zero-width characters count as nothing)
            continue
        view = TurnView(console)
        try:
            with held(ahead):  # keystrokes now are not echoed into the reply
                result = runner.run(
                    engine.run_turn(
                        line,
                        conversation_id=current,
                        on_token=view.token,
                        on_progress=view.progress,
                    )
                )
        except KeyboardInterrupt:
            view.stop_status()
            console.print()
            console.print(
                styled(
                    (
                        "Turn aborted: recorded as aborted, nothing half-stored. "
                        "Go on whenever you like.",
                        "yellow",
                    )
                )
            )
            continue
        except NovabergError as exc:
            view.stop_status()
            err_console.print(styled(("error:", "bold red"), " ", str(exc)))
            continue
        current = result.conversation_id
        runner.run(_start_background(engine))
        view.finish(result.reply)
        for followup in result.followups:  # Nova's second look, in her own words
            console.print(NOVA + styled(followup.reply))
        runner.run(_send_due(engine))  # a reminder that came due during the turn
        sys.stdout.flush()
