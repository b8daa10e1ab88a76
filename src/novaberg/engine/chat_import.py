"""Bringing a user's chats from elsewhere (``novaberg import-chats``): each chat becomes one of
their conversations, its messages finished turns of origin ``import`` with their own dates,
so that they are found as conversation history (the message signal of
:func:`~novaberg.memory.retrieval.recall`) and listed by ``GET /api/conversations``.

All in one transaction: a file is imported whole or not at all. Importing it again adds
nothing: each chat is remembered by a key of its format and its source's id (or its words) in
``conversation_aliases``. Nothing here makes memory items: what becomes a fact is for
salience, and another system's assistant is never a source of facts about the user.

With ``remember``, each imported user message (of this file's chats, imported now or
before) that has none yet gets a ``weigh`` event in the same transaction, oldest message
first: salience over the message alone (:func:`~novaberg.memory.jobs.weigh`), run by
``import-chats --remember`` at background priority; its events are what makes an
interrupted run resumable (running the command again goes on where it stopped).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from novaberg.engine.chat_formats import Chat, Parsed
from novaberg.jobs.events import EventQueue
from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection


@dataclass(frozen=True)
class Imported:
    conversations: int
    messages: int
    skipped: int
    """Chats imported before (the same key): left as they are."""
    to_weigh: int = 0
    """``weigh`` events enqueued now (with ``remember``): user messages that had none."""

    def view(self) -> dict[str, int]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "skipped": self.skipped,
        }


def import_chats(
    db: Database,
    user: str,
    parsed: Parsed,
    *,
    remember: bool = False,
    advanced: Callable[[int], None] | None = None,
) -> Imported:
    """Blocking (a command, or a database worker): store ``parsed``'s chats for ``user``;
    ``advanced(n)`` after each chat (a progress bar), ``n`` its messages."""
    conversations = messages = skipped = 0
    to_weigh: list[tuple[str, int, int, int]] = []
    with db.transaction() as c:
        for chat in parsed.chats:
            alias = "import:" + hashlib.sha256(f"{parsed.format}\n{chat.key}".encode()).hexdigest()
            known = c.execute(
                "SELECT conversation_id FROM conversation_aliases "
                "WHERE user_id = ? AND external_id = ?",
                (user, alias),
            ).scalar()
            if known is not None:
                skipped += 1
                conversation = int(known)
            else:
                conversation = _store_chat(c, user, alias, chat)
                messages += len(chat.messages)
                conversations += 1
            if remember:
                to_weigh += _unweighed(c, conversation)
            if advanced is not None:
                advanced(len(chat.messages))
        events = EventQueue(db)
        for _, turn, message, conversation in sorted(to_weigh):  # oldest message first
            payload = {"turn_id": turn, "message_id": message}
            events.enqueue(conversation, turn, "weigh", payload, c)
    return Imported(conversations, messages, skipped, len(to_weigh))


def _unweighed(c: Connection, conversation: int) -> list[tuple[str, int, int, int]]:
    """The imported user messages of ``conversation`` with no ``weigh`` event yet, as
    (said at, turn, message, conversation)."""
    rows = c.execute(
        "SELECT t.started_at, t.id AS turn_id, m.id AS message_id FROM turns t "
        "JOIN messages m ON m.turn_id = t.id AND m.role = 'user' "
        "WHERE t.conversation_id = ? AND t.origin = 'import' AND NOT EXISTS "
        "(SELECT 1 FROM events e WHERE e.turn_id = t.id AND e.type = 'weigh')",
        (conversation,),
    ).rows
    return [
        (str(r["started_at"]), int(r["turn_id"]), int(r["message_id"]), conversation) for r in rows
    ]


def _store_chat(c: Connection, user: str, alias: str, chat: Chat) -> int:
    """Store one chat as a new conversation; return its id."""
    started = chat.messages[0].at
    conversation = c.execute(
        "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
        (user, started),
    ).scalar()
    c.execute(
        "INSERT INTO conversation_aliases (user_id, external_id, conversation_id, created_at) "
        "VALUES (?, ?, ?, ?)",
        (user, alias, conversation, now()),
    )
    turn = None
    answered = True
    for message in chat.messages:
        # a user message starts a turn; the assistant's answer joins it; a second answer in a
        # row (or one before any user message) is a turn of its own with no user message
        if message.role == "user" or answered:
            said = message.text if message.role == "user" else ""
            turn = c.execute(
                "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
                "finished_at) VALUES (?, 'import', ?, 'done', ?, ?) RETURNING id",
                (conversation, said, message.at, message.at),
            ).scalar()
            answered = message.role == "assistant"
        else:
            answered = True
        c.execute(
            "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (conversation, turn, message.role, message.text, message.at),
        )
    return int(conversation)
