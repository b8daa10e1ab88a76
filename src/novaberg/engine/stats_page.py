"""The figures of ``novaberg stats --json`` for one user, as the doors reach them (``GET
/api/stats``): :func:`stats_of` and the body it answers with (:mod:`novaberg.stats` counts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from novaberg.stats import collect, parse_since

if TYPE_CHECKING:
    from novaberg.engine.core import Engine


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


async def stats_of(engine: Engine, since: str, user: str) -> StatsBody:
    """The user's figures over the window ``since`` (7d, 24h, 30m; a
    :class:`~novaberg.errors.UsageError` naming ``--since`` if it is none), counted in a
    database worker."""
    window = parse_since(since)
    db = engine.db
    found = await db.run(collect, db, window, user)
    return StatsBody.model_validate(found.contract_json())
