"""What each of Nova's MCP tools does, for the user a :class:`Seat` names, through the same
engine doors as ``/api``: ``recall``, ``forget``, ``correct``, ``retract``, ``timeline`` and
``profile`` and ``remember`` are the engine's door to a user's memory
(:class:`~novaberg.engine.memories.Memories`: the enricher's retrieval, the store's complete
forget, its corrections, a statement of the user's own), and ``talk`` one turn admitted by the
engine's turn service (:class:`~novaberg.engine.service.TurnService`) into a conversation the
engine's :class:`~novaberg.engine.conversation_service.Conversations` gives, as ``/api/turns``.

Every database call runs in the engine's doors, in the database's worker threads. A user mistake
or a refused turn is a :class:`~novaberg.errors.NovabergError` (its message is for the
client); a memory or conversation that is not the user's is :class:`Missing`, the same as one
that does not exist. Results are typed (:mod:`pydantic` models, :class:`Result`): the SDK
sends each as JSON text and as structured content with its schema.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import date, timedelta
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from novaberg.errors import BackendError, ModelOutputError, NovabergError

if TYPE_CHECKING:  # the engine's modules load with the engine (novaberg mcp answers first)
    from novaberg.engine import Engine
    from novaberg.engine.memories import MemoryItem
    from novaberg.engine.service import TurnService

TIMELINE_BACK_DAYS = 1
TIMELINE_AHEAD_DAYS = 14


@dataclass(frozen=True)
class Seat:
    """Who calls, over which engine: the user is decided by the door (``--user`` on stdio,
    the key on HTTP), never by a tool argument."""

    engine: Engine
    service: TurnService
    user: str
    client: str = ""
    """The client's own name (its ``clientInfo``), for provenance; ``""`` when it sent none."""


class Missing(NovabergError):
    """No such memory or conversation of this user (another user's is missing too)."""


def _plain_nullables(schema: dict[str, Any]) -> None:
    """Each optional field as ``"type": ["string", "null"]`` instead of pydantic's ``anyOf`` of
    two schemas: the same values are valid, and a client that checks a result against the
    tool's output schema (the SDK's client does, for every call) visits one schema per field
    instead of two. For a 50-item ``recall`` that halved the Python client's check (6.4 ms to
    3.4 ms)."""
    for field in schema.get("properties", {}).values():
        branches = field.get("anyOf")
        if (
            isinstance(branches, list)
            and all(isinstance(b, dict) and set(b) == {"type"} for b in branches)
            and {"type": "null"} in branches
        ):
            del field["anyOf"]
            field["type"] = [b["type"] for b in branches]


class Result(BaseModel):
    """What a tool returns (or a part of it), with optional fields as plain nullable types."""

    model_config = ConfigDict(json_schema_extra=_plain_nullables)


class Item(Result):
    """A memory: a short-term item, a long-term fact or a dated event."""

    id: int = Field(description="Look it up with `novaberg memory show ID` or on the page.")
    kind: str = Field(description="short_term, long_term (a fact) or event")
    text: str
    importance: float
    valid_from: str
    valid_to: str | None = Field(description="Set when a newer fact replaced it.")
    happens_on: str | None = Field(description="The date of an event.")
    source_turn_id: int | None


class Recalled(Item):
    reason: str = Field(description="Why it was recalled (words, meaning, recency).")
    score: float


class Message(Result):
    """A stored message found by its words: something the user or Nova said."""

    message_id: int
    conversation_id: int
    turn_id: int
    role: str = Field(description="user, or assistant (Nova)")
    text: str
    said_at: str
    reason: str


class RecallResult(Result):
    items: list[Recalled]
    messages: list[Message]


class RememberResult(Result):
    id: int = Field(description="The memory's id (`novaberg memory show ID`).")
    created: bool = Field(description="False: a current memory said this already.")


class ForgetResult(Result):
    forgotten: int
    ids: list[int] = Field(description="Every memory removed: this one and what came from it.")
    profile_versions: int
    turns_scrubbed: int


class TimelineResult(Result):
    start: str
    end: str
    items: list[Item]


class ProfilePart(Result):
    version: int
    text: str
    statements: list[dict[str, Any]]
    created_at: str


class ProfileResult(Result):
    core: ProfilePart | None = Field(description="What is stable about the user.")
    adaptive: ProfilePart | None = Field(description="What holds for now.")


class TalkResult(Result):
    reply: str
    turn_id: int
    conversation_id: int


ITEM_FIELDS = tuple(Item.model_fields)


def _item(memory: MemoryItem) -> dict[str, Any]:
    # the attributes themselves: view() (dataclasses.asdict) deep-copies every field, a
    # third of a 50-item recall's time
    return {k: getattr(memory, k) for k in ITEM_FIELDS}


async def do_recall(seat: Seat, query: str, k: int) -> RecallResult:
    from novaberg.engine.memories import Memories

    found = await Memories(seat.engine).search(seat.user, query, k=k, what="mcp recall")
    # validated in one pass (a model each, built one by one, was a third of the door's time)
    items = [_item(r.item) | {"reason": r.reason, "score": round(r.score, 3)} for r in found.items]
    messages = [
        {
            "message_id": h.message.message_id,
            "conversation_id": h.message.conversation_id,
            "turn_id": h.message.turn_id,
            "role": h.message.role,
            "text": h.message.text,
            "said_at": h.message.at,
            "reason": h.reason,
        }
        for h in found.heard
    ]
    return RecallResult.model_validate({"items": items, "messages": messages})


async def do_remember(seat: Seat, text: str) -> RememberResult:
    from novaberg.engine.memories import Memories

    via = f"MCP, {seat.client}" if seat.client else "MCP"
    done = await Memories(seat.engine).remember(seat.user, text, via)
    return RememberResult(id=done.id, created=done.created)


async def do_forget(seat: Seat, memory_id: int) -> ForgetResult:
    from novaberg.engine.memories import Memories

    # forget compacts the files (a checkpoint, or VACUUM FULL): in a worker, never the loop
    done = await Memories(seat.engine).forget(seat.user, memory_id)
    if done is None:
        raise Missing(f"There is no memory {memory_id}.")
    return ForgetResult(
        forgotten=memory_id,
        ids=done.ids,
        profile_versions=done.profile_versions,
        turns_scrubbed=done.turns_scrubbed,
    )


class Changed(Result):
    """A memory after a correction or a retraction (its history: `novaberg memory show ID`)."""

    memory: Item = Field(description="The new current version, or the ended one (retracted).")
    replaces: int | None = Field(description="The version a correction replaced.")


async def do_correct(seat: Seat, memory_id: int, text: str) -> Changed:
    """The store's correction by hand (``memory correct``, ``PATCH /api/memory/{id}``)."""
    from novaberg.engine.memories import Memories

    new = await Memories(seat.engine).correct(seat.user, memory_id, text)
    if new is None:
        raise Missing(f"There is no memory {memory_id}.")
    return Changed(memory=Item(**_item(new)), replaces=memory_id)


async def do_retract(seat: Seat, memory_id: int) -> Changed:
    """The store's retraction (``memory retract``, ``POST /api/memory/{id}/retract``)."""
    from novaberg.engine.memories import Memories

    ended = await Memories(seat.engine).retract(seat.user, memory_id)
    if ended is None:
        raise Missing(f"There is no memory {memory_id}.")
    return Changed(memory=Item(**_item(ended)), replaces=None)


async def do_timeline(seat: Seat, start: date | None, end: date | None) -> TimelineResult:
    from novaberg.engine.memories import Memories

    today = date.today()
    first = start or today - timedelta(days=TIMELINE_BACK_DAYS)
    last = end or max(first, today) + timedelta(days=TIMELINE_AHEAD_DAYS)
    entries = await Memories(seat.engine).timeline(seat.user, first, last)
    return TimelineResult(
        start=first.isoformat(), end=last.isoformat(), items=[Item(**_item(e)) for e in entries]
    )


async def do_profile(seat: Seat) -> ProfileResult:
    from novaberg.engine.memories import Memories

    parts = await Memories(seat.engine).profile(seat.user)
    shown = {
        name: ProfilePart(
            version=p.version,
            text=p.text,
            statements=[{"text": s.text, "sources": s.sources} for s in p.statements],
            created_at=p.created_at,
        )
        for name, p in parts.items()
    }
    return ProfileResult(core=shown.get("core"), adaptive=shown.get("adaptive"))


async def _conversation(seat: Seat, conversation_id: int | None) -> int:
    from novaberg.engine.conversation_service import Conversations

    conversations = Conversations(seat.engine)
    if conversation_id is None:
        return await conversations.start(seat.user)
    if not await conversations.owns(seat.user, conversation_id):
        raise Missing(f"There is no conversation {conversation_id}.")
    return conversation_id


async def do_talk(seat: Seat, message: str, conversation_id: int | None) -> TalkResult:
    """One turn, admitted by the engine's turn service as ``/api/turns`` admits it; a client
    that cancels before the answer reached it aborts the turn (stored as aborted)."""
    from novaberg.engine.service import Answer, Failed, Stored, TurnAsk
    from novaberg.validation import validate_message

    text = validate_message(message, seat.engine.settings)
    conversation = await _conversation(seat, conversation_id)
    turn = seat.service.admit(TurnAsk(seat.user, text, conversation))  # refused: nothing began
    reply = ""
    try:
        async for event in turn.events():
            if isinstance(event, Answer):
                reply = event.text
                turn.delivered()  # returned with the result: a cancel now stops nothing
            elif isinstance(event, Failed):
                if isinstance(event.error, asyncio.CancelledError):
                    raise event.error
                raise _failure(event.error) from event.error
            elif isinstance(event, Stored):
                result = event.result
                return TalkResult(
                    reply=reply or result.reply,
                    turn_id=result.turn_id,
                    conversation_id=result.conversation_id,
                )
    finally:
        turn.leave()  # cancelled before the answer: aborted; after it: nothing happens
    raise NovabergError("The turn ended without a result.")


def _failure(exc: BaseException) -> NovabergError:
    if isinstance(exc, NovabergError) and not isinstance(exc, BackendError | ModelOutputError):
        return exc
    if isinstance(exc, BackendError | ModelOutputError):
        return NovabergError("The model backend gave no usable answer; try again later.")
    return NovabergError("The turn failed; the server log names the error.")
