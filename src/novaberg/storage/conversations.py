"""Conversations and their messages in the database: a user's conversations as ``GET
/api/conversations`` lists them, a conversation's messages (all of them for ``GET
/api/conversations/{id}/messages``, those of finished turns for choosing the conversation a
front-end's request continues: :mod:`novaberg.engine.conversations`), the conversations that
hold a user message, and the aliases a front-end's own chat ids (and a greeting) map to.

Sync functions that query the database (async callers run them through
:meth:`~novaberg.storage.db.Database.run`); the ones that write take the transaction's
:class:`~novaberg.storage.sql.Connection`, the caller decides the unit of work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from novaberg.storage.db import Database
from novaberg.storage.sql import Connection


@dataclass(frozen=True, slots=True)
class ConversationRow:
    """A conversation with how many of its turns finished."""

    id: int
    created_at: str
    turns: int


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A stored message with its turn's origin (user, self_trigger, proactive, …)."""

    id: int
    turn_id: int
    role: str
    content: str
    created_at: str
    origin: str


@dataclass(frozen=True, slots=True)
class SaidRow:
    """A message of a finished turn, as the choice of a conversation compares it."""

    role: str
    content: str
    turn_id: int
    origin: str


def conversations_of(db: Database, user: str, limit: int, offset: int) -> list[ConversationRow]:
    """The user's conversations, newest first, with how many turns each has finished."""
    return [
        ConversationRow(id=int(r["id"]), created_at=str(r["created_at"]), turns=int(r["turns"]))
        for r in db.query(
            "SELECT c.id, c.created_at, "
            "(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id "
            "AND t.status = 'done') AS turns "
            "FROM conversations c WHERE c.user_id = ? ORDER BY c.id DESC LIMIT ? OFFSET ?",
            (user, limit, offset),
        )
    ]


def messages_of(db: Database, conversation_id: int) -> list[MessageRow]:
    """The conversation's stored messages, oldest first (a turn whose words were forgotten is
    left out, as from Nova's own history)."""
    return [
        MessageRow(
            id=int(r["id"]),
            turn_id=int(r["turn_id"]),
            role=str(r["role"]),
            content=str(r["content"]),
            created_at=str(r["created_at"]),
            origin=str(r["origin"]),
        )
        for r in db.query(
            "SELECT m.id, m.turn_id, m.role, m.content, m.created_at, t.origin FROM messages m "
            "JOIN turns t ON t.id = m.turn_id WHERE m.conversation_id = ? "
            "AND t.forgotten_at IS NULL ORDER BY m.id",
            (conversation_id,),
        )
    ]


def said_in(db: Database, conversation_id: int) -> list[SaidRow]:
    """The messages of the conversation's finished turns whose words are kept, oldest first."""
    rows = db.query(
        "SELECT m.role, m.content, m.turn_id, t.origin FROM messages m "
        "JOIN turns t ON t.id = m.turn_id "
        "WHERE m.conversation_id = ? AND t.status = 'done' AND t.forgotten_at IS NULL "
        "ORDER BY m.id",
        (conversation_id,),
    )
    return [
        SaidRow(str(r["role"]), str(r["content"]), int(r["turn_id"]), str(r["origin"]))
        for r in rows
    ]


def holding_user_message(db: Database, user: str, texts: Sequence[str], limit: int) -> list[int]:
    """The user's conversations (newest first, at most ``limit``) where the user said one of
    ``texts`` word for word."""
    marks = ", ".join("?" for _ in texts)
    rows = db.query(
        "SELECT DISTINCT m.conversation_id FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id "
        f"WHERE c.user_id = ? AND m.role = 'user' AND m.content IN ({marks}) "
        "ORDER BY m.conversation_id DESC LIMIT ?",
        (user, *texts, limit),
    )
    return [int(r["conversation_id"]) for r in rows]


def aliased(db: Database | Connection, user: str, external: str) -> int | None:
    """The user's conversation a front-end's chat id (or a greeting's alias) names."""
    sql = "SELECT conversation_id FROM conversation_aliases WHERE user_id = ? AND external_id = ?"
    if isinstance(db, Database):
        found = db.scalar(sql, (user, external))
    else:
        found = db.execute(sql, (user, external)).scalar()
    return None if found is None else int(found)


def create(c: Connection, user: str, stamp: str) -> int:
    """A new conversation of the user's, made at ``stamp``: its id."""
    return int(
        c.execute(
            "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
            (user, stamp),
        ).scalar()
    )


def add_alias(
    c: Connection, user: str, external: str, conversation: int, stamp: str, *, replace: bool
) -> None:
    """Name ``conversation`` by ``external`` for the user. An alias there already stays
    (two first requests at once: one wins), or, with ``replace``, now names this one."""
    if replace:
        conflict = (
            "ON CONFLICT (user_id, external_id) DO UPDATE SET "
            "conversation_id = excluded.conversation_id, created_at = excluded.created_at"
        )
    else:
        conflict = "ON CONFLICT DO NOTHING"
    c.execute(
        "INSERT INTO conversation_aliases (user_id, external_id, conversation_id, created_at) "
        f"VALUES (?, ?, ?, ?) {conflict}",
        (user, external, conversation, stamp),
    )
