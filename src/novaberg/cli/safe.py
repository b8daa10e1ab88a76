"""The one rule for printing: every string is printed as the text it is.

Text that is not ours (a reply, a stored memory, a server's error body, a model or user name, a
path, a setting's value) must never become Rich markup (``[/b]`` would crash the command,
``[link=…]`` would make a terminal hyperlink, ``list[int]`` would print as ``list``), an emoji
code, highlighting, or a terminal control sequence. So:

- :class:`SafeConsole` turns every ``str`` it is given — printed, in a table cell, a title —
  into plain text with markup, emoji codes and highlighting off, and hidden characters shown
  escaped (:func:`novaberg.text.visible`). A call site cannot opt back into markup.
- Our own styling is a :class:`rich.text.Text` built by :func:`styled` from spans of
  ``(text, style)``; no string is ever parsed as markup.
- Plain lines (``ask``, ``memory``) go through :func:`echo`, JSON through :func:`dumps`.
"""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console, HighlighterType, JustifyMethod, OverflowMethod
from rich.style import Style
from rich.text import Text

from novaberg.text import json_visible, visible


class SafeConsole(Console):
    """A console on which no string is markup, an emoji code or highlighted."""

    def __init__(self, *, stderr: bool = False) -> None:
        super().__init__(stderr=stderr, markup=False, emoji=False, highlight=False)

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        return super().render_str(
            visible(text),
            style=style,
            justify=justify,
            overflow=overflow,
            emoji=False,
            markup=False,
            highlight=False,
        )


Span = str | tuple[str, str]
"""A piece of a line: plain text, or ``(text, style)`` for our own styling."""


def styled(*spans: Span) -> Text:
    """One line of text and styles; every piece is shown as it is (hidden characters escaped)."""
    text = Text()
    for span in spans:
        if isinstance(span, str):
            text.append(visible(span))
        else:
            text.append(visible(span[0]), style=span[1])
    return text


def echo(line: str = "", *, err: bool = False) -> None:
    """Print one plain line (no styles), hidden characters escaped."""
    typer.echo(visible(line), err=err)


def dumps(data: Any, *, indent: int | None = None) -> str:
    """JSON for stdout: the same data, with every hidden character as a ``\\u`` escape."""
    return json_visible(json.dumps(data, ensure_ascii=False, indent=indent))
