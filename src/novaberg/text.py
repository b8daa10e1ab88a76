"""Characters that do not show: which they are, how to show them, when a text is blank.

Text that is not ours (a user's, a model's, a server's, a setting's) may carry characters a
reader cannot see: control characters (ANSI escape sequences start with one), bidi controls
that reorder what is displayed (U+202A–U+202E, U+2066–U+2069), zero-width characters, line
and paragraph separators. :func:`visible` writes each of them as a Python-style escape
(``\\x1b``, ``\\u202e``), so what is printed is what is stored, character by character.
Kept as they are: newline and tab, and a zero-width joiner right after an emoji (it joins
emoji sequences such as 👩‍💻; anywhere else it is shown escaped). A name must have none of
them, newline and tab included (:func:`invisible_at`). An error message repeats a value it was
sent as data, cut to a short prefix (:func:`quoted`, :func:`field_path`).

No imports beyond the standard library: settings and message validation use this.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
"""Control, format (bidi controls, zero-width characters, tags), surrogate, line and
paragraph separator characters."""

KEPT_CONTROLS = frozenset("\n\t")
ZWJ = "\u200d"
_EMOJI_BEFORE_ZWJ = frozenset({"So", "Sk"})
_VARIATION_SELECTORS = (("\ufe00", "\ufe0f"), ("\U000e0100", "\U000e01ef"))
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")
"""Letters and symbols that render as nothing (Hangul fillers, the blank braille pattern)."""


def is_hidden(ch: str) -> bool:
    """Whether one character is invisible or controls the terminal (newline and tab are not)."""
    return ch not in KEPT_CONTROLS and unicodedata.category(ch) in HIDDEN_CATEGORIES


def escape_char(ch: str) -> str:
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def visible(text: str) -> str:
    """``text`` with every hidden character written as its escape (``\\u202e``).

    A Windows line end (CR LF) shows as a line end; a lone CR is escaped (it would let a text
    overwrite its own line)."""
    if text.isascii() and text.isprintable():
        return text  # the common case, without a walk over the characters
    text = text.replace("\r\n", "\n")
    out: list[str] = []
    previous = ""
    for ch in text:
        if is_hidden(ch) and not _joins_emoji(ch, previous):
            out.append(escape_char(ch))
        else:
            out.append(ch)
        previous = ch
    return "".join(out)


def _joins_emoji(ch: str, previous: str) -> bool:
    return (
        ch == ZWJ
        and previous != ""
        and (unicodedata.category(previous) in _EMOJI_BEFORE_ZWJ or _is_variation(previous))
    )


def _is_variation(ch: str) -> bool:
    return any(low <= ch <= high for low, high in _VARIATION_SELECTORS)


def is_blank(text: str) -> bool:
    """Whether ``text`` would look empty: nothing but whitespace, hidden characters,
    variation selectors and fillers (a message of zero-width spaces is blank)."""
    return all(ch.isspace() or is_hidden(ch) or _is_variation(ch) or ch in _FILLERS for ch in text)


def json_visible(encoded: str) -> str:
    """A JSON document with every hidden character inside its strings written as a JSON
    ``\\uXXXX`` escape: the same data when parsed, nothing invisible when printed.

    ``json.dumps`` already escapes C0 controls; this covers the rest (DEL, C1 controls, bidi
    and zero-width characters, U+2028/U+2029). Outside strings ``json.dumps`` writes none."""
    if encoded.isascii():
        return encoded.replace("\x7f", "\\u007f")
    out: list[str] = []
    for ch in encoded:
        if is_hidden(ch):
            code = ord(ch)
            if code >= 0x10000:  # JSON escapes astral characters as a surrogate pair
                code -= 0x10000
                out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def invisible_at(text: str) -> int | None:
    """Where the first character of ``text`` is that does not show as itself on one line: a
    control character (newline and tab too), a format, surrogate, line or paragraph separator
    character, a variation selector or a filler; ``None`` when every character shows. A name
    (a user's, ``--user``'s) must have none: it is printed on a line of its own."""
    for index, ch in enumerate(text):
        if ch in KEPT_CONTROLS or is_hidden(ch) or _is_variation(ch) or ch in _FILLERS:
            return index
    return None


ECHO_CHARS = 80
"""How much of a value an error message repeats; the rest is cut (:func:`quoted`)."""


def quoted(value: str | int, limit: int = ECHO_CHARS) -> str:
    """``value`` as an error message repeats it: a string as a Python literal (``'gpt-4o'``,
    every newline, control and invisible character escaped, so it cannot forge a line), a
    number as its digits; and at most ``limit`` characters of it, ending in "…" with the
    whole length when cut (a 500 KB model name is not sent back)."""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = str(value)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            return f"a number of {value.bit_length()} bits"
    if len(text) <= limit:
        return repr(text) if isinstance(value, str) else text
    cut = text[:limit] + "…"
    return f"{repr(cut) if isinstance(value, str) else cut} ({len(text)} characters)"


_PLAIN_PART = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_[]-")


def field_path(parts: Iterable[str | int]) -> str:
    """Where in a request or file a validation error is (``messages.0.content``), as an error
    message says it: each part that is not plain letters, digits, ``_ - [ ]`` (a key the
    sender chose) in :func:`quoted` form."""
    return ".".join(
        str(p)
        if isinstance(p, int) or (0 < len(p) <= ECHO_CHARS and set(p) <= _PLAIN_PART)
        else quoted(p)
        for p in parts
    )


def same_text(text: str) -> str:
    """What two texts share when one repeats the other exactly, up to case and spacing (two
    memories "Ada keeps bees." and "ada keeps  bees." are one)."""
    return " ".join(text.split()).casefold()
