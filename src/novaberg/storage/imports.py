"""What importing chats (``novaberg import-chats``) writes and reads in the database: each chat
as a conversation of finished turns of origin ``import``, named by an alias of its format and
key; the imported user messages not yet weighed; how many ``weigh`` events a user has waiting.

The writes take the caller's transaction (a file is imported whole or not at all); the reads
are blocking (async callers run them through :meth:`~novaberg.storage.db.Database.run`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from novaberg.storage.db import Database
from novaberg.storage.sql import Connection


@dataclass(frozen=True, slots=True)
class Unweighed:
    """An imported user message with no ``weigh`` event yet."""

    said_at: str
    turn_id: int
    message_id: int
    conversation_id: int


def name_chat(c: Connection, user: str, alias: str, conversation: int, stamp: str) -> None:
    """Name the conversation an imported chat became by the chat's alias (its format and
    key); an alias there already is an error (the caller looked for it first)."""
    c.execute(
        "INSERT INTO conversation_aliases (user_id, external_id, conversation_id, created_at) "
        "VALUES (?, ?, ?, ?)",
        (user, alias, conversation, stamp),
    )


def add_turn(c: Connection, conversation: int, said: str, at: str) -> int:
    """A finished turn of origin ``import`` in ``conversation``, at ``at``: its id."""
    return int(
        c.execute(
            "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
            "finished_at) VALUES (?, 'import', ?, 'done', ?, ?) RETURNING id",
            (conversation, said, at, at),
        ).scalar()
    )


def add_message(
    c: Connection, conversation: int, turn: int | None, role: str, text: str, at: str
) -> None:
    """One message of an imported turn."""
    c.execute(
        "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        (conversation, turn, role, text, at),
    )


def unweighed(c: Connection, conversation: int) -> list[Unweighed]:
    """The imported user messages of ``conversation`` with no ``weigh`` event yet."""
    rows = c.execute(
        "SELECT t.started_at, t.id AS turn_id, m.id AS message_id FROM turns t "
        "JOIN messages m ON m.turn_id = t.id AND m.role = 'user' "
        "WHERE t.conversation_id = ? AND t.origin = 'import' AND NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.turn_id = t.id AND e.type = 'weigh')",
        (conversation,),
    ).rows
    return [
        Unweighed(str(r["started_at"]), int(r["turn_id"]), int(r["message_id"]), conversation)
        for r in rows
    ]


def waiting(db: Database, user: str, types: Sequence[str]) -> int:
    """How many of the user's events of these types are pending or running."""
    marks = ", ".join("?" for _ in types)
    found = db.scalar(
        "SELECT count(*) AS n FROM events e JOIN conversations c ON c.id = e.conversation_id "
        f"WHERE c.user_id = ? AND e.type IN ({marks}) AND e.status IN ('pending', 'running')",
        (user, *types),
    )
    return 0 if found is None else int(found)
