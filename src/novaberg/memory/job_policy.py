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
    ``consolidate``, ``profile_adaptive`` and ``timeline``; ``profile_core`` every
    ``memory.core_every`` items of the user. None when ``memory.jobs`` is off.

    They run oldest first, in this order: the timeline job last, as it alone needs dateparser,
    whose warm-up (about 250 ms of CPU in a fresh process) then runs beside the profile jobs'
    model calls instead of between two calls (``engine/background.py``). The profiles do not
    read the timeline's events (they leave out memories of kind ``event``)."""
    if not memory.jobs:
        return []
    types = ["consolidate", "profile_adaptive"]
    if MemoryStore.count(c, user, "short_term") % memory.core_every == 0:
        types.append("profile_core")
    types.append("timeline")
    payload = EventPayload(memory_id=memory_id, turn_id=turn_id)
    return [events.enqueue(conversation, turn_id, t, payload, c) for t in types]
