"""End users named by a front-end: a key added with ``novaberg users add NAME --frontend``
may say which of its own users a request is for, and the request then runs as the
Novaberg user ``NAME/ID`` (own conversations, own memory; nothing to create first).

What Open WebUI sends (``ENABLE_FORWARD_USER_INFO_HEADERS=true``): without
``FORWARD_USER_INFO_HEADER_JWT_SECRET``, plain headers, of which Nova reads
``X-OpenWebUI-User-Id``; with it, one HS256 token in ``X-OpenWebUI-User-Jwt`` whose claims
are ``sub`` (the user id), ``email``, ``name``, ``role``, ``iss`` (``open-webui``), ``iat``
and ``exp``. Nova verifies the token with the same secret (setting ``frontend_jwt_secret``,
env ``NOVABERG_FRONTEND_JWT_SECRET``) and takes the id from ``sub``. While the secret is
set, a plain id is refused: anyone who can reach the port could write one.

A key that is not a front-end's ignores these headers. The id is never logged at WARNING or
above (it names a person).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import jwt

from novaberg.server.errors import ApiProblem

USER_ID_HEADER = "X-OpenWebUI-User-Id"
USER_JWT_HEADER = "X-OpenWebUI-User-Jwt"
JWT_ISSUER = "open-webui"
JWT_LEEWAY_S = 30
MAX_TOKEN_CHARS = 4096
MAX_END_USER_CHARS = 128
END_USER_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@:+-]*")
"""Open WebUI's ids are UUIDs; letters, digits and a few separators leave room for other
front-ends, and nothing that could read as another path of a user name (no ``/``)."""

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


def _refuse(message: str) -> ApiProblem:
    return ApiProblem(401, message, code="invalid_end_user", headers=UNAUTHORIZED_HEADERS)


def valid_end_user(value: str) -> str:
    """The end-user id as it becomes part of a user name, or a 401."""
    text = value.strip()
    if not text or len(text) > MAX_END_USER_CHARS or not END_USER_PATTERN.fullmatch(text):
        raise _refuse(
            f"The end-user id must be 1 to {MAX_END_USER_CHARS} letters, digits or . _ @ : + - "
            "(starting with a letter or digit)."
        )
    return text


def verified_subject(token: str, secret: str) -> str:
    """The ``sub`` of an Open WebUI user token signed with ``secret`` (HS256 only), or a 401."""
    if len(token) > MAX_TOKEN_CHARS:
        raise _refuse(f"{USER_JWT_HEADER} is longer than {MAX_TOKEN_CHARS} characters.")
    try:
        claims = jwt.decode(
            token.strip(),
            secret,
            algorithms=["HS256"],
            issuer=JWT_ISSUER,
            leeway=JWT_LEEWAY_S,
            options={"require": ["sub", "exp", "iss"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise _refuse(f"{USER_JWT_HEADER} has expired.") from exc
    except jwt.InvalidTokenError as exc:
        raise _refuse(
            f"{USER_JWT_HEADER} is not a valid token signed with NOVABERG_FRONTEND_JWT_SECRET "
            f"({type(exc).__name__})."
        ) from exc
    subject = claims.get("sub")
    if not isinstance(subject, str):
        raise _refuse(f"The {USER_JWT_HEADER} token's sub claim is not a string.")
    return valid_end_user(subject)


def end_user(headers: Mapping[str, str], secret: str | None, *, required: bool) -> str | None:
    """The end user a front-end key's request names, ``None`` when it names none.

    With ``secret`` set only a verified token counts: a plain id is a 401, and so is no token
    when ``required`` (every route that reads or writes a user's data)."""
    token = headers.get(USER_JWT_HEADER)
    plain = headers.get(USER_ID_HEADER)
    if secret:
        if token is not None:
            return verified_subject(token, secret)
        if plain is not None:
            raise _refuse(
                f"This server takes end users only signed ({USER_JWT_HEADER}); "
                f"{USER_ID_HEADER} alone is refused while NOVABERG_FRONTEND_JWT_SECRET is set."
            )
        if required:
            raise _refuse(
                f"A front-end key must name its end user in {USER_JWT_HEADER} "
                "(Open WebUI: ENABLE_FORWARD_USER_INFO_HEADERS=true and "
                "FORWARD_USER_INFO_HEADER_JWT_SECRET set to the same secret)."
            )
        return None
    if token is not None:
        raise _refuse(
            f"{USER_JWT_HEADER} cannot be verified: NOVABERG_FRONTEND_JWT_SECRET is not set "
            "on this server."
        )
    if plain is not None:
        return valid_end_user(plain)
    return None


def end_user_name(key_user: str, end: str | None) -> str:
    """``NAME/ID`` for an end user of the front-end key ``NAME``; ``NAME`` for none."""
    return key_user if end is None else f"{key_user}/{end}"
