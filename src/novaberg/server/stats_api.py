"""``GET /api/stats``: how often each defence fired, for the key's user — the object
``novaberg stats --json`` prints (:mod:`novaberg.stats`), never another user's figures."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from novaberg.errors import UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.stats import collect, parse_since

router = APIRouter(prefix="/api")


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallFigures(_Body):
    """The requests of one caller on one backend."""

    caller: str
    backend: str
    count: int
    p50_ms: int | float
    p95_ms: int | float
    outcomes: dict[str, int] = Field(description="How many ended with each outcome.")


class FollowupFigures(_Body):
    calls: int = Field(description="The thinker's follow-up calls.")
    turns: int = Field(description="The turns that needed one.")


class LastResorts(_Body):
    count: int
    second_passes: dict[str, int] = Field(description="The self-triggered passes by status.")


class JudgeFigures(_Body):
    votes: int
    revise: int
    corrections: int = Field(description="Revise votes that sent the answer to the corrector.")
    abstained: int
    malformed: int


class StatsBody(_Body):
    """``novaberg stats --json``'s object for the key's user."""

    calls: list[CallFigures]
    turns: dict[str, int] = Field(description="Turns by status.")
    since: str
    user: str | None
    followup_calls: FollowupFigures
    last_resorts: LastResorts
    thinker: dict[str, int] = Field(description="The thinker's results by kind.")
    corrections: dict[str, JudgeFigures] = Field(description="Each judge's votes.")
    jobs: dict[str, dict[str, int]] = Field(description="Each memory job's runs by status.")
    proactive: dict[str, int | dict[str, int]] = Field(
        description="Proactive messages by status, and dropped_why: why each was dropped."
    )


@router.get("/stats", responses=api_errors((400, "since is not a window such as 7d, 24h or 30m.")))
async def stats(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    since: Annotated[str, Query(description="The window: 7d, 24h or 30m.")] = "7d",
) -> StatsBody:
    try:
        window = parse_since(since)
    except UsageError as exc:
        raise ApiProblem(400, str(exc).replace("--since", "since")) from None
    db = engine_of(request).db
    found = await db.run(collect, db, window, user)  # in a database worker
    return StatsBody.model_validate(found.contract_json())
