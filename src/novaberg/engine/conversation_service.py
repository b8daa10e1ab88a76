"""A user's conversations as the doors reach them: the native API (``/api/conversations``,
``/api/turns``), the OpenAI-compatible route and the MCP server's ``talk`` call
:class:`Conversations`, never the database, so that which conversation a request continues is
decided in one place however it is asked (issue 24: the doors speak to the engine alone).

Every method is async and runs its database work in the database's worker threads: the event
loop never waits for the disk. A conversation id that is not the user's reads as not owned,
whoever's it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from novaberg.engine.conversations import (
    Choice,
    Said,
    aliased_conversation,
    in_conversation,
    matching_conversation,
    said_before,
)
from novaberg.engine.memories import MAX_ID
from novaberg.engine.pages import ConversationPage, MessagePage, conversation_page, message_page

if TYPE_CHECKING:
    from novaberg.engine.chat_formats import Parsed
    from novaberg.engine.chat_import import Imported
    from novaberg.engine.core import Engine

__all__ = ["MAX_ID", "Choice", "Conversations", "Said"]


class Conversations:
    """The conversations of the engine's users."""

    def __init__(self, engine: Engine) -> None:
        self._db = engine.db

    async def owns(self, user: str, conversation_id: int) -> bool:
        """Whether ``conversation_id`` is one of ``user``'s conversations (an id out of range
        is nobody's)."""
        if not 1 <= conversation_id <= MAX_ID:
            return False
        return await self._db.run(self._db.conversation_user, conversation_id) == user

    async def start(self, user: str) -> int:
        """A new, empty conversation of ``user``'s."""
        return await self._db.run(self._db.new_conversation, user)

    async def page(self, user: str, limit: int, offset: int) -> ConversationPage:
        """``user``'s conversations, newest first."""
        return await self._db.run(conversation_page, self._db, user, limit, offset)

    async def messages(self, conversation_id: int) -> MessagePage:
        """The stored messages of an owned conversation, oldest first."""
        return await self._db.run(message_page, self._db, conversation_id)

    async def import_chats(self, user: str, parsed: Parsed) -> Imported:
        """``parsed``'s chats as ``user``'s dated conversations (a chat imported before is
        skipped)."""
        from novaberg.engine.chat_import import import_chats

        return await self._db.run(import_chats, self._db, user, parsed)

    async def continued(
        self, conversation_id: int, history: Sequence[Said], message: str, *, new: bool = False
    ) -> Choice:
        """The named, owned conversation a resent ``history`` continues (a regenerate when the
        request is one)."""
        return await self._db.run(
            in_conversation, self._db, conversation_id, history, message, new=new
        )

    async def aliased(
        self, user: str, external: str, history: Sequence[Said], message: str
    ) -> Choice:
        """The conversation a front-end's own chat id ``external`` names (new the first time)."""
        conversation, new = await self._db.run(aliased_conversation, self._db, user, external)
        return await self.continued(conversation, history, message, new=new)

    async def matching(self, user: str, history: Sequence[Said], message: str) -> Choice:
        """The conversation a resent ``history`` with no id continues, or a new one."""
        return await self._db.run(matching_conversation, self._db, user, history, message)

    async def said_before(self, conversation_id: int, sentence: str) -> bool:
        """Whether one of Nova's stored replies in the conversation holds ``sentence``."""
        return await self._db.run(said_before, self._db, conversation_id, sentence)
