"""What Nova remembers about a user: :class:`MemoryStore`, the one door to it. The rows and
queries are :class:`~novaberg.storage.memories.MemoryRows` (and forgetting's walk over the
database, :mod:`novaberg.storage.forgetting`); what is added here are the rules: a correction
supersedes an item by a new one (a dated one moves to the day its new words name, and the
proactive messages scheduled for it follow), a retraction ends it, a profile statement resting
on either leaves the profile, and an item's history is its chain of versions.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from novaberg.errors import UsageError
from novaberg.proactive.schedule import follow_event
from novaberg.storage import forgetting
from novaberg.storage.forgetting import Forgotten
from novaberg.storage.memories import MemoryItem, MemoryRows, drop_from_profiles
from novaberg.storage.sql import Connection


def version_why(item: MemoryItem) -> str:
    """Where one version of a chain came from, as ``memory show`` and ``GET /api/memory/{id}``
    list it: a turn, a correction, a consolidation, an import or a job."""
    if item.item_key.startswith("correct:") and item.source_turn_id is not None:
        return f"corrected in turn {item.source_turn_id} (memory {item.item_key.split(':', 1)[1]})"
    if item.item_key.startswith("correct:"):
        return f"corrected by hand (memory {item.item_key.split(':', 1)[1]})"
    if item.source_turn_id is not None:
        return f"from turn {item.source_turn_id}"
    if item.derived_from:
        return f"consolidated from {', '.join(map(str, item.derived_from))}"
    return item.item_key.split(":", 1)[0]  # an import, a job


def version_ended(item: MemoryItem) -> Literal["retracted", "superseded"] | None:
    """How a version ended: ``None`` while it is current."""
    if item.valid_to is None:
        return None
    return "retracted" if item.superseded_by is None else "superseded"


class MemoryStore(MemoryRows):
    """A user's memory: the repository's rows and queries, and the rules on them."""

    # -- corrections -------------------------------------------------------------------
    def correct(self, user: str, memory_id: int, text: str) -> MemoryItem | None:
        """Replace the user's current item ``memory_id`` by ``text`` (by hand: ``memory
        correct``, ``PATCH /api/memory/{id}``): :meth:`correct_in` in a transaction of its
        own. ``None`` if the user has no such item; :class:`~novaberg.errors.UsageError` if it
        is no longer current or ``text`` is empty."""
        with self.db.transaction() as c:
            try:
                new_id = self.correct_in(c, user, memory_id, text)
            except LookupError:
                return None
            return self._get(c, user, new_id)

    def retract(self, user: str, memory_id: int) -> MemoryItem | None:
        """End the user's current item ``memory_id`` with no successor: :meth:`retract_in` in a
        transaction of its own. ``None`` if the user has no such item."""
        with self.db.transaction() as c:
            try:
                self.retract_in(c, user, memory_id)
            except LookupError:
                return None
            return self._get(c, user, memory_id)

    @classmethod
    def correct_in(
        cls,
        c: Connection,
        user: str,
        memory_id: int,
        text: str,
        *,
        source_turn_id: int | None = None,
        source_message_id: int | None = None,
    ) -> int:
        """In the caller's transaction: a new item of the same kind, importance and date, with
        ``derived_from`` the old one and the key ``correct:{id}`` (and the turn it was said in,
        when said in conversation), supersedes the current item ``memory_id`` (its
        ``valid_to`` and ``superseded_by`` set); profile statements resting on the old one are
        left out of a new profile version. Returns the new id. :class:`LookupError` if the
        user has no such item, :class:`UsageError` if it is no longer current or ``text`` is
        empty."""
        if not text.strip():
            raise UsageError("A correction needs the new text: it is empty.")
        old = cls._current_of(c, user, memory_id)
        day = _redated(old, text)
        added = cls.add(
            c, user, old.kind, text, old.importance, f"correct:{old.id}",  # type: ignore[arg-type]
            derived_from=[old.id], happens_on=day,
            source_turn_id=source_turn_id, source_message_id=source_message_id,
        )  # fmt: skip
        cls.supersede(c, old.id, added.id)
        drop_from_profiles(c, user, old.id)
        if day is not None:  # a timeline event: its messages follow it, to its new day
            follow_event(c, user, old.id, added.id, text.strip(), date.fromisoformat(day))
        return added.id

    @classmethod
    def retract_in(cls, c: Connection, user: str, memory_id: int) -> None:
        """In the caller's transaction: end the current item ``memory_id`` with no successor
        ("that's wrong", "I don't have the dog any more"): ``valid_to`` set, ``superseded_by``
        empty; kept, with its history, until forgotten. Profile statements resting on it are
        left out of a new profile version. :class:`LookupError` if the user has no such item,
        :class:`UsageError` if it is no longer current."""
        old = cls._current_of(c, user, memory_id)
        cls.end(c, old.id)
        drop_from_profiles(c, user, old.id)

    def history(self, user: str, memory_id: int) -> list[MemoryItem]:
        """Every version of the item's chain (what it replaced and what replaced it), newest
        first; empty if the user has no such item."""
        items = {i.id: i for i in self.items(user)}
        if memory_id not in items:
            return []
        before = {i.superseded_by: i.id for i in items.values() if i.superseded_by is not None}
        chain = [memory_id]
        while True:  # newer versions
            nxt = items[chain[-1]].superseded_by
            if nxt is None or nxt not in items or nxt in chain:
                break
            chain.append(nxt)
        chain.reverse()
        while chain[-1] in before and before[chain[-1]] not in chain:  # older versions
            chain.append(before[chain[-1]])
        return [items[i] for i in chain]

    @classmethod
    def _current_of(cls, c: Connection, user: str, memory_id: int) -> MemoryItem:
        item = cls._get(c, user, memory_id)
        if item is None:
            raise LookupError(f"no memory {memory_id}")
        if item.valid_to is not None:
            then = (
                f"superseded by memory {item.superseded_by}"
                if item.superseded_by is not None
                else "retracted"
            )
            raise UsageError(
                f"Memory {memory_id} is no longer current ({then} at {item.valid_to}): "
                "correct or retract its current version (novaberg memory show shows the chain)."
            )
        if item.consolidated_into is not None:
            raise UsageError(
                f"Memory {memory_id} is part of fact {item.consolidated_into} now: correct "
                "or retract that fact."
            )
        return item

    # -- forgetting --------------------------------------------------------------------
    def family(self, user: str, memory_id: int) -> list[int] | None:
        """The ids :meth:`forget` would remove with ``memory_id`` (itself included), without
        removing anything; ``None`` if the user has no such item."""
        return forgetting.family_of(self.db, user, memory_id)

    def forget(self, user: str, memory_id: int) -> Forgotten | None:
        """Remove an item and everything derived from it, everywhere, for good: every place
        of :data:`~novaberg.storage.forgetting.FORGET_MAP`, walked in its order. Returns
        ``None`` if the user has no such item.

        The family of an item: the item; the long-term facts derived from it; the sources of
        a forgotten fact (they say the same thing). A fact that a forgotten fact had
        superseded becomes current again.
        """
        return forgetting.forget(self.db, user, memory_id)


def _redated(old: MemoryItem, text: str) -> str | None:
    """A timeline event's day after a correction to ``text``: the date the new words name
    with a number in it ("Mum's birthday on 15 June", "am 15.6."; words alone such as "may"
    are too often not a date), read by dateparser from the start of the old day's year; else
    the old day. ``None`` for an item that is not dated."""
    if old.happens_on is None:
        return None
    from dateparser.search import search_dates  # heavy, and only for a dated correction

    start = date.fromisoformat(old.happens_on).replace(month=1, day=1)
    found = search_dates(
        text,
        languages=["en", "de"],
        settings={
            "RELATIVE_BASE": datetime.combine(start, datetime.min.time()),
            "PREFER_DATES_FROM": "future",
        },
    )
    dated = [moment for words, moment in found or () if any(ch.isdigit() for ch in words)]
    return dated[0].date().isoformat() if dated else old.happens_on


def turn_item_key(turn_id: int | None) -> str:
    """The item key of the short-term memory a turn (or an imported message's turn) made:
    one per turn, so storing it again adds nothing."""
    return f"turn:{turn_id}:short_term"
