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

from collections.abc import Iterator
from typing import Any

import httpx
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

from novaberg.testing import OllamaTestServer
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
