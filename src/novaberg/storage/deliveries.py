"""Which self-triggered follow-ups and proactive messages (Nova's messages of a turn of origin
``self_trigger`` or ``proactive``) a response has shown the user (table
``followup_deliveries``): a follow-up is delivered once, by whichever response claims it first.

Channels: ``inline`` (the CLI and the non-streamed ``POST /api/turns``, which wait for their
follow-ups), ``api`` (the streamed ``POST /api/turns``), ``openai`` (a ``/v1`` response: the
one of its turn when the follow-up was ready in time, else the next one in that conversation).
``GET /api/events`` sends every follow-up regardless: it is the log, not a delivery.

A claim is an ``INSERT … ON CONFLICT DO NOTHING RETURNING``: of two responses racing for one
follow-up, exactly one gets it back.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

Channel = Literal["inline", "api", "openai"]


@dataclass(frozen=True)
class Followup:
    turn_id: int
    parent_turn_id: int | None
    text: str


def claim(c: Connection, turn_ids: Iterable[int], channel: Channel) -> list[int]:
    """Mark these follow-up turns delivered inside transaction ``c``; the ids this call
    claimed (those no other response had delivered), in the order given."""
    stamp = now()
    claimed = []
    for turn_id in turn_ids:
        row = c.execute(
            "INSERT INTO followup_deliveries (turn_id, channel, delivered_at) VALUES (?, ?, ?) "
            "ON CONFLICT (turn_id) DO NOTHING RETURNING turn_id",
            (turn_id, channel, stamp),
        ).one()
        if row is not None:
            claimed.append(turn_id)
    return claimed


def mark_delivered(db: Database, turn_ids: list[int], channel: Channel) -> list[int]:
    """:func:`claim` in a transaction of its own."""
    if not turn_ids:
        return []
    with db.transaction() as c:
        return claim(c, turn_ids, channel)


def claim_waiting(
    db: Database, conversation_id: int, channel: Channel, before_turn: int | None = None
) -> list[Followup]:
    """The conversation's stored follow-ups no response has delivered yet, oldest first,
    claimed for this one (a forgotten follow-up is left out: it has nothing to say);
    ``before_turn``: only follow-ups of turns before that one."""
    # a proactive message set by a command has no parent: its own turn counts
    limit = "" if before_turn is None else " AND COALESCE(t.parent_turn_id, t.id) < ?"
    params = (conversation_id,) if before_turn is None else (conversation_id, before_turn)
    with db.transaction() as c:
        rows = c.execute(
            "SELECT t.id, t.parent_turn_id, m.content FROM turns t "
            "JOIN messages m ON m.turn_id = t.id AND m.role = 'assistant' "
            "LEFT JOIN followup_deliveries d ON d.turn_id = t.id "
            "WHERE t.conversation_id = ? AND t.origin IN ('self_trigger', 'proactive') "
            "AND t.status = 'done' "
            f"AND t.forgotten_at IS NULL AND d.turn_id IS NULL{limit} ORDER BY t.id",
            params,
        ).rows
        return _claimed(c, rows, channel)


def claim_proactive(db: Database, user: str, channel: Channel) -> list[Followup]:
    """The user's proactive messages (in any of their conversations) no response or chat has
    shown yet, oldest first, claimed for this one (``novaberg chat``: at its start, and while
    it is open)."""
    with db.transaction() as c:
        rows = c.execute(
            "SELECT t.id, t.parent_turn_id, m.content FROM turns t "
            "JOIN conversations v ON v.id = t.conversation_id "
            "JOIN messages m ON m.turn_id = t.id AND m.role = 'assistant' "
            "LEFT JOIN followup_deliveries d ON d.turn_id = t.id "
            "WHERE v.user_id = ? AND t.origin = 'proactive' AND t.status = 'done' "
            "AND t.forgotten_at IS NULL AND d.turn_id IS NULL ORDER BY t.id",
            (user,),
        ).rows
        return _claimed(c, rows, channel)


def _claimed(c: Connection, rows: list[dict[str, Any]], channel: Channel) -> list[Followup]:
    """Of the messages found (``id``, ``parent_turn_id``, ``content``), those this response
    claims (:func:`claim`), in the order found."""
    claimed = set(claim(c, [int(r["id"]) for r in rows], channel))
    return [
        Followup(
            int(r["id"]),
            None if r["parent_turn_id"] is None else int(r["parent_turn_id"]),
            str(r["content"]),
        )
        for r in rows
        if int(r["id"]) in claimed
    ]
