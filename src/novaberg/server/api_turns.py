"""The native API's turns and conversations: ``POST /api/turns`` (the object ``novaberg ask
--json`` prints), ``GET /api/turns/{id}`` (the same object, from the database),
``GET /api/conversations`` and ``GET /api/conversations/{id}/messages``.

Everything runs as the key's user; another user's turn or conversation answers 404 exactly as
one that does not exist. Errors in FastAPI's ``{"detail": ...}`` shape.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from novaberg.errors import BackendError, ModelOutputError, NovabergError, UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem
from novaberg.server.stored_turns import stored_turn_json, turn_owner
from novaberg.validation import validate_message

router = APIRouter(prefix="/api", tags=["turns"])

MAX_ID = 2**63 - 1


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(description="What the user says to Nova.")
    conversation_id: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="One of the user's conversations; new if unset."
    )


def _turn_problem(exc: NovabergError) -> ApiProblem:
    if isinstance(exc, UsageError):
        return ApiProblem(400, str(exc))
    if isinstance(exc, BackendError | ModelOutputError):
        return ApiProblem(502, "The model backend gave no usable answer.")
    return ApiProblem(500, "The turn failed; the server log names the error.")


def _no_conversation(conversation: int) -> ApiProblem:
    return ApiProblem(404, f"There is no conversation {conversation}.")


@router.post("/turns")
async def post_turn(
    body: TurnRequest, request: Request, user: Annotated[str, Depends(require_user)]
) -> dict[str, Any]:
    """One turn as the key's user; the object ``novaberg ask --json`` prints."""
    engine = engine_of(request)
    try:
        message = validate_message(body.message, engine.settings)
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    if body.conversation_id is not None and (
        engine.db.conversation_user(body.conversation_id) != user
    ):
        raise _no_conversation(body.conversation_id)
    try:
        result = await engine.run_turn(message, conversation_id=body.conversation_id, user=user)
    except NovabergError as exc:
        raise _turn_problem(exc) from exc
    engine.start_background()  # the turn's memory jobs, in this process's loop
    return result.contract_json()


@router.get("/turns/{turn_id}")
async def get_turn(
    turn_id: int,
    request: Request,
    user: Annotated[str, Depends(require_user)],
) -> dict[str, Any]:
    """A finished turn of the key's user, rebuilt from what was stored (see the README for
    what a stored turn cannot give back exactly)."""
    db = engine_of(request).db
    row = turn_owner(db, turn_id) if 1 <= turn_id <= MAX_ID else None
    if row is None or row["user_id"] != user:
        raise ApiProblem(404, f"There is no turn {turn_id}.")
    if row["status"] != "done":
        raise ApiProblem(409, f"Turn {turn_id} is {row['status']}: it has no stored reply.")
    return stored_turn_json(db, row, user)


@router.get("/conversations")
async def conversations(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> dict[str, Any]:
    """The user's conversations, newest first, with how many turns each has finished."""
    rows = engine_of(request).db.query(
        "SELECT c.id, c.created_at, "
        "(SELECT COUNT(*) FROM turns t WHERE t.conversation_id = c.id AND t.status = 'done') "
        "AS turns FROM conversations c WHERE c.user_id = ? ORDER BY c.id DESC LIMIT ? OFFSET ?",
        (user, limit, offset),
    )
    return {"items": [{**r, "turns": int(r["turns"])} for r in rows]}


@router.get("/conversations/{conversation_id}/messages")
async def messages(
    conversation_id: int,
    request: Request,
    user: Annotated[str, Depends(require_user)],
) -> dict[str, Any]:
    """The conversation's stored messages, oldest first (a turn whose words were forgotten
    is left out, as from Nova's own history)."""
    db = engine_of(request).db
    if not 1 <= conversation_id <= MAX_ID or db.conversation_user(conversation_id) != user:
        raise _no_conversation(conversation_id)
    rows = db.query(
        "SELECT m.id, m.turn_id, m.role, m.content, m.created_at FROM messages m "
        "JOIN turns t ON t.id = m.turn_id WHERE m.conversation_id = ? "
        "AND t.forgotten_at IS NULL ORDER BY m.id",
        (conversation_id,),
    )
    return {"items": rows}
