"""Details the web page shows and no CLI command prints.

``GET /api/turns/{id}/why``: what the web page's Why panel shows beside the contract object
of ``GET /api/turns/{id}`` — from the turn's stored trace: when each call was sent (the time
axis of the waterfall), every tribunal round's votes, the corrector's rounds, the nodes that
ran, and the memories the turn was given (the enricher's retrieval and what the thinker
recalled), each with its reason and, while the user still has it, its text.

Only the key's user's turns; another user's turn answers 404 like a missing one. A turn whose
words were forgotten has no trace left: its lists are empty.

``GET /api/memory/{id}/family``: what ``DELETE /api/memory/{id}`` would forget with the item
(the facts derived from it, the items a forgotten fact was made of), so that the page's
confirmation can say what else goes. Nothing is changed.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from novaberg.engine.stored_turns import turn_owner
from novaberg.memory.store import MemoryStore
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.storage.db import Database
from novaberg.text import quoted

router = APIRouter(prefix="/api")

MAX_ID = 2**63 - 1


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


class FamilyItem(_Body):
    id: int
    kind: str
    text: str


class Family(_Body):
    """``GET /api/memory/{id}/family``: what forgetting the memory would remove with it."""

    id: int
    items: list[FamilyItem] = Field(description="The memory itself first, then the others.")
    source_turns: list[int] = Field(description="The turns whose words would be erased.")


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


@router.get("/turns/{turn_id}/why", tags=["turns"], responses=api_errors(404))
async def why(
    turn_id: int, request: Request, user: Annotated[str, Depends(require_user)]
) -> TurnWhy:
    """The details of a turn's trace for the web page's Why panel."""
    db = engine_of(request).db
    found = await db.run(turn_why, db, turn_id, user) if 1 <= turn_id <= MAX_ID else None
    if found is None:
        raise ApiProblem(404, f"There is no turn {quoted(turn_id)}.")
    return found


def forget_family(db: Database, user: str, memory_id: int) -> Family | None:
    store = MemoryStore(db)
    ids = store.family(user, memory_id)
    if ids is None:
        return None
    items = store.by_ids(user, ids)
    turns = {i.source_turn_id for i in items.values() if i.source_turn_id}
    return Family(
        id=memory_id,
        items=[
            FamilyItem(id=i, kind=items[i].kind, text=items[i].text)
            for i in sorted(ids, key=lambda i: (i != memory_id, i))
            if i in items
        ],
        source_turns=sorted(turns),
    )


@router.get("/memory/{memory_id}/family", tags=["memory"], responses=api_errors(404))
async def family(
    memory_id: int, request: Request, user: Annotated[str, Depends(require_user)]
) -> Family:
    """What forgetting the memory would remove with it (``items``, the memory itself first
    among them, and the turns whose words would be erased); nothing is changed."""
    db = engine_of(request).db
    found = await db.run(forget_family, db, user, memory_id) if 1 <= memory_id <= MAX_ID else None
    if found is None:
        raise ApiProblem(404, f"There is no memory {quoted(memory_id)}.")
    return found
