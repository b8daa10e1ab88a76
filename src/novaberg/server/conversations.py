"""Which conversation a ``/v1`` request continues, read from its headers: the choice itself is
:mod:`novaberg.engine.conversations`, asked through the engine's
:class:`~novaberg.engine.conversation_service.Conversations`.

``X-Novaberg-Conversation-Id`` names one of the user's conversations; else
``X-OpenWebUI-Chat-Id`` is a front-end's own chat id (a string, mapped to one conversation per
user); else the history the request resends chooses. Another user's conversation answers 404,
exactly as one that does not exist.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi import Request

from novaberg.engine import Engine
from novaberg.engine.conversation_service import Choice, Conversations, Said
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
    conversations = Conversations(engine)
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
        if not await conversations.owns(user, conversation):
            raise _not_found(text)
        return await conversations.continued(conversation, history, message)
    external = request.headers.get(OPENWEBUI_CHAT_HEADER)
    if external is not None and not is_blank(external):
        if len(external) > MAX_EXTERNAL_ID_CHARS:
            raise ApiProblem(
                400,
                f"{OPENWEBUI_CHAT_HEADER} is longer than {MAX_EXTERNAL_ID_CHARS} characters.",
                code="invalid_conversation_id",
            )
        return await conversations.aliased(user, external.strip(), history, message)
    return await conversations.matching(user, history, message)
