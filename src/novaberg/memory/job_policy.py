"""The memory-job policy: which background jobs a new short-term item gets (run by
:mod:`novaberg.memory.jobs`), enqueued in the transaction that stores the item: a turn's
(:mod:`novaberg.engine.turn_store`) or an imported message's ``weigh`` job."""

from __future__ import annotations

from novaberg.config import Memory
from novaberg.jobs.events import EventQueue
from novaberg.memory.store import MemoryStore
from novaberg.storage.events import EventPayload
from novaberg.storage.sql import Connection


def enqueue_memory_jobs(
    c: Connection,
    events: EventQueue,
    memory: Memory,
    user: str,
    memory_id: int,
    turn_id: int,
    conversation: int,
) -> list[int]:
    """Enqueue the jobs of a new short-term item inside the turn's transaction ``c``: always
    ``consolidate``, ``timeline`` and ``profile_adaptive``; ``profile_core`` every
    ``memory.core_every`` items of the user. None when ``memory.jobs`` is off."""
    if not memory.jobs:
        return []
    types = ["consolidate", "timeline", "profile_adaptive"]
    if MemoryStore.count(c, user, "short_term") % memory.core_every == 0:
        types.append("profile_core")
    payload = EventPayload(memory_id=memory_id, turn_id=turn_id)
    return [events.enqueue(conversation, turn_id, t, payload, c) for t in types]
