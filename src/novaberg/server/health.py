"""``GET /healthz`` (the process answers) and ``GET /readyz`` (the database and the primary
backend are reachable, else 503 naming which is not). Neither needs a key; neither says more
than a name and ok/unreachable."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from novaberg.errors import NovabergError
from novaberg.server.auth import engine_of

log = logging.getLogger("novaberg.server")
router = APIRouter()


class Health(BaseModel):
    status: Literal["ok"]


@router.get("/healthz")
async def healthz() -> Health:
    return Health(status="ok")


_CHECKS = {
    "type": "object",
    "description": "Each part (database, backend NAME): ok or unreachable.",
    "additionalProperties": {"type": "string", "enum": ["ok", "unreachable"]},
}
READY: dict[str, Any] = {
    "type": "object",
    "required": ["status", "checks"],
    "properties": {"status": {"const": "ready"}, "checks": _CHECKS},
}
NOT_READY: dict[str, Any] = {
    "type": "object",
    "required": ["status", "checks", "detail"],
    "properties": {
        "status": {"const": "not ready"},
        "checks": _CHECKS,
        "detail": {"type": "string", "description": "unreachable: the parts that are not ok"},
    },
}


@router.get(
    "/readyz",
    responses={
        200: {"content": {"application/json": {"schema": READY}}},
        503: {
            "description": "The database or the primary backend is unreachable.",
            "content": {"application/json": {"schema": NOT_READY}},
        },
    },
)
async def readyz(request: Request) -> JSONResponse:
    engine = engine_of(request)
    checks: dict[str, str] = {}
    try:
        await engine.ping_database()
        checks["database"] = "ok"
    except NovabergError as exc:
        log.warning("readiness: the database did not answer (%s)", type(exc).__name__)
        checks["database"] = "unreachable"
    primary = engine.chain.primary
    name = f"backend {primary.name}"
    try:
        status = await asyncio.wait_for(
            primary.status(), engine.settings.server.readiness_timeout_s
        )
        checks[name] = "ok" if status.reachable else "unreachable"
    except (TimeoutError, NovabergError):
        checks[name] = "unreachable"
    failing = [part for part, state in checks.items() if state != "ok"]
    if failing:
        return JSONResponse(
            {
                "status": "not ready",
                "checks": checks,
                "detail": "unreachable: " + ", ".join(failing),
            },
            status_code=503,
        )
    return JSONResponse({"status": "ready", "checks": checks})
