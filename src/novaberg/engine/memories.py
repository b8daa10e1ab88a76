"""A user's memory as the doors reach it: the native API's memory routes (``/api/memory``)
and the MCP server's memory tools call :class:`Memories`, never the store, the retrieval or
the transfer functions themselves, so that a search, a correction or a forget is one
operation however it is asked for.

Every method is async and runs its database work in the database's worker threads (forget's
checkpoint or ``VACUUM FULL`` included): the event loop never waits for the disk. An id the
user has no memory of (another user's included) reads as ``None``; a request that cannot be
done is a :class:`~novaberg.errors.UsageError` saying why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from novaberg.memory.store import MemoryStore
from novaberg.storage.events import JobRow, jobs_of
from novaberg.storage.memories import Kind, MemoryItem, Profile
from novaberg.storage.turns import source_of

if TYPE_CHECKING:
    from novaberg.engine.core import Engine
    from novaberg.engine.remembered import Remembered
    from novaberg.memory.retrieval import Recall
    from novaberg.memory.transfer import ExportFile
    from novaberg.storage.forgetting import Forgotten

__all__ = [
    "MAX_ID",
    "Family",
    "JobRow",
    "Kind",
    "Memories",
    "MemoryItem",
    "Page",
    "Profile",
    "Shown",
]

MAX_ID = 2**63 - 1
"""The largest id a row can have (a signed 64-bit integer): a memory, a conversation, a turn,
an event; a larger one names none."""


@dataclass(frozen=True)
class Shown:
    """One memory with its chain of versions (newest first) and the turn it came from."""

    item: MemoryItem
    chain: list[MemoryItem]
    origin: str | None
    """The source turn's origin; ``None`` without a stored turn."""
    user_text: str | None
    """The user's words in that turn, if kept."""


@dataclass(frozen=True)
class Page:
    """A page of memories, newest first, and whether there is a next one."""

    items: list[MemoryItem]
    more: bool


@dataclass(frozen=True)
class Family:
    """What forgetting a memory would remove with it."""

    items: list[MemoryItem]
    """The memory itself first, then the others by id."""
    source_turns: list[int]
    """The turns whose words would be erased."""


class Memories:
    """The memory of the engine's users."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.store = MemoryStore(engine.db)

    async def page(self, user: str, *, kind: Kind | None, limit: int, offset: int) -> Page:
        """Every memory (superseded ones included), newest first, ``limit`` from ``offset``."""
        found = await self.store.db.run(
            self.store.items, user, kind=kind, limit=limit + 1, offset=offset
        )
        return Page(found[:limit], len(found) > limit)

    async def search(self, user: str, query: str, *, k: int, what: str) -> Recall:
        """What Nova would recall for ``query``, best first, and the stored messages its
        words find; ``what`` names the search in the trace of its model calls."""
        from novaberg.memory.retrieval import SEARCH_MESSAGES, Heed, recall
        from novaberg.telemetry import Trace

        engine = self._engine
        return await recall(
            engine.db, engine.settings, user, query, queue=engine.queue, trace=Trace(),
            max_items=k, budget_tokens=100_000, what=what, messages=Heed(SEARCH_MESSAGES),
        )  # fmt: skip

    async def get(self, user: str, memory_id: int) -> MemoryItem | None:
        if not 1 <= memory_id <= MAX_ID:
            return None
        return await self.store.db.run(self.store.get, user, memory_id)

    async def show(self, user: str, memory_id: int) -> Shown | None:
        """One memory with its history and its source (``memory show``)."""
        if not 1 <= memory_id <= MAX_ID:
            return None
        store = self.store

        def read() -> Shown | None:  # in a worker
            memory = store.get(user, memory_id)
            if memory is None:
                return None
            source = memory.source_turn_id
            turn = source_of(store.db, source) if source else None
            chain = store.history(user, memory_id)
            if turn is None:
                return Shown(memory, chain, None, None)
            return Shown(memory, chain, turn.origin, turn.user_text)

        return await store.db.run(read)

    async def correct(self, user: str, memory_id: int, text: str) -> MemoryItem | None:
        """Replace the current memory by ``text``: the new version. :class:`UsageError` if
        it is no longer current or ``text`` is empty."""
        if not 1 <= memory_id <= MAX_ID:
            return None
        return await self.store.db.run(self.store.correct, user, memory_id, text)

    async def retract(self, user: str, memory_id: int) -> MemoryItem | None:
        """End the current memory with no successor: the ended version. :class:`UsageError`
        if it is no longer current."""
        if not 1 <= memory_id <= MAX_ID:
            return None
        return await self.store.db.run(self.store.retract, user, memory_id)

    async def forget(self, user: str, memory_id: int) -> Forgotten | None:
        """Forget the memory and what was derived from it, everywhere, for good."""
        if not 1 <= memory_id <= MAX_ID:
            return None
        return await self.store.db.run(self.store.forget, user, memory_id)

    async def family(self, user: str, memory_id: int) -> Family | None:
        """What forgetting the memory would remove with it; nothing is changed."""
        if not 1 <= memory_id <= MAX_ID:
            return None
        store = self.store

        def read() -> Family | None:  # in a worker
            ids = store.family(user, memory_id)
            if ids is None:
                return None
            items = store.by_ids(user, ids)
            turns = {i.source_turn_id for i in items.values() if i.source_turn_id}
            ordered = sorted(ids, key=lambda i: (i != memory_id, i))
            return Family([items[i] for i in ordered if i in items], sorted(turns))

        return await store.db.run(read)

    async def timeline(self, user: str, first: date, last: date) -> list[MemoryItem]:
        """The current timeline entries from ``first`` to ``last``, by day."""
        return await self.store.db.run(
            self.store.events_between, user, first.isoformat(), last.isoformat()
        )

    async def profile(self, user: str) -> dict[str, Profile]:
        """The latest version of each profile part that was ever written."""
        return await self.store.db.run(self.store.profile, user)

    async def jobs(self, user: str) -> list[JobRow]:
        """The user's background memory jobs and how they ended, oldest first."""
        from novaberg.memory.jobs import JOB_TYPES

        db = self.store.db
        return await db.run(jobs_of, db, user, JOB_TYPES)

    async def remember(self, user: str, text: str, via: str) -> Remembered:
        """Store ``text`` as ``user``'s own statement (``via``: where it came from, for the
        trace); a new item starts consolidation and the other jobs, as after a turn."""
        from novaberg.engine.remembered import remember_statement

        engine = self._engine
        db = self.store.db
        memory = engine.settings.memory
        done = await db.run(remember_statement, db, engine.events, memory, user, text, via)
        if done.created:
            engine.start_background()
        return done

    async def export(self, user: str) -> ExportFile:
        """Everything Nova knows about the user: the file ``memory export`` writes."""
        from novaberg.memory.transfer import export_user

        db = self.store.db
        return await db.run(export_user, db, user)

    async def restore(self, user: str, raw: bytes) -> dict[str, int]:
        """Import an export of this user, checked whole first (:class:`UsageError` saying why
        it cannot be, and nothing changes), then give its items vectors: what was imported."""
        from novaberg.memory.transfer import embed_imported, import_user, parse_export

        export = parse_export(raw, user)
        db = self.store.db
        counts = await db.run(import_user, db, export)
        await db.run(embed_imported, db, self._engine.settings, user)  # by meaning too
        return counts
