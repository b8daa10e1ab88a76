"""Details the web page shows and no CLI command prints.

``GET /api/turns/{id}/why``: what the web page's Why panel shows beside the contract object
of ``GET /api/turns/{id}`` (:mod:`novaberg.engine.why`). Only the key's user's turns; another
user's turn answers 404 like a missing one.

``GET /api/memory/{id}/family``: what ``DELETE /api/memory/{id}`` would forget with the item
(the facts derived from it, the items a forgotten fact was made of), so that the page's
confirmation can say what else goes. Nothing is changed.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request

from novaberg.engine.memories import Memories
from novaberg.engine.memory_pages import FamilyView
from novaberg.engine.why import TurnWhy
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.server.turns import service_of
from novaberg.text import quoted

router = APIRouter(prefix="/api")


@router.get("/turns/{turn_id}/why", tags=["turns"], responses=api_errors(404))
async def why(
    turn_id: int, request: Request, user: Annotated[str, Depends(require_user)]
) -> TurnWhy:
    """The details of a turn's trace for the web page's Why panel."""
    found = await service_of(request).why(user, turn_id)
    if found is None:
        raise ApiProblem(404, f"There is no turn {quoted(turn_id)}.")
    return found


@router.get("/memory/{memory_id}/family", tags=["memory"], responses=api_errors(404))
async def family(
    memory_id: int, request: Request, user: Annotated[str, Depends(require_user)]
) -> FamilyView:
    """What forgetting the memory would remove with it (``items``, the memory itself first
    among them, and the turns whose words would be erased); nothing is changed."""
    found = await Memories(engine_of(request)).family(user, memory_id)
    if found is None:
        raise ApiProblem(404, f"There is no memory {quoted(memory_id)}.")
    return FamilyView.of(memory_id, found)
