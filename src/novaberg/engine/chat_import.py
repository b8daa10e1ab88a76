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
from novaberg.storage import conversations as conversation_rows
from novaberg.storage import imports
from novaberg.storage.db import Database, now
from novaberg.storage.events import EventPayload
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
    to_weigh: list[imports.Unweighed] = []
    with db.transaction() as c:
        for chat in parsed.chats:
            alias = "import:" + hashlib.sha256(f"{parsed.format}\n{chat.key}".encode()).hexdigest()
            known = conversation_rows.aliased(c, user, alias)
            if known is not None:
                skipped += 1
                conversation = known
            else:
                conversation = _store_chat(c, user, alias, chat)
                messages += len(chat.messages)
                conversations += 1
            if remember:
                to_weigh += imports.unweighed(c, conversation)
            if advanced is not None:
                advanced(len(chat.messages))
        events = EventQueue(db)
        for u in sorted(to_weigh, key=_said_order):  # oldest message first
            payload = EventPayload(turn_id=u.turn_id, message_id=u.message_id)
            events.enqueue(u.conversation_id, u.turn_id, "weigh", payload, c)
    return Imported(conversations, messages, skipped, len(to_weigh))


def _said_order(u: imports.Unweighed) -> tuple[str, int, int, int]:
    return (u.said_at, u.turn_id, u.message_id, u.conversation_id)


def _store_chat(c: Connection, user: str, alias: str, chat: Chat) -> int:
    """Store one chat as a new conversation; return its id."""
    started = chat.messages[0].at
    conversation = conversation_rows.create(c, user, started)
    imports.name_chat(c, user, alias, conversation, now())
    turn = None
    answered = True
    for message in chat.messages:
        # a user message starts a turn; the assistant's answer joins it; a second answer in a
        # row (or one before any user message) is a turn of its own with no user message
        if message.role == "user" or answered:
            said = message.text if message.role == "user" else ""
            turn = imports.add_turn(c, conversation, said, message.at)
            answered = message.role == "assistant"
        else:
            answered = True
        imports.add_message(c, conversation, turn, message.role, message.text, message.at)
    return conversation
