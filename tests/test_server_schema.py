"""schemathesis against a real ``novaberg serve`` process, from its own ``/openapi.json``, with
a valid key: generated requests, valid ones and ones that break the schema, to every operation
never get a 5xx, every status they get is documented for the operation, and every response
conforms to its documented schema, content type and headers. The document lists each error a
route answers, in its shape (``/v1``: OpenAI's, ``/api``: ``{"detail"}``); the last tests read
that from the document itself.

What is left out, and why: ``GET /api/events`` is an endless server-sent event stream (it ends
only when the client goes away), so a generated request would never return; its auth and 404s
are in test_server_auth.py and its behaviour in its own tests.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import httpx
import openai
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova

EXAMPLES = {GenerationMode.POSITIVE: 6, GenerationMode.NEGATIVE: 4}
"""Per operation and mode: enough to hit the bad-input paths, small enough for < 60 s here."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    response_headers_conformance,
]
EXCLUDED_PATHS = ("/api/events",)


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    env = {"NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": "0"}  # generated requests come fast
    home = tmp_path_factory.mktemp("serve-schema") / "home"
    with running_nova(ollama_server, home, ("ada",), extra_env=env) as started:
        yield started


def operations(nova: Nova) -> list[Any]:
    loaded = schemathesis.openapi.from_url(f"{nova.url}/openapi.json")
    found = [result.ok() for result in loaded.get_all_operations()]
    assert {"/v1/chat/completions", "/api/turns"} <= {op.path for op in found}
    return [op for op in found if op.path not in EXCLUDED_PATHS]


def run_generated(
    nova: Nova, operation: Any, mode: GenerationMode, examples: int, sent: list[str]
) -> None:
    """``examples`` generated requests of ``mode`` to ``operation``, each checked."""

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def generated(case: schemathesis.Case) -> None:
        sent.append(case.path)
        case.call_and_validate(headers=nova.auth("ada"), timeout=60, checks=CHECKS)

    generated()


def test_generated_requests_get_no_5xx_and_conforming_answers(
    nova: Nova, server: OllamaTestServer
) -> None:
    failures: list[str] = []
    sent: dict[GenerationMode, list[str]] = {mode: [] for mode in EXAMPLES}
    chosen = operations(nova)
    paths = document(nova)["paths"]
    for mode, examples in EXAMPLES.items():
        for operation in chosen:
            described = paths[operation.path][operation.method.lower()]
            takes = described.get("parameters") or "requestBody" in described
            if mode is GenerationMode.NEGATIVE and not takes:
                continue  # nothing it takes can break the schema
            try:
                run_generated(nova, operation, mode, examples, sent[mode])
            except Exception as exc:  # every operation is tried; all failures are reported
                failures.append(f"{mode.value} {operation.method.upper()} {operation.path}: {exc}")
    assert not failures, "\n\n".join(failures)
    assert {op.path for op in chosen} <= set(sent[GenerationMode.POSITIVE])
    assert len(sent[GenerationMode.POSITIVE]) >= 2 * len(chosen)
    assert len(sent[GenerationMode.NEGATIVE]) >= len(chosen)  # schema-breaking requests went out


def document(nova: Nova) -> dict[str, Any]:
    loaded: dict[str, Any] = httpx.get(f"{nova.url}/openapi.json").json()
    return loaded


def error_schema(operation: dict[str, Any], status: str) -> str:
    schema = operation["responses"][status]["content"]["application/json"]["schema"]
    return str(schema["$ref"]).rsplit("/", 1)[-1]


def test_every_route_documents_its_errors_in_its_shape(nova: Nova) -> None:
    paths = document(nova)["paths"]
    for path, operations_of in paths.items():
        for method, operation in operations_of.items():
            name = f"{method.upper()} {path}"
            if not path.startswith(("/v1/", "/api/")):
                continue
            shape = "OpenAIError" if path.startswith("/v1/") else "ApiError"
            for status in ("401", "429"):  # every keyed route: the key, the rate limit
                assert error_schema(operation, status) == shape, name
            assert "Retry-After" in operation["responses"]["429"]["headers"], name
            if "requestBody" in operation:
                assert error_schema(operation, "413") == shape, name
            if path.startswith("/v1/"):
                assert "422" not in operation["responses"], name  # /v1 validation is a 400
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    assert error_schema(operation, status) == shape, f"{name} {status}"
                    assert response["description"], f"{name} {status}"
    chat = paths["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "401", "404", "409", "413", "429", "500", "502", "503"} <= set(chat)
    turns = paths["/api/turns"]["post"]["responses"]
    assert {"400", "401", "404", "409", "413", "422", "429", "500", "502", "503"} <= set(turns)
    assert {"404", "409"} <= set(paths["/api/turns/{turn_id}"]["get"]["responses"])
    for operation in paths["/api/memory/{memory_id}"].values():
        assert "404" in operation["responses"]
    assert "503" in paths["/readyz"]["get"]["responses"]


def test_the_error_schemas_hold_the_contract_shapes(nova: Nova) -> None:
    schemas = document(nova)["components"]["schemas"]
    openai_error = schemas["OpenAIError"]["properties"]["error"]
    assert set(openai_error["required"]) == {"message", "type", "code"}
    assert schemas["ApiError"]["required"] == ["detail"]
    # real answers of both shapes have exactly the required keys
    missing = httpx.get(f"{nova.url}/v1/models")
    assert missing.status_code == 401 and set(missing.json()["error"]) == {
        "message",
        "type",
        "code",
    }
    native = httpx.get(f"{nova.url}/api/memory/9999999", headers=nova.auth("ada"))
    assert native.status_code == 404 and set(native.json()) == {"detail"}


# --- /v1 errors as the official openai client sees them ----------------------------------------

RATE = 4
"""Requests a minute per user on the strict server: each test below uses users of its own."""
STRICT_USERS = ("ada", "bob", "carl", "dan", "erin", "fay", "gus", "hal")


@pytest.fixture(scope="module")
def strict(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    """A server whose limits are reached by a few requests: a rate of RATE a minute, one model
    call at a time and one waiting."""
    env = {
        "NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": str(RATE),
        "NOVABERG_SERVER__MAX_QUEUE": "1",
        "NOVABERG_CONCURRENCY__OLLAMA": "1",
        LOOP_GUARD_ENV: "1",
    }
    home = tmp_path_factory.mktemp("serve-errors") / "home"
    with running_nova(ollama_server, home, STRICT_USERS, extra_env=env) as started:
        yield started


@pytest.fixture
def clients() -> Iterator[ExitStack]:
    """Closes the test's openai clients (their pooled connections) when it ends."""
    with ExitStack() as stack:
        yield stack


class Background:
    """A chat completion running in a thread; ``result()`` waits for it."""

    def __init__(self, call: Callable[[], object]) -> None:
        self._done: list[object] = []
        self._thread = threading.Thread(target=lambda: self._done.append(call()), daemon=True)
        self._thread.start()

    def result(self) -> object:
        self._thread.join(timeout=60)
        assert self._done, "the background request did not finish"
        return self._done[0]


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def sent(server: OllamaTestServer, text: str) -> bool:
    return any(text in json.dumps(r.body) for r in server.requests())


def say(nova: Nova, who: str, text: str, **options: Any) -> Any:
    """A chat completion (not streamed) through a client closed afterwards."""
    with nova.client(who) as client:
        return client.chat.completions.create(
            model="nova", messages=[{"role": "user", "content": text}], **options
        )


def refused(
    kind: type[openai.APIStatusError],
    status: int,
    type_: str,
    code: str,
    call: Callable[[], object],
) -> openai.APIStatusError:
    """The error the official client raised for ``call``, checked for class, status, type and
    code, and that the body is the contract's shape."""
    with pytest.raises(kind) as caught:
        call()
    error = caught.value
    assert type(error) is kind, type(error)  # the class for exactly this status
    assert (error.status_code, error.type, error.code) == (status, type_, code), error.body
    assert isinstance(error.body, dict) and set(error.body) == {"message", "type", "code"}
    assert error.message and "Traceback" not in str(error.body["message"])
    return error


def test_4xx_errors_are_the_client_classes_with_openai_types(
    strict: Nova, server: OllamaTestServer, clients: ExitStack
) -> None:
    client = clients.enter_context(strict.client("ada"))
    refused(
        openai.BadRequestError, 400, "invalid_request_error", "invalid_request",
        lambda: client.chat.completions.create(model="nova", messages=[]),
    )  # fmt: skip
    wrong = clients.enter_context(
        openai.OpenAI(base_url=f"{strict.url}/v1", api_key="nb-not-a-key", max_retries=0)
    )
    refused(
        openai.AuthenticationError, 401, "invalid_request_error", "invalid_api_key",
        wrong.models.list,
    )  # fmt: skip
    refused(
        openai.NotFoundError, 404, "invalid_request_error", "model_not_found",
        lambda: client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        ),
    )  # fmt: skip
    big = "y" * (1024 * 1024 + 10)
    refused(
        openai.APIStatusError, 413, "invalid_request_error", "request_too_large",
        lambda: say(strict, "bob", big),
    )  # fmt: skip


def test_429_is_a_rate_limit_error_with_retry_after(strict: Nova, clients: ExitStack) -> None:
    client = clients.enter_context(strict.client("carl"))
    for _ in range(RATE):
        client.models.list()
    error = refused(
        openai.RateLimitError, 429, "requests", "rate_limit_exceeded", client.models.list
    )
    assert int(error.response.headers["retry-after"]) >= 1


def test_409_is_a_conflict_error(
    strict: Nova, server: OllamaTestServer, clients: ExitStack
) -> None:
    opened = (
        clients.enter_context(strict.client("dan"))
        .chat.completions.with_raw_response.create(
            model="nova", messages=[{"role": "user", "content": "open a conversation"}]
        )
        .headers["X-Novaberg-Conversation-Id"]
    )
    named = {"X-Novaberg-Conversation-Id": opened}
    server.set_delay(1.0)
    first = Background(lambda: say(strict, "dan", "first-5120", extra_headers=named))
    wait_for(lambda: sent(server, "first-5120"), "the first turn's model call")
    refused(
        openai.ConflictError, 409, "invalid_request_error", "conversation_busy",
        lambda: say(strict, "dan", "second", extra_headers=named),
    )  # fmt: skip
    server.set_delay(0.0)
    assert first.result() is not None


def test_5xx_are_internal_server_errors_with_openai_types(
    strict: Nova, server: OllamaTestServer
) -> None:
    server.standing("responder", Reply(status=400, error="the model refused"))
    refused(
        openai.InternalServerError, 502, "server_error", "backend_error",
        lambda: say(strict, "erin", "fail"),
    )  # fmt: skip
    # once the stream has started, the same error is its last event: an APIError with the type
    with strict.client("erin") as client, pytest.raises(openai.APIError) as caught:
        chunks = client.chat.completions.create(
            model="nova", messages=[{"role": "user", "content": "fail"}], stream=True
        )
        for _ in chunks:
            pass
    assert type(caught.value) is openai.APIError  # not a status error: the status was 200
    assert (caught.value.type, caught.value.code) == ("server_error", "backend_error")
    server.reset()
    server.set_delay(1.5)
    running = Background(lambda: say(strict, "fay", "holds the one slot"))
    wait_for(lambda: sent(server, "holds the one slot"), "the first turn's model call")
    waiting = Background(lambda: say(strict, "gus", "waits for it"))
    wait_for(lambda: sent(server, "waits for it") or queue_waiting(strict) >= 1, "a waiting call")
    error = refused(
        openai.InternalServerError, 503, "service_unavailable_error", "queue_full",
        lambda: say(strict, "hal", "one too many"),
    )  # fmt: skip
    assert int(error.response.headers["retry-after"]) >= 1
    server.set_delay(0.0)
    assert running.result() is not None and waiting.result() is not None


def queue_waiting(nova: Nova) -> int:
    """Model calls waiting for a slot, from the server's own /metrics."""
    text = httpx.get(f"{nova.url}/metrics").text
    return sum(
        int(float(m.group(1)))
        for m in re.finditer(r"^novaberg_queue_waiting\{[^}]*\} (\S+)$", text, re.MULTILINE)
    )
