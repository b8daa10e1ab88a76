"""What Nova remembers about a user, in the database (SQLite and PostgreSQL alike): the items,
their vectors and the versioned profile, as rows and the queries on them.

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
statements, each naming the memory ids it was derived from, so that forgetting
(:mod:`novaberg.storage.forgetting`) can remove exactly the statements that came from a
forgotten item.

:class:`MemoryRows` is the repository; :class:`novaberg.memory.store.MemoryStore` adds the
rules of corrections, retractions and forgetting on top of it. Its writes take the caller's
transaction; its reads are blocking (async callers run them through
:meth:`~novaberg.storage.db.Database.run`).
"""

from __future__ import annotations

import json
import logging
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal, NamedTuple

from novaberg.errors import StorageError
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


def pack_vector(values: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(values)}f", *values)


def unpack_vector(blob: bytes) -> list[float]:
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


class MemoryRows:
    """The memory tables of one database: items, their vectors, profile versions."""

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
        existing = MemoryRows.key_id(c, user, item_key)
        if existing is None:  # not inserted, yet not there: the database did not answer
            raise StorageError("A memory was neither stored nor found under its key.")
        return Added(existing, False, cleaned.notices)

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
        # m009: one vector per item and embedder (novaberg.storage.vectors.VectorIndex.upsert
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

    def any_retrievable(self, user: str) -> bool:
        """Whether the user has an item a retrieval could find (current, not covered by a
        fact): without one, a search by meaning has nothing to compare the message with."""
        rows = self.db.query(
            "SELECT 1 FROM memories WHERE user_id = ? AND valid_to IS NULL "
            "AND consolidated_into IS NULL LIMIT 1",
            (user,),
        )
        return bool(rows)

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
        return new_profile_version(c, user, part, statements)

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
        return {r["part"]: profile_of(r) for r in rows}

    def profile_history(self, user: str) -> list[Profile]:
        rows = self.db.query(
            "SELECT part, version, text, statements, created_at FROM profiles "
            "WHERE user_id = ? ORDER BY part, version",
            (user,),
        )
        return [profile_of(r) for r in rows]

    # -- by key, in a transaction (an import) ------------------------------------------
    @staticmethod
    def key_id(c: Connection | Database, user: str, item_key: str) -> int | None:
        """The id of the user's item stored under ``item_key``, if any."""
        sql = "SELECT id FROM memories WHERE user_id = ? AND item_key = ?"
        found = (
            c.scalar(sql, (user, item_key))
            if isinstance(c, Database)
            else c.execute(sql, (user, item_key)).scalar()
        )
        return None if found is None else int(found)

    @staticmethod
    def relink(
        c: Connection,
        memory_id: int,
        *,
        derived_from: Iterable[int],
        valid_to: str | None,
        superseded_by: int | None,
        consolidated_into: int | None,
        created_at: str,
    ) -> None:
        """Set an item's links and dates as another database had them (an import)."""
        c.execute(
            "UPDATE memories SET derived_from = ?, valid_to = ?, superseded_by = ?, "
            "consolidated_into = ?, created_at = ? WHERE id = ?",
            (
                json.dumps(sorted(derived_from)), valid_to, superseded_by, consolidated_into,
                created_at, memory_id,
            ),
        )  # fmt: skip

    @staticmethod
    def profile_texts(c: Connection, user: str) -> set[tuple[str, str]]:
        """Every stored profile version of the user's, as (part, text)."""
        rows = c.execute("SELECT part, text FROM profiles WHERE user_id = ?", (user,)).rows
        return {(str(r["part"]), str(r["text"])) for r in rows}

    # -- in a transaction (corrections, retractions) -----------------------------------
    @staticmethod
    def end(c: Connection, memory_id: int) -> None:
        """The item stops being current, with no successor (a retraction)."""
        c.execute(
            "UPDATE memories SET valid_to = ? WHERE id = ? AND valid_to IS NULL", (now(), memory_id)
        )

    @staticmethod
    def _get(c: Connection, user: str, memory_id: int) -> MemoryItem | None:
        rows = c.execute(
            f"SELECT {COLUMNS} FROM memories WHERE id = ? AND user_id = ?", (memory_id, user)
        ).rows
        return MemoryItem.from_row(rows[0]) if rows else None


def new_profile_version(
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
        (user, part, version, profile_text(statements), statements_json(statements), now()),
    )
    return version


def drop_from_profiles(c: Connection, user: str, memory_id: int) -> None:
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
        statements = statements_of(rows[0]["statements"])
        kept = [s for s in statements if memory_id not in s.sources]
        if len(kept) != len(statements):
            new_profile_version(c, user, part, kept)


def statements_of(raw: str | None) -> list[Statement]:
    return [Statement(s["text"], list(s.get("sources", []))) for s in json.loads(raw or "[]")]


def statements_json(statements: Sequence[Statement]) -> str:
    return json.dumps([asdict(s) for s in statements], ensure_ascii=False)


def profile_text(statements: Sequence[Statement]) -> str:
    return "\n".join(s.text for s in statements)


def profile_of(row: dict[str, Any]) -> Profile:
    statements = statements_of(row["statements"])
    if not statements and row["text"]:
        statements = [Statement(row["text"], [])]  # a version written before m004
    return Profile(row["part"], int(row["version"]), row["text"], statements, row["created_at"])
