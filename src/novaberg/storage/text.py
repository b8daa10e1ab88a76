"""Text on its way into the database: never stored broken.

Lone surrogates (what Python makes of invalid UTF-8 read with ``surrogateescape``, e.g. from a
terminal) become U+FFFD, NUL bytes are removed (PostgreSQL cannot store them in text, and they
cut C strings short), and text over the limit is truncated. Every change comes with a notice
that says what was done, so the caller can tell the user.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SURROGATES = re.compile("[\ud800-\udfff]")
MEMORY_TEXT_LIMIT = 2000


@dataclass(frozen=True)
class Cleaned:
    text: str
    notices: list[str] = field(default_factory=list)
    replaced: bool = False
    """Invalid UTF-8 (lone surrogates) was replaced by U+FFFD."""
    truncated: bool = False


def clean_text(text: str, limit: int = MEMORY_TEXT_LIMIT, what: str = "text") -> Cleaned:
    notices = []
    replaced = bool(_SURROGATES.search(text))
    if replaced:
        text = _SURROGATES.sub("\ufffd", text)
        notices.append(f"{what} had invalid UTF-8; the bad bytes were replaced by U+FFFD")
    if "\x00" in text:
        text = text.replace("\x00", "")
        notices.append(f"{what} had NUL bytes; they were removed")
    truncated = len(text) > limit
    if truncated:
        notices.append(f"{what} had {len(text)} characters; it was truncated to {limit}")
        text = text[:limit]
    return Cleaned(text, notices, replaced, truncated)
