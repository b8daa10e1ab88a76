"""Which conversation a ``/v1`` request continues, read from its headers: the choice itself is
:mod:`novaberg.engine.conversations`.

``X-Novaberg-Conversation-Id`` names one of the user's conversations; else
``X-OpenWebUI-Chat-Id`` is a front-end's own chat id (a string, mapped to one conversation per
user); else the history the request resends chooses. Another user's conversation answers 404,
exactly as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Request

from novaberg.engine import Engine
from novaberg.engine.conversations import (
    Choice,
    Said,
    aliased_conversation,
    in_conversation,
    matching_conversation,
)
from novaberg.server.errors import ApiProblem
from novaberg.text import is_blank

CONVERSATION_HEADER = "X-Novaberg-Conversation-Id"
TURN_HEADER = "X-Novaberg-Turn-Id"
OPENWEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"
MAX_EXTERNAL_ID_CHARS = 200


def _not_found(conversation: str) -> ApiProblem:
    return ApiProblem(
        404, f"There is no conversation {conversation}.", code="conversation_not_found"
    )


async def choose_conversation(
    request: Request, engine: Engine, user: str, history: Sequence[Said], message: str
) -> Choice:
    """The conversation this request's turn goes into (created when new), and the turn it
    regenerates, if it is one."""
    db = engine.db
    named = request.headers.get(CONVERSATION_HEADER)
    if named is not None:
        text = named.strip()
        if not text.isascii() or not text.isdigit() or len(text) > 18:
            raise ApiProblem(
                400,
                f"{CONVERSATION_HEADER} must be a conversation id (a positive integer).",
                code="invalid_conversation_id",
            )
        conversation = int(text)
        if await db.run(db.conversation_user, conversation) != user:
            raise _not_found(text)
        return await db.run(in_conversation, db, conversation, history, message)
    external = request.headers.get(OPENWEBUI_CHAT_HEADER)
    if external is not None and not is_blank(external):
        if len(external) > MAX_EXTERNAL_ID_CHARS:
            raise ApiProblem(
                400,
                f"{OPENWEBUI_CHAT_HEADER} is longer than {MAX_EXTERNAL_ID_CHARS} characters.",
                code="invalid_conversation_id",
            )
        conversation, new = await db.run(aliased_conversation, db, user, external.strip())
        return await db.run(in_conversation, db, conversation, history, message, new=new)
    return await db.run(matching_conversation, db, user, history, message)
