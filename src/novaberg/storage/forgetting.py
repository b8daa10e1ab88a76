"""Forgetting, in the database: every place a user's words can land (:data:`FORGET_MAP`), and
the walk over it that removes an item and everything derived from it, for good
(``memory forget``, ``DELETE /api/memory/{id}``; :meth:`novaberg.memory.store.MemoryStore.forget`
is the door). Blocking: it ends with a checkpoint or a vacuum, so that the words are not left
in the database files either.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from novaberg.errors import StorageError
from novaberg.storage.db import Database, now
from novaberg.storage.memories import FORGOTTEN, profile_text, statements_json, statements_of
from novaberg.storage.sql import Connection
from novaberg.trace_document import TraceDocument

log = logging.getLogger("novaberg")


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


def family_of(db: Database, user: str, memory_id: int) -> list[int] | None:
    """The ids :func:`forget` would remove with ``memory_id`` (itself included), without
    removing anything; ``None`` if the user has no such item."""
    rows = db.query(
        "SELECT id, kind, item_key, derived_from, consolidated_into FROM memories "
        "WHERE user_id = ?",
        (user,),
    )
    by_id = {int(r["id"]): r for r in rows}
    return sorted(_family(memory_id, by_id)) if memory_id in by_id else None


def forget(db: Database, user: str, memory_id: int) -> Forgotten | None:
    """Remove an item and everything derived from it, everywhere, for good: every place
    of :data:`FORGET_MAP`, walked in its order. Returns ``None`` if the user has no such
    item.

    The family of an item: the item; the long-term facts derived from it; the sources of
    a forgotten fact (they say the same thing). A fact that a forgotten fact had
    superseded becomes current again.
    """
    rows = db.query(
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
    with db.transaction() as c:
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
    files = _compact(db)
    return Forgotten(
        ids,
        changed["profiles"],
        len(scopes["erased_turns"]),
        later_turns=len(scopes["later_turns"]),
        events_scrubbed=len(scopes["events"]),
        calls_scrubbed=changed["llm_calls"],
        files=files,
    )


def _compact(db: Database) -> str:
    """Make deleted text unrecoverable from the files, not only from the queries; say
    what was done. Blocking (a checkpoint, a vacuum): forget alone calls it."""
    if db.dialect == "sqlite":
        with db.transaction() as c:
            c.execute("INSERT INTO memories_fts(memories_fts) VALUES ('optimize')")
            c.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")
        row = db.one("PRAGMA wal_checkpoint(TRUNCATE)")
        if row is not None and int(row["busy"]):
            log.warning(
                "forget: another connection reads the database, so its write-ahead log "
                "could not be emptied yet; the old text stays in %s-wal until the next "
                "checkpoint",
                db.where,
            )
            return "freed pages overwritten; write-ahead log still busy"
        return "freed pages overwritten, full-text index merged, write-ahead log emptied"
    # A plain VACUUM leaves the old bytes in the heap pages' free space and the words as
    # keys of the full-text GIN index; VACUUM FULL writes each touched table and its
    # indexes anew and removes the old files (a short exclusive lock per table).
    tables = ", ".join(dict.fromkeys(p.table for p in FORGET_MAP))
    try:
        db.conn.execute(f"VACUUM FULL {tables}")
    except StorageError as exc:
        log.warning("forget: VACUUM FULL failed (%s); dead rows stay until vacuumed", exc)
        return "not rewritten (dead rows stay until the tables are vacuumed)"
    try:  # the old files go at the next checkpoint; a superuser may hasten it
        db.conn.execute("CHECKPOINT")
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

_ERASED_JSON = TraceDocument(forgotten=True).text()


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
            given = TraceDocument.read(r["trace_json"]).given()
            if any(g.id in family or g.message_id in said for g in given):
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


def _drop_statements(c: Connection, place: Place, scopes: dict[str, Any], stamp: str) -> int:
    """Statements resting on an item of the family leave every version; returns how many
    versions changed."""
    where, params = _where(place, scopes)
    family: set[int] = scopes["family"]
    changed = 0
    for row in c.execute(f"SELECT id, statements FROM {place.table} WHERE {where}", params).rows:
        statements = statements_of(row["statements"])
        kept = [s for s in statements if not family.intersection(s.sources)]
        if len(kept) != len(statements):
            changed += 1
            c.execute(
                f"UPDATE {place.table} SET text = ?, statements = ? WHERE id = ?",
                (profile_text(kept), statements_json(kept), row["id"]),
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
