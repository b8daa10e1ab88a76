"""What the user types while Nova's reply streams: kept, not echoed into the reply.

A terminal echoes keystrokes where the cursor is, which is in the middle of the streaming
reply. While a turn runs, :func:`held` switches the terminal's echo and line editing off (Ctrl-C
still interrupts), so keystrokes wait unseen in its input queue; when the turn ends they are
read out, with backspaces applied, and handed to the next prompt: a line ended with Enter is the
next message (shown after the prompt, as if typed there), the rest is put into the prompt's
line to go on editing (:func:`read_line`). Not a terminal (a pipe, a file): nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

ERASE = ("\x7f", "\b")
"""What a backspace sends."""


@dataclass
class TypedAhead:
    """Keystrokes typed while a reply streamed, for the next prompts."""

    lines: list[str] = field(default_factory=list)
    """Lines ended with Enter: each is a message, in order."""
    partial: str = ""
    """Typed after the last Enter: the start of the next prompt's line."""

    def add(self, typed: str) -> None:
        text = self.partial
        for char in typed:
            if char in ("\r", "\n"):
                self.lines.append(text)
                text = ""
            elif char in ERASE:
                text = text[:-1]
            elif char == "\x15":  # Ctrl-U: the line so far
                text = ""
            elif char.isprintable() or char == "\t":
                text += char
        self.partial = text


@contextlib.contextmanager
def held(ahead: TypedAhead) -> Iterator[None]:
    """While the body runs, keystrokes are not echoed; afterwards they are in ``ahead``."""
    if not sys.stdin.isatty():
        yield
        return
    import termios

    fd = sys.stdin.fileno()
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        yield
        return
    quiet = termios.tcgetattr(fd)
    quiet[3] &= ~(termios.ECHO | termios.ICANON)
    quiet[6][termios.VMIN] = 1
    quiet[6][termios.VTIME] = 0
    termios.tcsetattr(fd, termios.TCSANOW, quiet)
    try:
        yield
    finally:
        try:
            ahead.add(_pending(fd).decode("utf-8", errors="replace"))
        finally:
            termios.tcsetattr(fd, termios.TCSANOW, saved)  # NOW: nothing typed is dropped


def _pending(fd: int) -> bytes:
    """Every byte waiting in the terminal's input queue, without blocking."""
    data = b""
    while select.select([fd], [], [], 0)[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


def read_line(ahead: TypedAhead, prompt: Callable[[], str], shown: Callable[[str], None]) -> str:
    """The next message: one typed ahead (``shown`` prints it after the prompt), else what
    ``prompt`` reads, its line started with what was typed ahead of it."""
    if ahead.lines:
        line = ahead.lines.pop(0)
        shown(line)
        return line
    start, ahead.partial = ahead.partial, ""
    if not start:
        return prompt()
    try:
        import readline  # input()'s line editing (always there on Linux and macOS)
    except ImportError:
        return start + prompt()  # the start is not shown, but not lost either
    readline.set_startup_hook(lambda: readline.insert_text(start))
    try:
        return prompt()
    finally:
        readline.set_startup_hook(None)
