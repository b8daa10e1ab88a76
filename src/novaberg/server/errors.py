"""The error shapes: ``/v1`` answers as OpenAI does (``{"error": {"message", "type",
"code"}}``), every other route as FastAPI does (``{"detail": ...}``). Bad input is a 4xx in
that shape, never a 500 and never a stack trace."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

log = logging.getLogger("novaberg.server")

OPENAI_PREFIX = "/v1"


class ApiProblem(HTTPException):
    """An HTTP error with the OpenAI ``code`` it carries on ``/v1`` (framework control flow,
    raised only inside route handlers; Novaberg's own errors are translated into it)."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(status_code, message, headers=headers)
        self.code = code


def _openai_type(status: int) -> str:
    if status == 401:
        return "authentication_error"
    if status == 404:
        return "not_found_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def openai_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": _openai_type(status), "code": code}}


def error_response(
    path: str,
    status: int,
    message: str,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The error in the shape of the route ``path`` belongs to."""
    if path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/"):
        body = openai_error(status, message, code)
    else:
        body = {"detail": message}
    return JSONResponse(body, status_code=status, headers=headers)


def _validation_message(exc: RequestValidationError) -> str:
    """Where the request was wrong and how, without echoing what it sent."""
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
        if err.get("type") == "json_invalid":
            return "The request body is not valid JSON."
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "Invalid request: " + "; ".join(parts)


def install_error_handlers(app: FastAPI) -> None:
    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = getattr(exc, "code", None) or {
            401: "invalid_api_key",
            404: "not_found",
            405: "method_not_allowed",
            413: "request_too_large",
        }.get(exc.status_code)
        return error_response(request.url.path, exc.status_code, str(exc.detail), code, exc.headers)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        path = request.url.path
        if path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/"):
            return error_response(path, 400, _validation_message(exc), "invalid_request")
        return JSONResponse({"detail": _validation_message(exc)}, status_code=422)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("request to %s failed: %s", request.url.path, type(exc).__name__)
        return error_response(
            request.url.path, 500, "The server failed; the log names the error.", "server_error"
        )

    app.add_exception_handler(HTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(Exception, on_unexpected)
