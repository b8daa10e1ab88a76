"""Who is asking: the ``Authorization: Bearer KEY`` of every ``/v1`` and ``/api`` request,
looked up by its hash (:mod:`novaberg.engine.keys`) in the database's worker threads. A
missing, wrong or revoked key is a 401; what the request reads or writes belongs to the key's
user, or, for a front-end's key, to the end user it names (:mod:`novaberg.server.frontend`).
Each user then takes one request from their rate-limit bucket (:mod:`novaberg.server.ratelimit`).
"""

from __future__ import annotations

from fastapi import Request

from novaberg.engine import Engine
from novaberg.engine.keys import Keys
from novaberg.server.errors import ApiProblem
from novaberg.server.frontend import UNAUTHORIZED_HEADERS, end_user, end_user_name
from novaberg.server.ratelimit import RateLimiter, retry_after

SHARED_ROUTES = frozenset({"/v1/models"})
"""Routes that read no user's data: a front-end key may call them without naming an end user
even while signed end users are required (Open WebUI lists models on its own)."""


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def bearer_key(request: Request) -> str | None:
    """The key of the request's ``Authorization: Bearer KEY``; ``None`` when it sends none. A
    header that is not ``Bearer KEY``, or a value that cannot be a key (a character pasted
    with it, cut when copied: :meth:`~novaberg.engine.keys.Keys.malformed`), is a 401 that
    says what is wrong without repeating the value; it is not looked up."""
    header = request.headers.get("authorization")
    if header is None or not header.strip():
        return None
    scheme, _, key = header.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer":
        problem: str | None = (
            "the Authorization header must be 'Bearer KEY' (the word Bearer, a space, the key)."
        )
    elif not key:
        return None
    else:
        problem = Keys.malformed(key)
    if problem is not None:
        raise ApiProblem(
            401,
            f"The API key is malformed: {problem}",
            code="invalid_api_key",
            headers=UNAUTHORIZED_HEADERS,
        )
    return key


async def require_user(request: Request) -> str:
    """The name of the user the request runs as (a FastAPI dependency): the user of its
    active key, or ``NAME/ID`` for the end user a front-end key names."""
    return await user_of(request)


async def user_of(request: Request, *, shared: bool = False) -> str:
    """:func:`require_user`; ``shared``: the request reads no user's data (as the routes of
    :data:`SHARED_ROUTES`), so a front-end key need not name its end user."""
    key = bearer_key(request)
    if key is None:
        raise ApiProblem(
            401,
            "Missing API key: send Authorization: Bearer KEY (novaberg users add NAME).",
            code="invalid_api_key",
            headers=UNAUTHORIZED_HEADERS,
        )
    engine = engine_of(request)
    user = await Keys.of(engine).user_of(key)
    if user is None:
        raise ApiProblem(
            401,
            "Invalid or revoked API key.",
            code="invalid_api_key",
            headers=UNAUTHORIZED_HEADERS,
        )
    name = user.name
    if user.frontend:
        secret = engine.settings.frontend_jwt_secret
        end = end_user(
            request.headers,
            None if secret is None else secret.get_secret_value(),
            required=not shared and request.url.path not in SHARED_ROUTES,
        )
        name = end_user_name(user.name, end)
    limiter: RateLimiter | None = getattr(request.app.state, "limiter", None)
    wait = None if limiter is None else limiter.take(name)
    if wait is not None:
        raise ApiProblem(
            429,
            "Too many requests for this user (server.rate_limit_per_minute); "
            "retry after the seconds in Retry-After.",
            code="rate_limit_exceeded",
            headers={"Retry-After": retry_after(wait)},
        )
    return name
