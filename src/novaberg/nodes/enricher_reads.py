"""What the enricher reads from the database for a turn (the conversation's recent history,
the timeline's events, the user's profile), read from the turn's start.

None of it depends on the router's answer, so the engine starts the reads with the turn,
beside the router's call (as it starts the memory search), and the enricher finds them
done: one hand-over to a database thread fewer between the router's answer and the
responder's request (issue 21). The turn's own messages are stored only at its end, so the
history read at its start is the one the enricher would read after the router.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database, Message
from novaberg.storage.memories import MemoryItem, Profile

TIMELINE_BACK = timedelta(days=1)
TIMELINE_AHEAD = timedelta(days=14)


@dataclass(frozen=True)
class EnricherReads:
    history: list[Message]
    """The recent completed exchanges: stored ones, or the front-end's shown chat."""
    events: list[MemoryItem]
    """Timeline events from yesterday to two weeks ahead."""
    profile: dict[str, Profile]
    """The profile's parts as stored (the enricher leaves out what a correction ended)."""


def read_for_enricher(
    db: Database,
    user: str,
    conversation_id: int,
    shown: Sequence[Message] | None,
    turns: int,
    today: date,
) -> EnricherReads:
    """Blocking, in a database worker: the enricher's reads for one turn. ``shown``: the
    chat as a front-end that resends it shows it, which is then the history."""
    store = MemoryStore(db)
    if shown is not None:
        history = list(shown[-turns * 2 :]) if turns > 0 else []
    else:
        history = db.history(conversation_id, turns)
    events = store.events_between(
        user, (today - TIMELINE_BACK).isoformat(), (today + TIMELINE_AHEAD).isoformat()
    )
    return EnricherReads(history, events, store.profile(user))


def start_reads(
    db: Database, user: str, conversation_id: int, shown: Sequence[Message] | None, turns: int
) -> asyncio.Task[EnricherReads]:
    """Start :func:`read_for_enricher` now, in a database worker."""
    return asyncio.ensure_future(
        db.run(read_for_enricher, db, user, conversation_id, shown, turns, date.today())
    )
