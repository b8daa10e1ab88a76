"""Checking a user's message before anything else happens (no heavy imports here)."""

from __future__ import annotations

from novaberg.config import Settings
from novaberg.errors import UsageError
from novaberg.text import is_blank


def validate_message(text: str, settings: Settings) -> str:
    """The message, stripped; a :class:`UsageError` if it is empty (or holds only invisible
    characters such as zero-width spaces), oversized, has NUL bytes or is not valid UTF-8
    (bytes a terminal could not decode arrive as lone surrogates)."""
    if "\x00" in text:
        raise UsageError("The message contains a NUL byte; send plain text.")
    bad = next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)
    if bad is not None:
        raise UsageError(
            f"The message is not valid UTF-8 (a broken byte at character {bad + 1}); check "
            "your terminal's encoding (e.g. LANG=C.UTF-8) and send it again."
        )
    stripped = text.strip()
    if is_blank(stripped):
        raise UsageError("The message is empty; type something for Nova to answer.")
    if len(stripped) > settings.max_message_chars:
        raise UsageError(
            f"The message has {len(stripped)} characters; the limit is "
            f"{settings.max_message_chars} (NOVABERG_MAX_MESSAGE_CHARS). Shorten it or raise "
            "the limit."
        )
    return stripped
