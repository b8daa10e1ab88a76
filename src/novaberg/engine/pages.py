"""The pages the native API answers with about conversations, as models: a user's
conversations (``GET /api/conversations``) and a conversation's messages (``GET
/api/conversations/{id}/messages``), read by :func:`conversation_page` and
:func:`message_page` from the repository's typed rows (:mod:`novaberg.storage.conversations`),
and what a chat import did. Their fields are the JSON the routes have always sent
(``{"items": [...]}``); as ``response_model`` they put those fields into ``/openapi.json``. The
memory pages are :mod:`novaberg.engine.memory_pages`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.storage import conversations as repository
from novaberg.storage.db import Database


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConversationView(_Body):
    id: int
    created_at: str
    turns: int = Field(description="How many of its turns finished.")


class ConversationPage(_Body):
    items: list[ConversationView] = Field(description="Newest first.")


class MessageView(_Body):
    id: int
    turn_id: int
    role: Literal["user", "assistant"]
    content: str
    created_at: str
    origin: str = Field(description="The turn's origin: user, self_trigger, proactive, ….")


class MessagePage(_Body):
    items: list[MessageView] = Field(description="Oldest first; forgotten turns left out.")


def conversation_page(db: Database, user: str, limit: int, offset: int) -> ConversationPage:
    """The user's conversations, newest first, ``limit`` from ``offset`` on (sync: run it
    through :meth:`~novaberg.storage.db.Database.run`)."""
    return ConversationPage(
        items=[
            ConversationView(id=r.id, created_at=r.created_at, turns=r.turns)
            for r in repository.conversations_of(db, user, limit, offset)
        ]
    )


def message_page(db: Database, conversation_id: int) -> MessagePage:
    """The conversation's messages, oldest first, a forgotten turn's left out (sync)."""
    return MessagePage(
        items=[
            MessageView(
                id=r.id,
                turn_id=r.turn_id,
                role=r.role,
                content=r.content,
                created_at=r.created_at,
                origin=r.origin,
            )
            for r in repository.messages_of(db, conversation_id)
        ]
    )


class ImportedChats(_Body):
    conversations: int
    messages: int
    skipped: int = Field(description="Chats imported before: left as they are.")
