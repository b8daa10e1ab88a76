"""The figures of ``novaberg stats --json`` for one user, as the doors reach them (``GET
/api/stats``): :func:`stats_of` and the body it answers with (:mod:`novaberg.stats` counts);
and the same reading of one stored trace and call for the server's running counters
(``/metrics``): :func:`corrections_by_judge`, :func:`is_last_resort`, :func:`is_follow_up`."""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from novaberg.stats import FOLLOW_UP_CALLER, JudgeStats, collect, count_votes, parse_since
from novaberg.telemetry import CallRecord
from novaberg.trace_document import TraceDocument

if TYPE_CHECKING:
    from novaberg.engine.core import Engine

__all__ = [
    "FOLLOW_UP_CALLER",
    "CallFigures",
    "FollowupFigures",
    "JudgeFigures",
    "LastResorts",
    "StatsBody",
    "corrections_by_judge",
    "is_follow_up",
    "is_last_resort",
    "stats_of",
]


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


def corrections_by_judge(trace: TraceDocument) -> dict[str, int]:
    """For each judge that voted in a stored trace: its revise votes that sent the answer to
    the corrector (the same reading of a trace as ``novaberg stats``)."""
    judges: defaultdict[str, JudgeStats] = defaultdict(JudgeStats)
    count_votes(trace, judges)
    return {judge: votes.corrections for judge, votes in judges.items()}


def is_last_resort(trace: TraceDocument) -> bool:
    """Whether the stored trace's thinker ended on its last resort."""
    return trace.thinker is not None and trace.thinker.result == "last_resort"


def is_follow_up(call: CallRecord) -> bool:
    """Whether ``call`` is a first attempt of the thinker's follow-up call (the caller
    :data:`FOLLOW_UP_CALLER`), as ``novaberg stats`` counts them."""
    return call.caller == FOLLOW_UP_CALLER and call.attempt == 1
