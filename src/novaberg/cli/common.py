"""What every command shares: settings loading, logging, turning errors into exit codes."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import typer

from novaberg.cli.safe import SafeConsole, styled
from novaberg.errors import ConfigError, NovabergError, UsageError
from novaberg.text import escape_char, invisible_at, is_blank, visible

if TYPE_CHECKING:
    from novaberg.config import LoadedSettings

T = TypeVar("T")
err_console = SafeConsole(stderr=True)

EXIT_FAILURE = 1
EXIT_USAGE = 2


class VisibleFormatter(logging.Formatter):
    """Log lines with hidden characters escaped: no control sequence reaches the terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


def setup_logging(verbose: bool) -> None:
    logger = logging.getLogger("novaberg")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(VisibleFormatter("novaberg: %(levelname)s %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.INFO if verbose else logging.ERROR)


def load(user: str | None = None) -> LoadedSettings:
    from novaberg.config import load_settings

    loaded = load_settings()
    if user is not None:
        if is_blank(user):
            raise UsageError("--user must not be empty (nor only spaces or invisible characters).")
        hidden = invisible_at(user)
        if hidden is not None:
            raise UsageError(
                f"--user has an invisible or control character ({escape_char(user[hidden])} at "
                f"position {hidden + 1}); a user name is one line of characters that show."
            )
        loaded.settings.user = user
        loaded.origins["user"] = "option --user"
    return loaded


def fail(exc: NovabergError) -> NoReturn:
    kind = "usage error" if isinstance(exc, UsageError | ConfigError) else "error"
    err_console.print(styled((f"{kind}:", "bold red"), " ", str(exc)))
    raise typer.Exit(EXIT_USAGE if isinstance(exc, UsageError | ConfigError) else EXIT_FAILURE)


def guarded(fn: Callable[[], T]) -> T:
    """Run a command body; a Novaberg error becomes a clear message and an exit code."""
    try:
        return fn()
    except NovabergError as exc:
        fail(exc)
