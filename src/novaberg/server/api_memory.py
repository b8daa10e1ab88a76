"""The native API's memory routes: one for each ``novaberg memory`` command, through the
engine's door to a user's memory (:class:`~novaberg.engine.memories.Memories`, which the MCP
tools use too), always for the key's user.

``GET /api/memory`` lists (``limit``/``offset``, newest first) or, with ``query``, searches
(best first, with each item's score and reason); ``GET /api/memory/{id}`` shows one with its
source; ``DELETE /api/memory/{id}`` forgets; ``GET /api/memory/export`` is the export file and
``POST /api/memory/import`` takes one as its body; ``GET /api/memory/profile`` and
``GET /api/memory/jobs``. Another user's memory id answers 404 exactly as a missing one.

Every database call runs in the database's worker threads, forget's checkpoint or ``VACUUM
FULL`` included: the event loop never waits for the disk.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse

from novaberg.engine.memories import MAX_ID, Memories
from novaberg.engine.memory_pages import (
    Correction,
    ExportFile,
    ForgottenView,
    ImportCounts,
    Imported,
    MemoryItemView,
    MemoryJob,
    MemoryJobs,
    MemoryPage,
    MemorySearch,
    MemoryShown,
    ProfileParts,
)
from novaberg.errors import UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.text import quoted

router = APIRouter(prefix="/api/memory", tags=["memory"])

User = Annotated[str, Depends(require_user)]


def _memories(request: Request) -> Memories:
    return Memories(engine_of(request))


def _missing(memory_id: int) -> ApiProblem:
    return ApiProblem(404, f"There is no memory {quoted(memory_id)}.")


@router.get("")
async def list_or_search(
    request: Request,
    user: User,
    query: Annotated[str | None, Query(max_length=2000, description="Search for this.")] = None,
    kind: Literal["short_term", "long_term", "event"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 1000,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> MemoryPage | MemorySearch:
    """Without ``query``: every memory (superseded facts included), newest first, a page at a
    time (``more`` says whether there is a next page). With ``query``: what Nova would recall
    for it, best first, each with ``score`` and ``reason``, and in ``messages`` the stored
    messages (the user's and Nova's) its words find, each with ``reason``."""
    memories = _memories(request)
    if query is not None:
        found = await memories.search(user, query, k=50, what="memory search")
        return MemorySearch.of(found)
    return MemoryPage.of(await memories.page(user, kind=kind, limit=limit, offset=offset))


@router.get("/export", response_model=ExportFile)
async def export(request: Request, user: User) -> JSONResponse:
    """Everything Nova knows about the user: the file ``novaberg memory export`` writes (sent
    as it writes it, an attachment)."""
    return JSONResponse(
        (await _memories(request).export(user)).model_dump(mode="json"),
        headers={"Content-Disposition": 'attachment; filename="novaberg-memory.json"'},
    )


@router.post(
    "/import",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
    responses=api_errors(
        (400, "Not an export of this user, or a file that cannot be imported; nothing changed.")
    ),
)
async def import_(request: Request, user: User) -> Imported:
    """Restore an export of this user (checked whole first; nothing changes if it cannot be
    imported: a 400 says why)."""
    raw = await request.body()
    try:
        counts = await _memories(request).restore(user, raw)
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    return Imported(imported=ImportCounts(**counts))


@router.get("/profile", response_model_exclude_none=True)
async def profile(request: Request, user: User) -> ProfileParts:
    """The current profile, core and adaptive (a part never written is left out), each
    statement with the memories it rests on."""
    return ProfileParts.of(await _memories(request).profile(user))


@router.get("/jobs")
async def jobs(request: Request, user: User) -> MemoryJobs:
    """The user's background memory jobs and how they ended."""
    rows = await _memories(request).jobs(user)
    return MemoryJobs(items=[MemoryJob.model_validate(r, from_attributes=True) for r in rows])


@router.get("/{memory_id}", responses=api_errors((404, "The user has no such memory.")))
async def show(memory_id: int, request: Request, user: User) -> MemoryShown:
    """One memory, with the turn and message it came from, and ``history``: every version of
    its chain, newest first (``memory show``)."""
    shown = await _memories(request).show(user, memory_id)
    if shown is None:
        raise _missing(memory_id)
    return MemoryShown.of_shown(shown)


@router.patch(
    "/{memory_id}",
    responses=api_errors(
        (400, "The body is not valid JSON, or the text cannot be stored; nothing changed."),
        (404, "The user has no such memory."),
        (409, "The memory is no longer current: correct its current version."),
    ),
)
async def correct(
    memory_id: int, correction: Correction, request: Request, user: User
) -> MemoryItemView:
    """Correct a memory (``memory correct``): the new current version, the old one kept in its
    history with ``valid_to`` and ``superseded_by``."""
    memories = _memories(request)
    # whose it is first: another user's id answers exactly as a missing one, whatever the body
    if await memories.get(user, memory_id) is None:
        raise _missing(memory_id)
    if not (correction.text or "").strip():
        raise ApiProblem(400, 'A correction needs its text: send {"text": "what it says now"}.')
    try:
        new = await memories.correct(user, memory_id, correction.text or "")
    except UsageError as exc:
        raise ApiProblem(409 if "no longer current" in str(exc) else 400, str(exc)) from None
    if new is None:
        raise _missing(memory_id)
    return MemoryItemView.of(new)


@router.post(
    "/{memory_id}/retract",
    responses=api_errors(
        (404, "The user has no such memory."),
        (409, "The memory is no longer current."),
    ),
)
async def retract(memory_id: int, request: Request, user: User) -> MemoryItemView:
    """Retract a memory (``memory retract``): it ends, with no successor."""
    try:
        ended = await _memories(request).retract(user, memory_id)
    except UsageError as exc:
        raise ApiProblem(409, str(exc)) from None
    if ended is None:
        raise _missing(memory_id)
    return MemoryItemView.of(ended)


@router.delete("/{memory_id}", responses=api_errors((404, "The user has no such memory.")))
async def forget(memory_id: int, request: Request, user: User) -> ForgottenView:
    """Forget one memory for good (with what was derived from it): the ``Forgotten`` result."""
    done = await _memories(request).forget(user, memory_id)  # its checkpoint in a worker
    if done is None:
        raise _missing(memory_id)
    return ForgottenView(forgotten=memory_id, **asdict(done))
