"""Who is asking: the ``Authorization: Bearer KEY`` of every ``/v1`` and ``/api`` request,
looked up by its hash (:mod:`novaberg.server.users`). A missing, wrong or revoked key is a
401; what the request reads or writes belongs to the key's user.

The lookup runs on the event loop: the :class:`~novaberg.storage.db.Database` holds one
connection that must stay in the loop's thread (sqlite3 refuses a connection used from
another thread). It is one indexed query.
"""

from __future__ import annotations

from fastapi import Request

from novaberg.engine import Engine
from novaberg.server.errors import ApiProblem
from novaberg.server.users import UserStore

UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def bearer_key(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


async def require_user(request: Request) -> str:
    """The name of the user whose active key the request carries (a FastAPI dependency;
    ``async`` so that FastAPI runs it on the loop, not in its thread pool)."""
    key = bearer_key(request)
    if key is None:
        raise ApiProblem(
            401,
            "Missing API key: send Authorization: Bearer KEY (novaberg users add NAME).",
            code="invalid_api_key",
            headers=UNAUTHORIZED_HEADERS,
        )
    user = UserStore(engine_of(request).db).authenticate(key)
    if user is None:
        raise ApiProblem(
            401,
            "Invalid or revoked API key.",
            code="invalid_api_key",
            headers=UNAUTHORIZED_HEADERS,
        )
    return user.name
