"""The details of a turn's trace for the web page's Why panel (``GET /api/turns/{id}/why``),
beside the contract object of ``GET /api/turns/{id}``: when each call was sent (the time axis
of the waterfall), every tribunal round's votes, the corrector's rounds, the nodes that ran,
and the memories the turn was given (the enricher's retrieval and what the thinker recalled),
each with its reason and, while the user still has it, its text.

Only the user's own turns; a turn whose words were forgotten has no trace left: its lists are
empty.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.engine.stored_turns import turn_owner
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.trace_document import GivenTrace, RouteTrace, TraceDocument, VoteTrace


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class GivenMessage(_Body):
    """A stored message the enricher found by its words."""

    message_id: int
    reason: str
    text: str | None = Field(description="Its words while the user has them; else null.")
    kind: Literal["message"]
    current: bool


class GivenItem(_Body):
    """A memory the turn was given."""

    id: int | None
    score: float | None
    reason: str
    text: str | None = Field(description="Its text while the user has it; else null.")
    kind: str | None
    current: bool | None


class CorrectorWhy(_Body):
    rounds: int
    reasons: list[str] = Field(description="The judges' reasons it was given, judge: reason.")
    applied: bool = Field(description="Whether its revision replaced the reply.")


class TurnWhy(_Body):
    """``GET /api/turns/{id}/why``: the turn's stored trace, for the page's Why panel."""

    turn_id: int
    status: str
    nodes: list[str] = Field(description="The nodes that ran, in order.")
    router: RouteTrace | None
    answered_by: str | None
    call_sent_ms: list[float | None] = Field(
        description="When each call was sent, ms into the turn."
    )
    rounds: list[list[VoteTrace]] = Field(description="Every tribunal round's votes.")
    corrector: CorrectorWhy | None
    retrieved: list[GivenMessage | GivenItem]
    recalled: list[GivenMessage | GivenItem]
    notices: list[str]


def _memories(
    store: MemoryStore, user: str, given: list[GivenTrace]
) -> list[GivenMessage | GivenItem]:
    items = store.by_ids(user, [g.id for g in given if g.id is not None])
    said = store.messages_by_ids(user, [g.message_id for g in given if g.message_id is not None])
    out: list[GivenMessage | GivenItem] = []
    for g in given:
        if g.message_id is not None:  # a stored message the enricher found by its words
            message = said.get(g.message_id)
            out.append(
                GivenMessage(
                    message_id=g.message_id,
                    reason=g.reason,
                    text=message.text if message else None,
                    kind="message",
                    current=message is not None,
                )
            )
            continue
        item = items.get(g.id) if g.id is not None else None
        out.append(
            GivenItem(
                id=g.id,
                score=g.score,
                reason=g.reason,
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
    trace = TraceDocument.read(row.trace_json)
    store = MemoryStore(db)
    corrector = trace.corrector
    return TurnWhy(
        turn_id=turn_id,
        status=row.status,
        nodes=trace.nodes,
        router=trace.router,
        answered_by=trace.answered_by,
        call_sent_ms=trace.call_sent_ms,
        rounds=trace.tribunal.every_round() if trace.tribunal is not None else [],
        corrector=CorrectorWhy(
            rounds=corrector.rounds, reasons=corrector.reasons, applied=corrector.applied
        )
        if corrector is not None
        else None,
        retrieved=_memories(store, user, trace.retrieval),
        recalled=_memories(store, user, trace.thinker.recalled if trace.thinker else []),
        notices=trace.notices,
    )
