"""The native API's proactive routes, one for each ``novaberg proactive`` command, through the
engine's door (:class:`~novaberg.engine.scheduled.Scheduling`), always for the key's user:
``GET /api/proactive`` lists what is scheduled (``?all=true``: and what was sent, dropped or
cancelled), ``POST /api/proactive`` ``{"text", "at"}`` sets a reminder, ``DELETE
/api/proactive/{id}`` cancels one, ``PUT /api/proactive/switches`` ``{"enabled", "kind"}``
switches them on or off. Another user's id answers 404 exactly as a missing one."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from novaberg.config import PROACTIVE_KINDS
from novaberg.engine.scheduled import ScheduledList, ScheduledView, Scheduling, Switches
from novaberg.errors import UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.text import quoted

router = APIRouter(prefix="/api/proactive", tags=["proactive"])
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
    return await Scheduling(engine_of(request)).listing(user, everything=every)


@router.post(
    "",
    responses=api_errors((400, "No text, or no time this reads (the detail says which).")),
)
async def remind(reminder: Reminder, request: Request, user: User) -> ScheduledView:
    """Set a reminder (``novaberg proactive remind``): ``{"id", "due_at", …}``."""
    try:
        return await Scheduling(engine_of(request)).remind(
            user, reminder.text, reminder.at, cause="POST /api/proactive"
        )
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None


@router.delete(
    "/{event_id}",
    responses=api_errors(
        (404, "The user has no such scheduled message."),
        (409, "It was sent, dropped or cancelled already."),
    ),
)
async def cancel(event_id: int, request: Request, user: User) -> ScheduledView:
    """Cancel one (``novaberg proactive cancel``): the message, now ``cancelled``."""
    try:
        done = await Scheduling(engine_of(request)).cancel(user, event_id)
    except UsageError as exc:
        raise ApiProblem(409, str(exc)) from None
    if done is None:
        raise _missing(event_id)
    return done


@router.put("/switches", responses=api_errors((400, "An unknown kind.")))
async def switch(choice: Switch, request: Request, user: User) -> Switches:
    """``novaberg proactive on|off [KIND]``: the user's switches afterwards."""
    try:
        return await Scheduling(engine_of(request)).switch(user, choice.enabled, choice.kind)
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
