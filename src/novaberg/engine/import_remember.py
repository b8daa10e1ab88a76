"""``import-chats --remember``: salience and the memory jobs over imported user messages.

:func:`~novaberg.engine.chat_import.import_chats` enqueued one ``weigh`` event per imported
user message; :func:`remember_imported` runs this user's, oldest message first, each followed
by the memory jobs its item got (consolidation, timeline, profile), all at background
priority in the engine's model queue. The events are the bookmark: an interrupted run
leaves the rest pending (a claim of a process that died is taken again at once), and the
same command goes on where it stopped. Off on the embedded model: a salience call there
costs seconds, and its jobs are off anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from novaberg.config import Settings
from novaberg.engine.core import Engine
from novaberg.errors import ConfigError
from novaberg.memory.jobs import IMPORT_TYPES, BackgroundJobs, JobOutcome
from novaberg.memory.store import MemoryStore, turn_item_key
from novaberg.storage import imports

EMBEDDED = (
    "--remember runs salience over every imported message, and the memory jobs after it: on "
    "the embedded model that takes seconds a message, and its memory jobs are off. Import "
    "without --remember (the chats are still found by their words), or run it again with "
    "Ollama or an OpenAI-compatible server (backend = ollama or openai)."
)


@dataclass(frozen=True)
class Estimate:
    """What remembering the waiting messages will cost, before it starts."""

    messages: int
    calls_low: int
    """One salience call a message: if none is worth remembering."""
    calls_high: int
    """And every memory job for each one: if all are (a timeline call only for a message
    with a date, so fewer)."""


@dataclass(frozen=True)
class Remembered:
    weighed: int
    remembered: int
    """Messages that became memory items."""
    failed: int
    jobs: int
    """Memory jobs run after them (done or failed)."""


def unweighed(engine: Engine, user: str) -> int:
    """Blocking: ``user``'s ``weigh`` events not done yet."""
    return imports.waiting(engine.db, user, IMPORT_TYPES)


def _kept(engine: Engine, user: str, turn_id: int | None) -> bool:
    """Blocking: whether the turn's message is now a memory item (the weigh job stored it)."""
    return MemoryStore.key_id(engine.db, user, turn_item_key(turn_id)) is not None


def estimate(engine: Engine, messages: int) -> Estimate:
    memory = engine.settings.memory
    per_item = 0.0
    if memory.jobs:  # consolidate, timeline, profile_adaptive; profile_core every core_every
        per_item = 3 + 1 / max(1, memory.core_every)
    return Estimate(messages, messages, messages + round(messages * per_item))


def refuse_embedded(settings: Settings, engine: Engine | None = None) -> None:
    """:class:`ConfigError` on the embedded model: named in the settings (checked before the
    engine opens), or chosen by ``auto`` for want of a server (once it has)."""
    if settings.backend == "embedded" or (
        engine is not None and engine.chain.primary.name == "embedded"
    ):
        raise ConfigError(EMBEDDED)


async def remember_imported(
    engine: Engine, user: str, advanced: Callable[[JobOutcome], None] | None = None
) -> Remembered:
    """Weigh ``user``'s waiting imported messages, oldest first, each followed by the memory
    jobs it caused; ``advanced`` after each message's weigh job."""
    refuse_embedded(engine.settings, engine)
    jobs = BackgroundJobs(engine.background.job_context)
    weighed = remembered = failed = ran = 0
    while True:
        event = await engine.db.run(engine.events.claim, IMPORT_TYPES, None, None, user)
        if event is None:
            break
        outcome = await jobs.run(event)
        weighed += 1
        failed += outcome.status == "failed"
        if await engine.db.run(_kept, engine, user, event.turn_id):
            remembered += 1
            engine.embed_later(user)  # its vector now, as a turn's item gets one
            ran += len(await engine.run_background())
        if advanced is not None:
            advanced(outcome)
    await engine.vectors_written()
    return Remembered(weighed, remembered, failed, ran)
