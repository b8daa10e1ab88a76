"""The one redaction of server addresses: what of a backend's URL each reader may see.

A server URL may carry credentials (``OLLAMA_HOST=http://user:password@host``) and always
names an internal address. Two readers, two views:

* The operator (the local log, ``novaberg doctor``, start-up notices) sees a configured
  address without its userinfo: :func:`safe_url`.
* Everyone else (the API's answers, call records, stored reasons, the page) sees the backend's
  NAME, never its address. A backend writes its own messages without the address, and every
  error leaving it passes through :func:`redact` once, at its translation choke point, so that
  text quoted from elsewhere (a server's error body, a client library's message, which may
  hold the whole URL) loses the address as well.

:func:`without_userinfo`, the part of :func:`redact` that needs no backend, is applied to the
message of every :class:`~novaberg.errors.BackendError` as it is made.
"""

from __future__ import annotations

import re
import string
import urllib.parse

_SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://"
"""A URL scheme, bounded: an unbounded one is re-read from every letter of a long word."""
_USERINFO = re.compile(rf"(?P<scheme>{_SCHEME})[^\s/?#\[\]\"<>]*@")
"""A URL's ``scheme://userinfo@``. The userinfo runs to the LAST ``@`` before the authority
ends (``/``, ``?``, ``#``, a space), so that a password with a raw ``@`` goes whole."""


_FOLD = str.maketrans(
    string.ascii_uppercase + "\u0130\u0131\u212a\u017f", string.ascii_lowercase + "iiks"
)
"""Upper to lower case as ``re.IGNORECASE`` matches a (lower-case ASCII) host name: ASCII,
and the letters it takes for ``i``, ``k`` and ``s``."""


def without_userinfo(text: str) -> str:
    """``text`` with the userinfo (``user:password@``) of every URL in it removed."""
    return _USERINFO.sub(r"\g<scheme>", text)


def safe_url(url: str) -> str:
    """One configured server address as the operator may see it: without its userinfo.

    Takes it as configured, with or without a scheme (``OLLAMA_HOST`` may be
    ``user:pass@host:11434``): ``http://u:p@h:1/v1`` becomes ``http://h:1/v1``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    ends = [i for i in (rest.find(c) for c in "/?#") if i >= 0]
    end = min(ends, default=len(rest))
    authority = rest[:end].rpartition("@")[2]
    return f"{scheme}{sep}{authority}{rest[end:]}"


def _hostname(server: str) -> str:
    """The host of a configured server address (lower case, IPv6 without brackets)."""
    plain = safe_url(server)
    split = urllib.parse.urlsplit(plain if "://" in plain else f"//{plain}")
    return split.hostname or ""


def _address_pattern(host: str) -> re.Pattern[str]:
    """The address of ``host`` in a text: as a URL's authority (any scheme and port), as
    ``host:port``, or bare when it cannot be mistaken for a word (it has a dot or a colon)."""
    escaped = re.escape(host)
    form = rf"(?:\[{escaped}\]|{escaped})" if ":" in host else escaped
    ways = [rf"{_SCHEME}{form}(?::\d+)?", rf"{form}:\d+"]
    if "." in host or ":" in host:
        ways.append(form)
    return re.compile(rf"(?<![\w.\-])(?:{'|'.join(ways)})(?![\w\-]|\.\w)", re.IGNORECASE)


def redact(text: str, *, server: str, name: str) -> str:
    """``text`` as anyone may read it: no userinfo in any URL, and the address of ``server``
    (a configured URL or ``host:port``) replaced by the backend's ``name`` wherever it
    appears, with or without scheme and port; a path after it stays."""
    text = without_userinfo(text)
    host = _hostname(server)
    if not host or host not in text.translate(_FOLD):  # every form of it holds the host
        return text  # (and the pattern, linear, still reads up to a scheme's length per char)
    return _address_pattern(host).sub(name, text)
