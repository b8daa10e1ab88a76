"""The details of a turn's trace for the web page's Why panel (``GET /api/turns/{id}/why``),
beside the contract object of ``GET /api/turns/{id}``: when each call was sent (the time axis
of the waterfall), every tribunal round's votes, the corrector's rounds, the nodes that ran,
and the memories the turn was given (the enricher's retrieval and what the thinker recalled),
each with its reason and, while the user still has it, its text.

Only the user's own turns; a turn whose words were forgotten has no trace left: its lists are
empty.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from novaberg.engine.stored_turns import turn_owner
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GivenMessage(_Body):
    """A stored message the enricher found by its words."""

    message_id: JsonValue
    reason: JsonValue
    text: str | None = Field(description="Its words while the user has them; else null.")
    kind: Literal["message"]
    current: bool


class GivenItem(_Body):
    """A memory the turn was given."""

    id: JsonValue
    score: JsonValue
    reason: JsonValue
    text: str | None = Field(description="Its text while the user has it; else null.")
    kind: str | None
    current: bool | None


class CorrectorWhy(_Body):
    rounds: JsonValue
    reasons: JsonValue
    applied: JsonValue


class TurnWhy(_Body):
    """``GET /api/turns/{id}/why``: the turn's stored trace, for the page's Why panel."""

    turn_id: int
    status: str
    nodes: JsonValue = Field(description="The nodes that ran, in order.")
    router: JsonValue
    answered_by: JsonValue
    call_sent_ms: JsonValue = Field(description="When each call was sent, ms into the turn.")
    rounds: JsonValue = Field(description="Every tribunal round's votes.")
    corrector: CorrectorWhy | None
    retrieved: list[GivenMessage | GivenItem]
    recalled: list[GivenMessage | GivenItem]
    notices: JsonValue


def _memories(
    store: MemoryStore, user: str, given: list[dict[str, Any]]
) -> list[GivenMessage | GivenItem]:
    ids = [int(g["id"]) for g in given if isinstance(g.get("id"), int)]
    items = store.by_ids(user, ids)
    said = store.messages_by_ids(
        user, [int(g["message_id"]) for g in given if isinstance(g.get("message_id"), int)]
    )
    out: list[GivenMessage | GivenItem] = []
    for g in given:
        if "message_id" in g:  # a stored message the enricher found by its words
            message = said.get(int(g.get("message_id") or 0))
            out.append(
                GivenMessage(
                    message_id=g.get("message_id"),
                    reason=g.get("reason"),
                    text=message.text if message else None,
                    kind="message",
                    current=message is not None,
                )
            )
            continue
        item = items.get(int(g.get("id") or 0))
        out.append(
            GivenItem(
                id=g.get("id"),
                score=g.get("score"),
                reason=g.get("reason"),
                text=item.text if item else None,
                kind=item.kind if item else None,
                current=item.current if item else None,
            )
        )
    return out


def turn_why(db: Database, turn_id: int, user: str) -> TurnWhy | None:
    """The Why details of the user's turn ``turn_id``; ``None`` when the user has none."""
    row = turn_owner(db, turn_id)
    if row is None or row.user_id != user:
        return None
    trace: dict[str, Any] = json.loads(row.trace_json or "{}") or {}
    store = MemoryStore(db)
    court = trace.get("tribunal") or {}
    thinker = trace.get("thinker") or {}
    corrector = trace.get("corrector") or {}
    return TurnWhy(
        turn_id=turn_id,
        status=row.status,
        nodes=trace.get("nodes") or [],
        router=trace.get("router"),
        answered_by=trace.get("answered_by"),
        call_sent_ms=trace.get("call_sent_ms"),
        rounds=court.get("history") or ([court["votes"]] if court.get("votes") else []),
        corrector=CorrectorWhy(
            rounds=corrector.get("rounds", 0),
            reasons=corrector.get("reasons") or [],
            applied=corrector.get("applied"),
        )
        if corrector
        else None,
        retrieved=_memories(store, user, trace.get("retrieval") or []),
        recalled=_memories(store, user, thinker.get("recalled") or []),
        notices=trace.get("notices") or [],
    )
