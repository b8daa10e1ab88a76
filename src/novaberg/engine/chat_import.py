"""Bringing a user's chats from elsewhere (``novaberg import-chats``): each chat becomes one of
their conversations, its messages finished turns of origin ``import`` with their own dates,
so that they are found as conversation history (the message signal of
:func:`~novaberg.memory.retrieval.recall`) and listed by ``GET /api/conversations``.

All in one transaction: a file is imported whole or not at all. Importing it again adds
nothing: each chat is remembered by a key of its format and its source's id (or its words) in
``conversation_aliases``. Nothing here makes memory items: what becomes a fact is for
salience, and another system's assistant is never a source of facts about the user.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from novaberg.engine.chat_formats import Chat, Parsed
from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection


@dataclass(frozen=True)
class Imported:
    conversations: int
    messages: int
    skipped: int
    """Chats imported before (the same key): left as they are."""

    def view(self) -> dict[str, int]:
        return {
            "conversations": self.conversations,
            "messages": self.messages,
            "skipped": self.skipped,
        }


def import_chats(db: Database, user: str, parsed: Parsed) -> Imported:
    """Blocking (a command, or a database worker): store ``parsed``'s chats for ``user``."""
    conversations = messages = skipped = 0
    with db.transaction() as c:
        for chat in parsed.chats:
            alias = "import:" + hashlib.sha256(f"{parsed.format}\n{chat.key}".encode()).hexdigest()
            if c.execute(
                "SELECT 1 FROM conversation_aliases WHERE user_id = ? AND external_id = ?",
                (user, alias),
            ).rows:
                skipped += 1
                continue
            messages += _store_chat(c, user, alias, chat)
            conversations += 1
    return Imported(conversations, messages, skipped)


def _store_chat(c: Connection, user: str, alias: str, chat: Chat) -> int:
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
    return len(chat.messages)
