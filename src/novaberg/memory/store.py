"""What Nova remembers about a user, and the queries on it (SQLite and PostgreSQL alike).

One ``memories`` table holds every kind:

- ``short_term``: one item per salient turn (the salience node's one-sentence summary of the
  USER's message), with the turn and message it came from;
- ``long_term``: facts consolidated from short-term items by a background job; a fact that a
  newer one replaces keeps its row with ``valid_to`` set (Zep-style validity), and is never
  retrieved as current;
- ``event``: timeline entries with a resolved date (``happens_on``).

Every write carries an ``item_key`` (one per source and item) and is ``ON CONFLICT DO
NOTHING``: a job or turn that runs again after a crash cannot store anything twice.

The user profile is versioned per part (``core``, ``adaptive``); each version is a list of
statements, each naming the memory ids it was derived from, so that :meth:`forget` can
remove exactly the statements that came from a forgotten item.
"""

from __future__ import annotations

import json
import logging
import re
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from datetime import date, datetime
from typing import Any, Literal, NamedTuple

from novaberg.errors import StorageError, UsageError
from novaberg.proactive.schedule import follow_event
from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection
from novaberg.storage.text import MEMORY_TEXT_LIMIT, clean_text
from novaberg.text import same_text

log = logging.getLogger("novaberg")

Kind = Literal["short_term", "long_term", "event"]
ProfilePart = Literal["core", "adaptive"]
FORGOTTEN = "[forgotten at the user's request]"
COLUMNS = (
    "id, kind, text, importance, item_key, source_turn_id, source_message_id, derived_from, "
    "happens_on, valid_from, valid_to, superseded_by, consolidated_into, created_at"
)


@dataclass(frozen=True)
class MemoryItem:
    id: int
    kind: str
    text: str
    importance: float
    item_key: str
    source_turn_id: int | None
    source_message_id: int | None
    derived_from: list[int]
    happens_on: str | None
    valid_from: str
    valid_to: str | None
    superseded_by: int | None
    consolidated_into: int | None
    created_at: str

    @property
    def current(self) -> bool:
        return self.valid_to is None

    def view(self) -> dict[str, Any]:
        """The item as a plain dict, a copy (``dataclasses.asdict``'s, field by field: it
        deep-copied every string, a third of the time of listing 1,000 items)."""
        found = {name: getattr(self, name) for name in VIEW_FIELDS}
        found["derived_from"] = list(self.derived_from)
        return found

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MemoryItem:
        fields = {k: row[k] for k in COLUMNS.split(", ")}
        fields["derived_from"] = json.loads(row["derived_from"] or "[]")
        fields["importance"] = float(row["importance"])
        return cls(**fields)


VIEW_FIELDS = tuple(f.name for f in fields(MemoryItem))


class Candidate(NamedTuple):
    """What retrieval needs to score an item, without loading the item."""

    id: int
    kind: str
    importance: float
    valid_from: str
    chars: int
    rel: float

    @classmethod
    def from_row(cls, r: dict[str, Any]) -> Candidate:
        return cls(
            int(r["id"]), r["kind"], float(r["importance"]), r["valid_from"], int(r["chars"]),
            float(r["rel"]),
        )  # fmt: skip


@dataclass(frozen=True)
class SaidBefore:
    """A stored message found by its words: the conversation as memory."""

    message_id: int
    conversation_id: int
    turn_id: int
    role: str
    """``user`` or ``assistant`` (Nova)."""
    text: str
    at: str
    """When it was said (``created_at``)."""
    rel: float


@dataclass(frozen=True)
class Added:
    id: int
    created: bool
    """False when a row with the same key existed (a repeated write)."""
    notices: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Statement:
    text: str
    sources: list[int]


@dataclass(frozen=True)
class Profile:
    part: str
    version: int
    text: str
    statements: list[Statement]
    created_at: str


@dataclass(frozen=True)
class Forgotten:
    ids: list[int]
    profile_versions: int
    """How many stored profile versions lost a statement derived from the forgotten items."""
    turns_scrubbed: int
    """Turns whose words were erased: the source turns and their second passes."""
    later_turns: int = 0
    """Later turns that were given a forgotten item: Nova's reply and the trace erased."""
    events_scrubbed: int = 0
    calls_scrubbed: int = 0
    files: str = ""
    """What was done so that the text is not left in the database files either."""


def version_view(item: MemoryItem) -> dict[str, Any]:
    """One version of a chain as ``memory show`` and ``GET /api/memory/{id}`` list it: its
    text, validity, what replaced it, and where it came from (``why``)."""
    if item.item_key.startswith("correct:") and item.source_turn_id is not None:
        why = f"corrected in turn {item.source_turn_id} (memory {item.item_key.split(':', 1)[1]})"
    elif item.item_key.startswith("correct:"):
        why = f"corrected by hand (memory {item.item_key.split(':', 1)[1]})"
    elif item.source_turn_id is not None:
        why = f"from turn {item.source_turn_id}"
    elif item.derived_from:
        why = f"consolidated from {', '.join(map(str, item.derived_from))}"
    else:
        why = item.item_key.split(":", 1)[0]  # an import, a job
    ended = None
    if item.valid_to is not None:
        ended = "retracted" if item.superseded_by is None else "superseded"
    return {
        "id": item.id,
        "text": item.text,
        "valid_from": item.valid_from,
        "valid_to": item.valid_to,
        "superseded_by": item.superseded_by,
        "ended": ended,
        "why": why,
    }


def pack_vector(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


class MemoryStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- writes (inside a caller's transaction) ----------------------------------------
    @staticmethod
    def add(
        c: Connection,
        user: str,
        kind: Kind,
        text: str,
        importance: float,
        item_key: str,
        *,
        source_turn_id: int | None = None,
        source_message_id: int | None = None,
        derived_from: Iterable[int] = (),
        happens_on: str | None = None,
        valid_from: str | None = None,
    ) -> Added:
        cleaned = clean_text(text, MEMORY_TEXT_LIMIT, what=f"memory text ({item_key})")
        for notice in cleaned.notices:
            log.warning("%s", notice)
        stamp = now()
        row = c.execute(
            "INSERT INTO memories (user_id, kind, text, importance, item_key, source_turn_id, "
            "source_message_id, derived_from, happens_on, valid_from, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (user_id, item_key) DO NOTHING RETURNING id",
            (
                user,
                kind,
                cleaned.text,
                max(0.0, min(1.0, float(importance))),
                item_key,
                source_turn_id,
                source_message_id,
                json.dumps(sorted(set(derived_from))),
                happens_on,
                valid_from or stamp,
                stamp,
            ),
        ).scalar()
        if row is not None:
            return Added(int(row), True, cleaned.notices)
        existing = c.execute(
            "SELECT id FROM memories WHERE user_id = ? AND item_key = ?", (user, item_key)
        ).scalar()
        return Added(int(existing), False, cleaned.notices)

    @staticmethod
    def supersede(c: Connection, old_id: int, new_id: int) -> None:
        """``old_id`` stops being current: kept, with its validity end and successor."""
        c.execute(
            "UPDATE memories SET valid_to = ?, superseded_by = ? WHERE id = ? AND valid_to IS NULL",
            (now(), new_id, old_id),
        )

    @staticmethod
    def cover(c: Connection, item_id: int, fact_id: int) -> None:
        """A short-term item is now covered by a long-term fact (not retrieved twice)."""
        c.execute("UPDATE memories SET consolidated_into = ? WHERE id = ?", (fact_id, item_id))
        row = c.execute("SELECT derived_from FROM memories WHERE id = ?", (fact_id,)).one()
        if row is not None:
            sources = set(json.loads(row["derived_from"] or "[]")) | {item_id}
            c.execute(
                "UPDATE memories SET derived_from = ? WHERE id = ?",
                (json.dumps(sorted(sources)), fact_id),
            )

    @staticmethod
    def count(c: Connection, user: str, kind: Kind) -> int:
        """How many items of this kind the user has (inside the caller's transaction)."""
        n = c.execute(
            "SELECT COUNT(*) AS n FROM memories WHERE user_id = ? AND kind = ?", (user, kind)
        ).scalar()
        return int(n)

    @staticmethod
    def set_vector(c: Connection, memory_id: int, model: str, vector: Sequence[float]) -> None:
        # m009: one vector per item and embedder (novaberg.memory.vectors.VectorIndex.upsert
        # also records the embedder's length and feeds the sqlite-vec/pgvector index)
        c.execute(
            "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
            "SELECT id, ?, user_id, ? FROM memories WHERE id = ? "
            "ON CONFLICT (memory_id, embedder) DO NOTHING",
            (model, pack_vector(vector), memory_id),
        )

    # -- reads -------------------------------------------------------------------------
    def get(self, user: str, memory_id: int) -> MemoryItem | None:
        row = self.db.one(
            f"SELECT {COLUMNS} FROM memories WHERE user_id = ? AND id = ?", (user, memory_id)
        )
        return None if row is None else MemoryItem.from_row(row)

    def by_ids(self, user: str, ids: Iterable[int]) -> dict[int, MemoryItem]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        # By primary key alone (a user_id condition here makes SQLite scan the user's index);
        # the owner is checked on each row.
        rows = self.db.query(
            f"SELECT user_id, {COLUMNS} FROM memories WHERE id IN ({marks})", wanted
        )
        return {int(r["id"]): MemoryItem.from_row(r) for r in rows if r["user_id"] == user}

    def items(
        self,
        user: str,
        *,
        kind: str | None = None,
        current_only: bool = False,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[MemoryItem]:
        """Newest first; ``offset`` (with a ``limit``) skips that many of the newest."""
        if offset and limit is None:
            raise ValueError("an offset needs a limit")
        where = ["user_id = ?"]
        params: list[Any] = [user]
        if kind is not None:
            where.append("kind = ?")
            params.append(kind)
        if current_only:
            where.append("valid_to IS NULL")
        sql = f"SELECT {COLUMNS} FROM memories WHERE {' AND '.join(where)} ORDER BY id DESC"
        if limit is not None:
            sql += " LIMIT ? OFFSET ?"
            params.extend((limit, offset))
        return [MemoryItem.from_row(r) for r in self.db.query(sql, params)]

    def fulltext(
        self,
        user: str,
        terms: Sequence[str],
        ranked: int = 200,
        facts: int = 50,
        window: int = 1000,
    ) -> list[Candidate]:
        """Retrievable items matching any term (prefix match), with their relevance: the
        ``ranked`` best-matching among the user's ``window`` newest matching items of any
        kind, plus their ``facts`` best-matching facts and events however old. Relevance is
        BM25 of the text on SQLite (FTS5), ``ts_rank_cd`` divided by 1 + log(length) on
        PostgreSQL. Superseded facts and covered items are left out.

        Best-ranked, not newest: on LoCoMo's long conversations (``benchmarks/locomo.py``)
        the newest 200 matches so often left a question's best match out that recall@5 was
        0.438, and 0.555 with the best-ranked. Ranking costs about 2 µs a match (8 ms for
        the 12k matches of a question at 100k items), so the user's newest ``window``
        matches are ranked (4.5 ms at 100k items); a history of up to ``window`` matches is
        ranked whole. The owner is checked before the window is cut, so one user's
        candidates never depend on other users' items.
        Terms are word characters only (:func:`novaberg.memory.retrieval.query_terms`).
        """
        if not terms:
            return []
        cols = "m.id, m.kind, m.importance, m.valid_from, length(m.text) AS chars, f.rel"
        light = f"{cols} FROM memories m JOIN"
        current = "m.valid_to IS NULL AND m.consolidated_into IS NULL"
        if self.db.dialect == "sqlite":
            owner = user.replace('"', '""')
            words = " OR ".join(f'"{t}"*' for t in terms)
            # bm25 weights 1, 0, 0: the text alone is ranked. CROSS JOIN: SQLite walks the
            # full-text matches newest first and looks each up in memories (an owner term in
            # the MATCH would intersect with all of a large user's rows: 9 ms at 100k)
            top = self.db.query(
                f"SELECT {cols} FROM (SELECT f.id, f.rel FROM (SELECT m.id, "
                "-bm25(memories_fts, 1.0, 0.0, 0.0) AS rel FROM memories_fts CROSS JOIN "
                "memories m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ? "
                f"AND m.user_id = ? AND {current} ORDER BY memories_fts.rowid DESC LIMIT ?) f "
                "ORDER BY f.rel DESC LIMIT ?) f CROSS JOIN memories m ON m.id = f.id",
                (f"text : ({words})", user, window, ranked),
            )
            kept = self.db.query(
                f"SELECT {cols} FROM (SELECT rowid, -bm25(memories_fts, 1.0, 0.0, 0.0) AS rel "
                "FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?) f "
                f"CROSS JOIN memories m ON m.id = f.rowid WHERE {current}",
                (f'user_id : "{owner}" AND text : ({words}) AND kind : (long OR event)', facts),
            )
        else:
            query = " | ".join(f"{t}:*" for t in terms)
            top = self.db.query(
                f"SELECT {light} (SELECT id, rel FROM (SELECT id, ts_rank_cd(tsv, q, 1) AS rel "
                "FROM memories, to_tsquery('simple', ?) q WHERE user_id = ? AND tsv @@ q "
                "AND valid_to IS NULL AND consolidated_into IS NULL ORDER BY id DESC LIMIT ?) w "
                f"ORDER BY rel DESC LIMIT ?) f ON m.id = f.id WHERE {current}",
                (query, user, window, ranked),
            )
            kept = self.db.query(
                f"SELECT {light} (SELECT id, ts_rank_cd(tsv, q, 1) AS rel FROM memories, "
                "to_tsquery('simple', ?) q WHERE user_id = ? AND kind IN ('long_term', 'event') "
                f"AND tsv @@ q ORDER BY rel DESC LIMIT ?) f ON m.id = f.id WHERE {current}",
                (query, user, facts),
            )
        found = {int(r["id"]): Candidate.from_row(r) for r in top}
        found.update({int(r["id"]): Candidate.from_row(r) for r in kept})
        return list(found.values())

    def current_saying(self, user: str, kind: str, text: str) -> int | None:
        """The newest current item of ``kind`` whose text is ``text`` up to case and spacing
        (:func:`~novaberg.text.same_text`), else ``None``. The database narrows by the text
        in lower case with runs of up to four spaces as one (portable SQL); the exact
        comparison is Python's."""
        wanted = same_text(text)
        squeezed = "lower(replace(replace(trim(text), '  ', ' '), '  ', ' '))"
        rows = self.db.query(
            "SELECT id, text FROM memories WHERE user_id = ? AND kind = ? AND valid_to IS NULL "
            f"AND (text = ? OR {squeezed} = ?) ORDER BY id DESC LIMIT 20",
            (user, kind, text.strip(), wanted),
        )
        return next((int(r["id"]) for r in rows if same_text(str(r["text"])) == wanted), None)

    def said(
        self,
        user: str,
        terms: Sequence[str],
        limit: int = 5,
        window: int = 1000,
        *,
        skip: Sequence[int] = (),
    ) -> list[SaidBefore]:
        """The user's stored messages (theirs and Nova's) matching any term (prefix match),
        the ``limit`` best-ranked among the ``window`` newest matches, best first; ``skip``:
        message ids left out (those the turn's history holds already). Only messages of
        finished turns are stored, so an aborted turn or a front-end's task is never found;
        a regenerated reply is deleted with its index entry; a turn whose words were
        forgotten, or whose reply is being regenerated right now, is left out. Relevance as
        for :meth:`fulltext` (BM25; ``ts_rank_cd`` on PostgreSQL)."""
        if not terms:
            return []
        live = (
            "t.status = 'done' AND t.forgotten_at IS NULL AND NOT EXISTS (SELECT 1 FROM turns "
            "r WHERE r.origin = 'regenerate' AND r.status = 'running' AND (r.parent_turn_id = "
            "t.id OR (t.origin = 'regenerate' AND r.parent_turn_id = t.parent_turn_id)))"
        )
        if skip:
            live += f" AND m.id NOT IN ({', '.join('?' for _ in skip)})"
        cols = "m.id, m.conversation_id, m.turn_id, m.role, m.content, m.created_at, f.rel"
        if self.db.dialect == "sqlite":
            words = " OR ".join(f'"{t}"*' for t in terms)
            # as fulltext's: the matches newest first, each looked up with its owner
            rows = self.db.query(
                f"SELECT {cols} FROM (SELECT f.id, f.rel FROM (SELECT m.id, "
                "-bm25(messages_fts) AS rel FROM messages_fts CROSS JOIN messages m "
                "ON m.id = messages_fts.rowid CROSS JOIN conversations c "
                "ON c.id = m.conversation_id CROSS JOIN turns t ON t.id = m.turn_id "
                f"WHERE messages_fts MATCH ? AND c.user_id = ? AND {live} "
                "ORDER BY messages_fts.rowid DESC LIMIT ?) f ORDER BY f.rel DESC LIMIT ?) f "
                "CROSS JOIN messages m ON m.id = f.id",
                (f"content : ({words})", user, *skip, window, limit),
            )
        else:
            query = " | ".join(f"{t}:*" for t in terms)
            rows = self.db.query(
                f"SELECT {cols} FROM (SELECT id, rel FROM (SELECT m.id, "
                "ts_rank_cd(m.tsv, q, 1) AS rel FROM messages m JOIN conversations c "
                "ON c.id = m.conversation_id JOIN turns t ON t.id = m.turn_id, "
                f"to_tsquery('simple', ?) q WHERE c.user_id = ? AND m.tsv @@ q AND {live} "
                "ORDER BY m.id DESC LIMIT ?) w ORDER BY rel DESC LIMIT ?) f "
                "JOIN messages m ON m.id = f.id",
                (query, user, *skip, window, limit),
            )
        found = [
            SaidBefore(
                int(r["id"]), int(r["conversation_id"]), int(r["turn_id"]), str(r["role"]),
                str(r["content"]), str(r["created_at"]), float(r["rel"]),
            )
            for r in rows
        ]  # fmt: skip
        return sorted(found, key=lambda s: (-s.rel, -s.message_id))

    def messages_by_ids(self, user: str, ids: Iterable[int]) -> dict[int, SaidBefore]:
        """The user's stored messages of these ids whose words are still there (a forgotten
        turn's are not)."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.query(
            "SELECT m.id, m.conversation_id, m.turn_id, m.role, m.content, m.created_at "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            f"JOIN turns t ON t.id = m.turn_id WHERE m.id IN ({marks}) AND c.user_id = ? "
            "AND t.forgotten_at IS NULL",
            (*wanted, user),
        )
        return {
            int(r["id"]): SaidBefore(
                int(r["id"]), int(r["conversation_id"]), int(r["turn_id"]), str(r["role"]),
                str(r["content"]), str(r["created_at"]), 0.0,
            )
            for r in rows
        }  # fmt: skip

    def newest_messages(self, conversation_id: int, limit: int) -> list[int]:
        """The ids of a conversation's ``limit`` newest messages."""
        rows = self.db.query(
            "SELECT id FROM messages WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
            (conversation_id, limit),
        )
        return [int(r["id"]) for r in rows]

    def recent(self, user: str, limit: int) -> list[Candidate]:
        """The newest retrievable items (current, not covered by a fact)."""
        rows = self.db.query(
            "SELECT id, kind, importance, valid_from, length(text) AS chars, 0.0 AS rel "
            "FROM memories WHERE user_id = ? AND valid_to IS NULL "
            "AND consolidated_into IS NULL ORDER BY id DESC LIMIT ?",
            (user, limit),
        )
        return [Candidate.from_row(r) for r in rows]

    def candidates(self, user: str, ids: Iterable[int]) -> list[Candidate]:
        """The retrievable ones of ``ids`` (the user's, current, not covered by a fact), for
        scoring: the meaning signal's nearest neighbours come as bare ids."""
        wanted = sorted(set(ids))
        if not wanted:
            return []
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.query(
            "SELECT id, kind, importance, valid_from, length(text) AS chars, 0.0 AS rel "
            f"FROM memories WHERE id IN ({marks}) AND user_id = ? AND valid_to IS NULL "
            "AND consolidated_into IS NULL",
            (*wanted, user),
        )
        return [Candidate.from_row(r) for r in rows]

    def unembedded(
        self, user: str, wanted: Callable[[str], str], limit: int, newest: int = 200
    ) -> dict[str, list[tuple[int, str]]]:
        """Among the user's ``newest`` retrievable items (current, not covered by a fact),
        those without a vector of the embedder ``wanted(text)`` names for them, newest first,
        as (id, text) by that embedder's name, ``limit`` in all: a turn's short-term item, an
        item stored while the embedder was missing. Looking at the newest only keeps this
        cheap at any size (older ones: ``novaberg memory reindex``)."""
        rows = self.db.query(
            "SELECT m.id, m.text, v.embedder FROM (SELECT id, text FROM memories "
            "WHERE user_id = ? AND valid_to IS NULL AND consolidated_into IS NULL "
            "ORDER BY id DESC LIMIT ?) m LEFT JOIN memory_vectors v ON v.memory_id = m.id "
            "ORDER BY m.id DESC",
            (user, newest),
        )
        have: dict[int, set[str]] = {}
        texts: dict[int, str] = {}
        for r in rows:
            texts[int(r["id"])] = str(r["text"])
            have.setdefault(int(r["id"]), set()).add(str(r["embedder"] or ""))
        todo: dict[str, list[tuple[int, str]]] = {}
        count = 0
        for memory_id in sorted(texts, reverse=True):
            name = wanted(texts[memory_id])
            if name in have[memory_id]:
                continue
            todo.setdefault(name, []).append((memory_id, texts[memory_id]))
            count += 1
            if count == limit:
                break
        return todo

    def vectors(self, ids: Iterable[int], model: str) -> dict[int, list[float]]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        marks = ", ".join("?" for _ in wanted)
        rows = self.db.query(
            "SELECT memory_id, vec FROM memory_vectors WHERE embedder = ? "
            f"AND memory_id IN ({marks})",
            (model, *wanted),
        )
        return {int(r["memory_id"]): unpack_vector(bytes(r["vec"])) for r in rows}

    def events_between(self, user: str, start: str, end: str) -> list[MemoryItem]:
        rows = self.db.query(
            f"SELECT {COLUMNS} FROM memories WHERE user_id = ? AND kind = 'event' "
            "AND valid_to IS NULL AND happens_on BETWEEN ? AND ? ORDER BY happens_on, id",
            (user, start, end),
        )
        return [MemoryItem.from_row(r) for r in rows]

    def add_event(self, user: str, happens_on: str, text: str, item_key: str) -> Added:
        with self.db.transaction() as c:
            return self.add(c, user, "event", text, 0.5, item_key, happens_on=happens_on)

    # -- profile -----------------------------------------------------------------------
    def set_profile(
        self,
        user: str,
        part: ProfilePart,
        statements: Sequence[Statement],
        c: Connection | None = None,
    ) -> int:
        """Store a new version of one part; return its number."""
        if c is None:
            with self.db.transaction() as tx:
                return self.set_profile(user, part, statements, tx)
        return _new_profile_version(c, user, part, statements)

    def set_profile_text(self, user: str, part: ProfilePart, text: str) -> int:
        """A profile version written by hand (tests, eval scenarios): one sourceless line."""
        return self.set_profile(user, part, [Statement(text, [])])

    def profile(self, user: str) -> dict[str, Profile]:
        """The latest version of each part that was ever written."""
        rows = self.db.query(
            "SELECT part, version, text, statements, created_at FROM profiles p "
            "WHERE user_id = ? AND version = (SELECT MAX(version) FROM profiles q "
            "WHERE q.user_id = p.user_id AND q.part = p.part)",
            (user,),
        )
        return {r["part"]: _profile(r) for r in rows}

    def profile_history(self, user: str) -> list[Profile]:
        rows = self.db.query(
            "SELECT part, version, text, statements, created_at FROM profiles "
            "WHERE user_id = ? ORDER BY part, version",
            (user,),
        )
        return [_profile(r) for r in rows]

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
        _drop_from_profiles(c, user, old.id)
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
        c.execute(
            "UPDATE memories SET valid_to = ? WHERE id = ? AND valid_to IS NULL", (now(), old.id)
        )
        _drop_from_profiles(c, user, old.id)

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

    @staticmethod
    def _get(c: Connection, user: str, memory_id: int) -> MemoryItem | None:
        rows = c.execute(
            f"SELECT {COLUMNS} FROM memories WHERE id = ? AND user_id = ?", (memory_id, user)
        ).rows
        return MemoryItem.from_row(rows[0]) if rows else None

    # -- forgetting --------------------------------------------------------------------
    def family(self, user: str, memory_id: int) -> list[int] | None:
        """The ids :meth:`forget` would remove with ``memory_id`` (itself included), without
        removing anything; ``None`` if the user has no such item."""
        rows = self.db.query(
            "SELECT id, kind, item_key, derived_from, consolidated_into FROM memories "
            "WHERE user_id = ?",
            (user,),
        )
        by_id = {int(r["id"]): r for r in rows}
        return sorted(_family(memory_id, by_id)) if memory_id in by_id else None

    def forget(self, user: str, memory_id: int) -> Forgotten | None:
        """Remove an item and everything derived from it, everywhere, for good: every place
        of :data:`FORGET_MAP`, walked in its order. Returns ``None`` if the user has no such
        item.

        The family of an item: the item; the long-term facts derived from it; the sources of
        a forgotten fact (they say the same thing). A fact that a forgotten fact had
        superseded becomes current again.
        """
        rows = self.db.query(
            "SELECT id, kind, item_key, derived_from, consolidated_into, superseded_by, "
            "source_turn_id FROM memories WHERE user_id = ?",
            (user,),
        )
        by_id = {int(r["id"]): r for r in rows}
        if memory_id not in by_id:
            return None
        family = _family(memory_id, by_id)
        sources = {int(by_id[i]["source_turn_id"]) for i in family if by_id[i]["source_turn_id"]}
        ids = sorted(family)
        marks = ", ".join("?" for _ in ids)
        stamp = now()
        with self.db.transaction() as c:
            scopes = _scopes(c, user, family, sources)
            c.execute(
                f"UPDATE memories SET valid_to = NULL, superseded_by = NULL "
                f"WHERE user_id = ? AND superseded_by IN ({marks})",
                (user, *ids),
            )
            c.execute(
                f"UPDATE memories SET consolidated_into = NULL "
                f"WHERE user_id = ? AND consolidated_into IN ({marks})",
                (user, *ids),
            )
            changed: dict[str, int] = {}
            for place in FORGET_MAP:
                n = _ACTIONS[place.action](c, place, scopes, stamp)
                changed[place.table] = changed.get(place.table, 0) + n
            _cancel_proactive(c, user, scopes["events"], family, stamp)
        files = self._compact()
        return Forgotten(
            ids,
            changed["profiles"],
            len(scopes["erased_turns"]),
            later_turns=len(scopes["later_turns"]),
            events_scrubbed=len(scopes["events"]),
            calls_scrubbed=changed["llm_calls"],
            files=files,
        )

    def _compact(self) -> str:
        """Make deleted text unrecoverable from the files, not only from the queries; say
        what was done. Blocking (a checkpoint, a vacuum): forget alone calls it."""
        if self.db.dialect == "sqlite":
            with self.db.transaction() as c:
                c.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
                c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
            row = self.db.one("PRAGMA wal_checkpoint(TRUNCATE)")
            if row is not None and int(row["busy"]):
                log.warning(
                    "forget: another connection reads the database, so its write-ahead log "
                    "could not be emptied yet; the old text stays in %s-wal until the next "
                    "checkpoint",
                    self.db.where,
                )
                return "freed pages overwritten; write-ahead log still busy"
            return "freed pages overwritten, full-text index merged, write-ahead log emptied"
        # A plain VACUUM leaves the old bytes in the heap pages' free space and the words as
        # keys of the full-text GIN index; VACUUM FULL writes each touched table and its
        # indexes anew and removes the old files (a short exclusive lock per table).
        tables = ", ".join(dict.fromkeys(p.table for p in FORGET_MAP))
        try:
            self.db.conn.execute(f"VACUUM FULL {tables}")
        except StorageError as exc:
            log.warning("forget: VACUUM FULL failed (%s); dead rows stay until vacuumed", exc)
            return "not rewritten (dead rows stay until the tables are vacuumed)"
        try:  # the old files go at the next checkpoint; a superuser may hasten it
            self.db.conn.execute("CHECKPOINT")
        except StorageError:
            log.info("forget: no CHECKPOINT privilege; the old files go at the next checkpoint")
        return "tables and their indexes rewritten"


def _cancel_proactive(
    c: Connection, user: str, events: set[int], family: set[int], stamp: str
) -> None:
    """A proactive message whose cause forget reached is never sent: cancelled, in forget's
    transaction. Its cause: the turn that asked for a reminder or told of a dated event
    (whose events forget scrubs), or a memory a check-in's concern rests on (its words are
    erased here)."""
    rows = c.execute(
        "SELECT e.id, e.payload FROM events e JOIN conversations v ON v.id = e.conversation_id "
        "WHERE v.user_id = ? AND e.type = 'proactive' AND e.status IN ('pending', 'running')",
        (user,),
    ).rows
    for row in rows:
        payload = json.loads(str(row["payload"]))
        resting = set(payload.get("sources") or ())
        if int(row["id"]) not in events and not resting & family:
            continue
        if resting & family:
            payload["text"] = FORGOTTEN
        c.execute(
            "UPDATE events SET status = 'cancelled', result = 'its cause was forgotten', "
            "payload = ?, claimed_until = NULL, updated_at = ? WHERE id = ?",
            (json.dumps(payload, ensure_ascii=False), stamp, int(row["id"])),
        )


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


@dataclass(frozen=True)
class Place:
    """One place where a user's words can land, and what forget does there."""

    table: str
    columns: tuple[str, ...]
    rows: str
    """Which rows: SQL over the scopes of :func:`_scopes`, written ``{scope}``."""
    action: Literal["delete", "erase", "erase_strings", "drop_statements", "stamp"]
    why: str


FORGET_MAP: tuple[Place, ...] = (
    Place("memory_vectors", ("vec",), "memory_id IN {family}", "delete",
          "the embeddings of the family's items"),
    Place("memories", ("text",), "id IN {family}", "delete",
          "the items; their full-text entries go with them (SQLite: the FTS5 triggers, then "
          "'optimize'; PostgreSQL: the generated tsvector column)"),
    Place("profiles", ("text", "statements"), "user_id = {user}", "drop_statements",
          "every statement resting on an item of the family, in every stored version"),
    Place("messages", ("content",), "turn_id IN {erased_turns}", "erase",
          "the user's message and Nova's reply of the source turns, and the follow-up "
          "message of their second passes; their full-text entries go with them (SQLite: "
          "the FTS5 triggers, then 'optimize'; PostgreSQL: the generated tsvector column)"),
    Place("messages", ("content",), "turn_id IN {later_turns} AND role = 'assistant'", "erase",
          "Nova's later replies that were given an item of the family or a message of the "
          "source turns (they may repeat it)"),
    Place("turns", ("user_text", "error", "trace_json"), "id IN {erased_turns}", "erase",
          "the source turns and their self-triggered second passes: the message, the error, "
          "the trace (draft, salience summary, retrieval reasons quoting matched words)"),
    Place("turns", ("error", "trace_json"), "id IN {later_turns}", "erase",
          "the traces of the later turns that were given an item (draft, retrieval reasons)"),
    Place("turns", ("forgotten_at",), "id IN {erased_turns} OR id IN {later_turns}", "stamp",
          "these turns are never sent as history again"),
    Place("events", ("payload",), "id IN {events}", "erase_strings",
          "the events of those turns: a self-trigger's user text and draft (ids are kept)"),
    Place("events", ("result",), "id IN {events}", "erase",
          "the events' results: job reasons, a second pass's outcome"),
    Place("llm_calls", ("error",), "turn_id IN {all_turns} OR event_id IN {events}", "erase",
          "the errors of those turns' and events' model calls (a server may quote a prompt)"),
)  # fmt: skip
"""Every place a user's words can land, and what forget does there, in the order it is
done. Structure stays (a turn, a message, an event keeps its row, its ids and its status);
the words become :data:`FORGOTTEN`. What is not here holds no words: conversations (an owner
and a time), call records apart from their errors (lengths, counts, outcomes). Not reached:
the words the user wrote in later turns (their own new messages), and files outside the
database (backups, logs below WARNING)."""

_ERASED_JSON = json.dumps({"forgotten": True})


def _scopes(c: Connection, user: str, family: set[int], sources: set[int]) -> dict[str, Any]:
    """The rows forget reaches, by scope: ``family`` (memory ids), ``erased_turns`` (the
    turns the family came from, and the second passes they started, transitively),
    ``later_turns`` (the user's other turns that were given an item of the family: by the
    enricher's retrieval, or by the thinker's ``memory_search``),
    ``all_turns``, ``events`` (the events of all those turns), ``user``."""
    erased = set(sources)
    frontier = set(sources)
    while frontier:
        marks = ", ".join("?" for _ in frontier)
        children = {
            int(r["id"])
            for r in c.execute(
                f"SELECT id FROM turns WHERE parent_turn_id IN ({marks})", sorted(frontier)
            ).rows
        }
        frontier = children - erased
        erased |= frontier
    later: set[int] = set()
    said: set[int] = set()  # the messages of the source turns, which a retrieval may quote
    if erased:
        marks = ", ".join("?" for _ in erased)
        said = {
            int(r["id"])
            for r in c.execute(
                f"SELECT id FROM messages WHERE turn_id IN ({marks})", sorted(erased)
            ).rows
        }
    if family or said:
        patterns = [  # a cheap filter; checked below
            *(f'%"id": {i}%' for i in sorted(family)),
            *(f'%"message_id": {i}%' for i in sorted(said)),
        ]
        likes = " OR ".join("t.trace_json LIKE ?" for _ in patterns)
        for r in c.execute(
            "SELECT t.id, t.trace_json FROM turns t JOIN conversations v "
            f"ON v.id = t.conversation_id WHERE v.user_id = ? AND ({likes})",
            (user, *patterns),
        ).rows:
            trace = json.loads(r["trace_json"] or "{}")
            thinker = trace.get("thinker") or {}
            given = [*(trace.get("retrieval") or []), *(thinker.get("recalled") or [])]
            if any(
                isinstance(g, dict) and (g.get("id") in family or g.get("message_id") in said)
                for g in given
            ):
                later.add(int(r["id"]))
    later -= erased
    every = erased | later
    events: set[int] = set()
    if every:
        marks = ", ".join("?" for _ in every)
        events = {
            int(r["id"])
            for r in c.execute(
                f"SELECT id FROM events WHERE turn_id IN ({marks})", sorted(every)
            ).rows
        }
    return {
        "user": user,
        "family": family,
        "erased_turns": erased,
        "later_turns": later,
        "all_turns": every,
        "events": events,
    }


def _where(place: Place, scopes: dict[str, Any]) -> tuple[str, list[Any]]:
    """``place.rows`` as SQL with placeholders, and its parameters in order."""
    params: list[Any] = []

    def expand(match: re.Match[str]) -> str:
        value = scopes[match.group(1)]
        if isinstance(value, str):
            params.append(value)
            return "?"
        params.extend(sorted(value))
        return "(" + (", ".join("?" for _ in value) or "NULL") + ")"

    return re.sub(r"\{(\w+)\}", expand, place.rows), params


def _delete(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    where, params = _where(place, scopes)
    return c.execute(f"DELETE FROM {place.table} WHERE {where}", params).rowcount


def _erase(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    where, params = _where(place, scopes)
    sets = ", ".join(
        f"{col} = CASE WHEN {col} IS NULL OR {col} = '' THEN {col} ELSE ? END"
        for col in place.columns
    )
    values = [_ERASED_JSON if col.endswith("_json") else FORGOTTEN for col in place.columns]
    worded = " OR ".join(
        f"({col} IS NOT NULL AND {col} <> '' AND {col} <> ?)" for col in place.columns
    )
    return c.execute(
        f"UPDATE {place.table} SET {sets} WHERE ({where}) AND ({worded})",
        [*values, *params, *values],
    ).rowcount


def _stamp(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    where, params = _where(place, scopes)
    [column] = place.columns
    return c.execute(
        f"UPDATE {place.table} SET {column} = ? WHERE ({where}) AND {column} IS NULL",
        [stamp, *params],
    ).rowcount


def _erase_strings(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    """Every text value of a JSON column becomes :data:`FORGOTTEN`; numbers (ids) stay."""
    where, params = _where(place, scopes)
    [column] = place.columns
    changed = 0
    for row in c.execute(f"SELECT id, {column} FROM {place.table} WHERE {where}", params).rows:
        doc = json.loads(row[column] or "{}")
        scrubbed = _scrub(doc)
        if scrubbed != doc:
            c.execute(
                f"UPDATE {place.table} SET {column} = ? WHERE id = ?",
                (json.dumps(scrubbed, ensure_ascii=False), row["id"]),
            )
            changed += 1
    return changed


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return FORGOTTEN if value else value
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    return value


def _new_profile_version(
    c: Connection, user: str, part: str, statements: Sequence[Statement]
) -> int:
    """Store the next version of one profile part; return its number."""
    version = 1 + int(
        c.execute(
            "SELECT COALESCE(MAX(version), 0) AS v FROM profiles WHERE user_id = ? AND part = ?",
            (user, part),
        ).scalar()
    )
    c.execute(
        "INSERT INTO profiles (user_id, part, version, text, statements, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (user, part, version, _profile_text(statements), _statements_json(statements), now()),
    )
    return version


def _drop_from_profiles(c: Connection, user: str, memory_id: int) -> None:
    """A new version of each profile part whose current statements rest on ``memory_id``,
    without them (the profile job rebuilds from what is current)."""
    for part in ("core", "adaptive"):
        rows = c.execute(
            "SELECT statements FROM profiles WHERE user_id = ? AND part = ? "
            "ORDER BY version DESC LIMIT 1",
            (user, part),
        ).rows
        if not rows:
            continue
        statements = _statements(rows[0]["statements"])
        kept = [s for s in statements if memory_id not in s.sources]
        if len(kept) != len(statements):
            _new_profile_version(c, user, part, kept)


def _drop_statements(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    """Statements resting on an item of the family leave every version; returns how many
    versions changed."""
    where, params = _where(place, scopes)
    family: set[int] = scopes["family"]
    changed = 0
    for row in c.execute(f"SELECT id, statements FROM {place.table} WHERE {where}", params).rows:
        statements = _statements(row["statements"])
        kept = [s for s in statements if not family.intersection(s.sources)]
        if len(kept) != len(statements):
            changed += 1
            c.execute(
                f"UPDATE {place.table} SET text = ?, statements = ? WHERE id = ?",
                (_profile_text(kept), _statements_json(kept), row["id"]),
            )
    return changed


_ACTIONS: dict[str, Callable[[Connection, Place, dict[str, Any], str], int]] = {
    "delete": _delete,
    "erase": _erase,
    "erase_strings": _erase_strings,
    "drop_statements": _drop_statements,
    "stamp": _stamp,
}


def _family(start: int, by_id: dict[int, dict[str, Any]]) -> set[int]:
    family = {start}
    while True:
        grown = set(family)
        for i, row in by_id.items():
            sources = set(json.loads(row["derived_from"] or "[]"))
            if sources & family or row["consolidated_into"] in family:
                grown.add(i)  # derived from a forgotten item
            if i in family and row["kind"] == "long_term":
                grown |= sources & by_id.keys()  # what a forgotten fact was made of
            if i in family and str(row.get("item_key") or "").startswith("correct:"):
                grown |= sources & by_id.keys()  # a corrected version: the whole chain goes
        if grown == family:
            return family
        family = grown


def _statements(raw: str | None) -> list[Statement]:
    return [Statement(s["text"], list(s.get("sources", []))) for s in json.loads(raw or "[]")]


def _statements_json(statements: Sequence[Statement]) -> str:
    return json.dumps([asdict(s) for s in statements], ensure_ascii=False)


def _profile_text(statements: Sequence[Statement]) -> str:
    return "\n".join(s.text for s in statements)


def _profile(row: dict[str, Any]) -> Profile:
    statements = _statements(row["statements"])
    if not statements and row["text"]:
        statements = [Statement(row["text"], [])]  # a version written before m004
    return Profile(row["part"], int(row["version"]), row["text"], statements, row["created_at"])
