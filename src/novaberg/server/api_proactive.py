"""The native API's proactive routes, one for each ``novaberg proactive`` command, over the
same functions (:mod:`novaberg.proactive.schedule`), always for the key's user:
``GET /api/proactive`` lists what is scheduled (``?all=true``: and what was sent, dropped or
cancelled), ``POST /api/proactive`` ``{"text", "at"}`` sets a reminder, ``DELETE
/api/proactive/{id}`` cancels one, ``PUT /api/proactive/switches`` ``{"enabled", "kind"}``
switches them on or off. Another user's id answers 404 exactly as a missing one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from novaberg.config import PROACTIVE_KINDS
from novaberg.errors import UsageError
from novaberg.proactive import schedule
from novaberg.proactive.schedule import Scheduled
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.text import quoted

router = APIRouter(prefix="/api/proactive", tags=["proactive"])
MAX_ID = 2**63 - 1
User = Annotated[str, Depends(require_user)]


class Reminder(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(max_length=2000, description="What to remind the user of.")
    at: str = Field(
        max_length=200,
        description="When: ISO 8601 or words ('tomorrow at 9'), in proactive.timezone.",
    )


class Switch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: bool
    kind: str | None = Field(None, description=f"One of {', '.join(PROACTIVE_KINDS)}; none: all.")


class ScheduledView(BaseModel):
    """A proactive message (``proactive list --json``'s item)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: int
    kind: str = Field(description=f"One of {', '.join(PROACTIVE_KINDS)}.")
    due_at: str
    status: str = Field(description="scheduled, sent, dropped or cancelled.")
    cause: str
    text: str
    local: str = Field(description="The wall time it is due at, in the user's zone.")
    repeat: str | None
    reason: str = Field(description="Why it was dropped or cancelled, or which turn sent it.")

    @classmethod
    def of(cls, s: Scheduled) -> ScheduledView:
        return cls(
            id=s.id, kind=s.kind, due_at=s.due_at, status=s.status, cause=s.cause, text=s.text,
            local=s.local, repeat=s.repeat, reason=s.reason,
        )  # fmt: skip


class Switches(BaseModel):
    """Whether each kind is on for the user."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    reminder: bool
    event: bool
    checkin: bool
    followup: bool


class ScheduledList(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    scheduled: list[ScheduledView] = Field(description="Soonest first.")
    switches: Switches


def _missing(event_id: int) -> ApiProblem:
    return ApiProblem(404, f"There is no scheduled message {quoted(event_id)}.")


@router.get("")
async def scheduled(
    request: Request,
    user: User,
    every: Annotated[bool, Query(alias="all", description="The final ones too.")] = False,
) -> ScheduledList:
    """``{"scheduled": [{"id", "kind", "due_at", "status", "cause", "text", "local",
    "repeat", "reason"}], "switches": {kind: on}}``, soonest first."""
    db = engine_of(request).db
    found = await db.run(lambda: schedule.listing(db, user, everything=every))
    switches = await db.run(schedule.switches, db, user)
    return ScheduledList(
        scheduled=[ScheduledView.of(s) for s in found], switches=Switches(**switches)
    )


@router.post(
    "",
    responses=api_errors((400, "No text, or no time this reads (the detail says which).")),
)
async def remind(reminder: Reminder, request: Request, user: User) -> ScheduledView:
    """Set a reminder (``novaberg proactive remind``): ``{"id", "due_at", …}``."""
    engine = engine_of(request)
    db = engine.db
    try:
        made = await db.run(
            lambda: schedule.remind(
                db, engine.settings, user, reminder.text, reminder.at, cause="POST /api/proactive"
            )
        )
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    return ScheduledView.of(made)


@router.delete(
    "/{event_id}",
    responses=api_errors(
        (404, "The user has no such scheduled message."),
        (409, "It was sent, dropped or cancelled already."),
    ),
)
async def cancel(event_id: int, request: Request, user: User) -> ScheduledView:
    """Cancel one (``novaberg proactive cancel``): the message, now ``cancelled``."""
    db = engine_of(request).db
    if not 1 <= event_id <= MAX_ID:
        raise _missing(event_id)
    try:
        done = await db.run(schedule.cancel, db, user, event_id)
    except UsageError as exc:
        raise ApiProblem(409, str(exc)) from None
    if done is None:
        raise _missing(event_id)
    return ScheduledView.of(done)


@router.put("/switches", responses=api_errors((400, "An unknown kind.")))
async def switch(choice: Switch, request: Request, user: User) -> Switches:
    """``novaberg proactive on|off [KIND]``: the user's switches afterwards."""
    db = engine_of(request).db
    try:
        await db.run(schedule.switch, db, user, choice.enabled, choice.kind)
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    return Switches(**await db.run(schedule.switches, db, user))
