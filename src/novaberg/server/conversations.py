"""Which conversation a request continues: ``X-Novaberg-Conversation-Id`` (one of the
user's conversation ids), else ``X-OpenWebUI-Chat-Id`` (a front-end's own chat id, mapped to
one conversation per user), else a new conversation. Another user's conversation answers 404,
exactly as one that does not exist (no existence leak)."""

from __future__ import annotations

from fastapi import Request

from novaberg.server.errors import ApiProblem
from novaberg.storage.db import Database, now
from novaberg.text import is_blank

CONVERSATION_HEADER = "X-Novaberg-Conversation-Id"
TURN_HEADER = "X-Novaberg-Turn-Id"
OPENWEBUI_CHAT_HEADER = "X-OpenWebUI-Chat-Id"
MAX_EXTERNAL_ID_CHARS = 200


def _not_found(conversation: str) -> ApiProblem:
    return ApiProblem(
        404, f"There is no conversation {conversation}.", code="conversation_not_found"
    )


def conversation_for(request: Request, db: Database, user: str) -> int:
    """The conversation this request's turn goes into (created when new)."""
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
        if db.conversation_user(conversation) != user:
            raise _not_found(text)
        return conversation
    external = request.headers.get(OPENWEBUI_CHAT_HEADER)
    if external is not None and not is_blank(external):
        if len(external) > MAX_EXTERNAL_ID_CHARS:
            raise ApiProblem(
                400,
                f"{OPENWEBUI_CHAT_HEADER} is longer than {MAX_EXTERNAL_ID_CHARS} characters.",
                code="invalid_conversation_id",
            )
        return aliased_conversation(db, user, external.strip())
    return db.new_conversation(user)


def aliased_conversation(db: Database, user: str, external: str) -> int:
    """The user's conversation for a front-end's chat id; a new one the first time."""
    found = db.scalar(
        "SELECT conversation_id FROM conversation_aliases WHERE user_id = ? AND external_id = ?",
        (user, external),
    )
    if found is not None:
        return int(found)
    stamp = now()
    with db.transaction() as c:
        created = c.execute(
            "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
            (user, stamp),
        ).scalar()
        c.execute(
            "INSERT INTO conversation_aliases (user_id, external_id, conversation_id, "
            "created_at) VALUES (?, ?, ?, ?)",
            (user, external, created, stamp),
        )
    return int(created)
