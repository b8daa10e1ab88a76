"""``GET /api/stats``: how often each defence fired, for the key's user — the object
``novaberg stats --json`` prints (:mod:`novaberg.engine.stats_page`), never another user's
figures."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request

from novaberg.engine.stats_page import StatsBody, stats_of
from novaberg.errors import UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors

router = APIRouter(prefix="/api")


@router.get("/stats", responses=api_errors((400, "since is not a window such as 7d, 24h or 30m.")))
async def stats(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    since: Annotated[str, Query(description="The window: 7d, 24h or 30m.")] = "7d",
) -> StatsBody:
    try:
        return await stats_of(engine_of(request), since, user)
    except UsageError as exc:
        raise ApiProblem(400, str(exc).replace("--since", "since")) from None
