"""Checking a user's message before anything else happens (no heavy imports here)."""

from __future__ import annotations

from novaberg.config import Settings
from novaberg.errors import UsageError


def validate_message(text: str, settings: Settings) -> str:
    """The message, stripped; a :class:`UsageError` if it is empty, oversized or has NUL bytes."""
    if "\x00" in text:
        raise UsageError("The message contains a NUL byte; send plain text.")
    stripped = text.strip()
    if not stripped:
        raise UsageError("The message is empty; type something for Nova to answer.")
    if len(stripped) > settings.max_message_chars:
        raise UsageError(
            f"The message has {len(stripped)} characters; the limit is "
            f"{settings.max_message_chars} (NOVABERG_MAX_MESSAGE_CHARS). Shorten it or raise "
            "the limit."
        )
    return stripped
