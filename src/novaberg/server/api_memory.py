"""The native API's memory routes: one for each ``novaberg memory`` command, calling the same
store and transfer functions (:mod:`novaberg.cli.memory`), always for the key's user.

``GET /api/memory`` lists (``limit``/``offset``, newest first) or, with ``query``, searches
(best first, with each item's score and reason); ``GET /api/memory/{id}`` shows one with its
source; ``DELETE /api/memory/{id}`` forgets; ``GET /api/memory/export`` is the export file and
``POST /api/memory/import`` takes one as its body; ``GET /api/memory/profile`` and
``GET /api/memory/jobs``. Another user's memory id answers 404 exactly as a missing one.

Every database call runs in the database's worker threads (``await db.run(...)``), forget's
checkpoint or ``VACUUM FULL`` included: the event loop never waits for the disk.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from novaberg.errors import UsageError
from novaberg.memory.jobs import JOB_TYPES
from novaberg.memory.retrieval import SEARCH_MESSAGES, Heed, recall
from novaberg.memory.store import MemoryStore
from novaberg.memory.transfer import embed_imported, export_user, import_user, parse_export
from novaberg.memory.views import (
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
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.storage.text import MEMORY_TEXT_LIMIT
from novaberg.telemetry import Trace
from novaberg.text import quoted

router = APIRouter(prefix="/api/memory", tags=["memory"])

MAX_ID = 2**63 - 1
User = Annotated[str, Depends(require_user)]


def _store(request: Request) -> MemoryStore:
    return MemoryStore(engine_of(request).db)


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
    store = _store(request)
    if query is not None:
        engine = engine_of(request)
        found = await recall(
            store.db, engine.settings, user, query, queue=engine.queue, trace=Trace(),
            max_items=50, budget_tokens=100_000, what="memory search",
            messages=Heed(SEARCH_MESSAGES),
        )  # fmt: skip
        return MemorySearch.of(found)
    page = await store.db.run(store.items, user, kind=kind, limit=limit + 1, offset=offset)
    return MemoryPage.of(page, limit)


@router.get("/export", response_model=ExportFile)
async def export(request: Request, user: User) -> JSONResponse:
    """Everything Nova knows about the user: the file ``novaberg memory export`` writes (sent
    as it writes it, an attachment)."""
    db = engine_of(request).db
    return JSONResponse(
        await db.run(export_user, db, user),
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
        export = parse_export(raw, user)
        db = engine_of(request).db
        counts = await db.run(import_user, db, export)
        await db.run(embed_imported, db, engine_of(request).settings, user)  # by meaning too
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    return Imported(imported=ImportCounts(**counts))


@router.get("/profile", response_model_exclude_none=True)
async def profile(request: Request, user: User) -> ProfileParts:
    """The current profile, core and adaptive (a part never written is left out), each
    statement with the memories it rests on."""
    store = _store(request)
    return ProfileParts.of(await store.db.run(store.profile, user))


@router.get("/jobs")
async def jobs(request: Request, user: User) -> MemoryJobs:
    """The user's background memory jobs and how they ended."""
    db = engine_of(request).db
    rows = await db.run(db.events_of_user, user, JOB_TYPES)
    return MemoryJobs(items=[MemoryJob.model_validate(r) for r in rows])


@router.get("/{memory_id}", responses=api_errors((404, "The user has no such memory.")))
async def show(memory_id: int, request: Request, user: User) -> MemoryShown:
    """One memory, with the turn and message it came from, and ``history``: every version of
    its chain, newest first (``memory show``)."""
    store = _store(request)
    if not 1 <= memory_id <= MAX_ID:
        raise _missing(memory_id)

    def read() -> MemoryShown | None:  # in a worker
        memory = store.get(user, memory_id)
        if memory is None:
            return None
        source = memory.source_turn_id
        turn = (store.db.turn(source) if source else None) or {}
        chain = store.history(user, memory_id)
        return MemoryShown.of_item(memory, chain, turn.get("origin"), turn.get("user_text"))

    shown = await store.db.run(read)
    if shown is None:
        raise _missing(memory_id)
    return shown


class Correction(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, max_length=MEMORY_TEXT_LIMIT, description="What it says now.")


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
    store = _store(request)
    # whose it is first: another user's id answers exactly as a missing one, whatever the body
    if not 1 <= memory_id <= MAX_ID or await store.db.run(store.get, user, memory_id) is None:
        raise _missing(memory_id)
    if not (correction.text or "").strip():
        raise ApiProblem(400, 'A correction needs its text: send {"text": "what it says now"}.')
    try:
        new = await store.db.run(store.correct, user, memory_id, correction.text or "")
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
    store = _store(request)
    if not 1 <= memory_id <= MAX_ID:
        raise _missing(memory_id)
    try:
        ended = await store.db.run(store.retract, user, memory_id)
    except UsageError as exc:
        raise ApiProblem(409, str(exc)) from None
    if ended is None:
        raise _missing(memory_id)
    return MemoryItemView.of(ended)


@router.delete("/{memory_id}", responses=api_errors((404, "The user has no such memory.")))
async def forget(memory_id: int, request: Request, user: User) -> ForgottenView:
    """Forget one memory for good (with what was derived from it): the ``Forgotten`` result."""
    store = _store(request)
    # forget compacts the files (a checkpoint, or VACUUM FULL on PostgreSQL): in a worker
    done = await store.db.run(store.forget, user, memory_id) if 1 <= memory_id <= MAX_ID else None
    if done is None:
        raise _missing(memory_id)
    return ForgottenView(forgotten=memory_id, **asdict(done))
