"""The error shapes: ``/v1`` answers as OpenAI does (``{"error": {"message", "type",
"code"}}``), every other route as FastAPI does (``{"detail": ...}``). Bad input is a 4xx in
that shape, never a 500 and never a stack trace; a body that cannot be parsed is a 400
(``invalid_request`` on ``/v1``), and a value of the request an error repeats is cut and
quoted (:func:`novaberg.text.quoted`).

``type`` on ``/v1`` is the one OpenAI's API sends for the status (:data:`OPENAI_TYPES`); the
official client chooses its exception class by the status alone (401 ``AuthenticationError``,
429 ``RateLimitError``, ...), and exposes ``type`` and ``code`` on it.

The OpenAPI document lists every error a route answers, with its body schema
(:func:`openai_errors` / :func:`api_errors` for what a route itself refuses, and
:func:`document_errors` for what the framework answers on every route of a kind: 401 and 429
on every route that needs a key, 413 on every route that takes a body, and the validation
error — 400 on ``/v1``, 422 on ``/api`` — on every route with parameters or a body).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from novaberg.text import field_path, quoted

log = logging.getLogger("novaberg.server")

OPENAI_PREFIX = "/v1"
API_PREFIX = "/api"


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


OPENAI_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "invalid_request_error",  # OpenAI: "Incorrect API key provided", code invalid_api_key
    404: "invalid_request_error",  # OpenAI: an unknown model, code model_not_found
    405: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    429: "requests",  # OpenAI's requests-per-minute limit, code rate_limit_exceeded
    500: "server_error",
    502: "server_error",
    503: "service_unavailable_error",  # OpenAI: an overloaded server
}
"""The ``type`` of a ``/v1`` error per status, as OpenAI's API answers it."""


def openai_type(status: int) -> str:
    return OPENAI_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def openai_error(status: int, message: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": openai_type(status), "code": code}}


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
    """Where the request was wrong and how, without echoing what it sent (a key it chose is
    named cut and quoted: :func:`novaberg.text.field_path`)."""
    parts = []
    for err in exc.errors()[:5]:
        where = field_path([p for p in err.get("loc", ()) if p != "body"]) or "body"
        if err.get("type") == "json_invalid":
            return "The request body is not valid JSON."
        parts.append(f"{where}: {_one_line(str(err.get('msg', 'invalid')))}")
    return "Invalid request: " + "; ".join(parts)


def _one_line(text: str, limit: int = 200) -> str:
    """A validation message as it is (pydantic's never repeats the input), unless it could
    forge a line or is long (a validator's own text might repeat it): then quoted, cut."""
    return text if len(text) <= limit and text.isprintable() else quoted(text, limit)


BODY_FAILURES: dict[type[BaseException], str] = {
    RecursionError: "The request body is nested too deeply to be read as JSON.",
    UnicodeDecodeError: "The request body is not valid JSON: it is not UTF-8.",
    ValueError: "The request body is not valid JSON that can be read (a number with more "
    "than 4300 digits?).",
}
"""What FastAPI's own "There was an error parsing the body" (a 400 raised from what reading
the JSON raised) says instead, by that error's class (the first that matches: a
``UnicodeDecodeError`` is a ``ValueError`` too)."""


FASTAPI_BODY_FAILURE = "There was an error parsing the body"


def _body_failure(exc: HTTPException) -> str | None:
    """The clear message for FastAPI's parse error of a body, ``None`` for any other error."""
    if isinstance(exc, ApiProblem) or exc.detail != FASTAPI_BODY_FAILURE:
        return None
    for kind, message in BODY_FAILURES.items():
        if isinstance(exc.__cause__, kind):
            return message
    return "The request body cannot be read as JSON."


def install_error_handlers(app: FastAPI) -> None:
    """The error shapes on every route, and their documentation (:func:`document_errors`)."""

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        code = getattr(exc, "code", None) or {
            400: "invalid_request",
            401: "invalid_api_key",
            404: "not_found",
            405: "method_not_allowed",
            413: "request_too_large",
        }.get(exc.status_code)
        message = _body_failure(exc) or str(exc.detail)
        return error_response(request.url.path, exc.status_code, message, code, exc.headers)

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
    document_errors(app)


# --- the OpenAPI document -------------------------------------------------------------------

OPENAI_ERROR_SCHEMA = "OpenAIError"
API_ERROR_SCHEMA = "ApiError"
SCHEMAS: dict[str, dict[str, Any]] = {
    OPENAI_ERROR_SCHEMA: {
        "title": OPENAI_ERROR_SCHEMA,
        "description": "An error on /v1, in OpenAI's shape.",
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["message", "type", "code"],
                "properties": {
                    "message": {"type": "string"},
                    "type": {
                        "type": "string",
                        "description": "OpenAI's type for the status: invalid_request_error "
                        "(4xx), requests (429), server_error (500, 502), "
                        "service_unavailable_error (503).",
                    },
                    "code": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                },
            }
        },
    },
    API_ERROR_SCHEMA: {
        "title": API_ERROR_SCHEMA,
        "description": "An error on /api, in FastAPI's shape.",
        "type": "object",
        "required": ["detail"],
        "properties": {"detail": {"type": "string"}},
    },
}
MEANINGS: dict[int, str] = {
    400: "Bad request (a message the CLI would refuse, a malformed header or value).",
    401: "A missing, wrong or revoked key; or a front-end key whose end user is not named validly.",
    404: "Not found (another user's id answers exactly as a missing one).",
    409: "Conflict with what runs or is stored.",
    413: "The request body is larger than server.max_body_bytes.",
    422: "Invalid request: malformed JSON, a missing field or a wrong type.",
    429: "Too many requests for this user (server.rate_limit_per_minute); Retry-After says "
    "how many seconds to wait.",
    500: "The server failed; its log names the error.",
    502: "The model backend gave no usable answer.",
    503: "Too many model calls are waiting (server.max_queue); Retry-After says how many "
    "seconds to wait.",
}
RETRY_AFTER_HEADER: dict[str, Any] = {
    "Retry-After": {
        "description": "Seconds to wait before trying again.",
        "required": True,
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}
Documented = int | tuple[int, str]
"""A status, or a status with what it means on this route."""


def _response(schema: str, status: int, meaning: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "description": meaning or MEANINGS[status],
        "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema}"}}},
    }
    if status in (429, 503):
        out["headers"] = RETRY_AFTER_HEADER
    return out


def _responses(schema: str, documented: tuple[Documented, ...]) -> dict[int | str, Any]:
    out: dict[int | str, Any] = {}
    for item in documented:
        status, meaning = item if isinstance(item, tuple) else (item, None)
        out[status] = _response(schema, status, meaning)
    return out


def openai_errors(*documented: Documented) -> dict[int | str, Any]:
    """``responses=`` for the errors a ``/v1`` route itself answers (a status, or a status
    with what it means there), in OpenAI's shape."""
    return _responses(OPENAI_ERROR_SCHEMA, documented)


def api_errors(*documented: Documented) -> dict[int | str, Any]:
    """``responses=`` for the errors an ``/api`` route itself answers, as ``{"detail"}``."""
    return _responses(API_ERROR_SCHEMA, documented)


def _is_openai(path: str) -> bool:
    return path == OPENAI_PREFIX or path.startswith(OPENAI_PREFIX + "/")


def _framework_errors(path: str, operation: dict[str, Any]) -> None:
    """What every operation of its kind may answer, whatever its route does."""
    shape = OPENAI_ERROR_SCHEMA if _is_openai(path) else API_ERROR_SCHEMA
    responses: dict[str, Any] = operation.setdefault("responses", {})
    if _is_openai(path) or path == API_PREFIX or path.startswith(API_PREFIX + "/"):
        # auth.require_user on every /v1 and /api route (tests/test_server_auth.py holds
        # every route of the document to it): the key, then the user's rate limit
        responses.setdefault("401", _response(shape, 401))
        responses.setdefault("429", _response(shape, 429))
    if "requestBody" in operation:  # limits.BodyLimit
        responses.setdefault("413", _response(shape, 413))
    if "422" in responses:  # FastAPI's validation error, answered in this route's shape
        if shape == OPENAI_ERROR_SCHEMA:  # on /v1 it is a 400
            del responses["422"]
            responses.setdefault("400", _response(shape, 400, MEANINGS[422]))
        else:
            responses["422"] = _response(shape, 422)


def document_errors(app: FastAPI) -> None:
    """Make ``app``'s OpenAPI document list the errors the framework answers on its routes
    (see the module's doc) besides those each route documents with ``responses=``, and the
    two error schemas. Runs when the document is first asked for, after every route is in."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        schema.setdefault("components", {}).setdefault("schemas", {}).update(SCHEMAS)
        for path, operations in schema.get("paths", {}).items():
            for operation in operations.values():
                _framework_errors(path, operation)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
