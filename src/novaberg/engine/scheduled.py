"""A user's proactive messages as the doors reach them (``/api/proactive``): the engine's door
(:class:`Scheduling`: list, remind, cancel, switch) and the bodies it answers with. Every
method runs its database work in the database's worker threads; a request that cannot be done
is a :class:`~novaberg.errors.UsageError` saying why; a message the user does not have reads
as ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from novaberg.config import PROACTIVE_KINDS
from novaberg.engine.memories import MAX_ID
from novaberg.proactive import schedule
from novaberg.proactive.schedule import Scheduled

if TYPE_CHECKING:
    from novaberg.engine.core import Engine


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


class Scheduling:
    """The proactive messages of the engine's users."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.db = engine.db

    async def listing(self, user: str, *, everything: bool) -> ScheduledList:
        """The user's scheduled messages, soonest first (``everything``: the final ones
        too), and their switches."""
        db = self.db
        found = await db.run(lambda: schedule.listing(db, user, everything=everything))
        return ScheduledList(
            scheduled=[ScheduledView.of(s) for s in found], switches=await self.switches(user)
        )

    async def remind(self, user: str, text: str, when: str, *, cause: str) -> ScheduledView:
        """A reminder set by hand: ``when`` read in the user's zone."""
        db, settings = self.db, self._engine.settings
        made = await db.run(lambda: schedule.remind(db, settings, user, text, when, cause=cause))
        return ScheduledView.of(made)

    async def cancel(self, user: str, event_id: int) -> ScheduledView | None:
        """Cancel one: the message, now ``cancelled``. :class:`UsageError` if it is final."""
        if not 1 <= event_id <= MAX_ID:
            return None
        done = await self.db.run(schedule.cancel, self.db, user, event_id)
        return None if done is None else ScheduledView.of(done)

    async def switch(self, user: str, enabled: bool, kind: str | None) -> Switches:
        """Switch one kind (``None``: all) on or off: the switches afterwards."""
        await self.db.run(schedule.switch, self.db, user, enabled, kind)
        return await self.switches(user)

    async def switches(self, user: str) -> Switches:
        return Switches(**await self.db.run(schedule.switches, self.db, user))
