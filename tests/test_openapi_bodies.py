"""What ``/openapi.json`` says of each route's success body (issue 24): a typed body lists its
fields, so a client can be generated from the schema and a changed body shows in a diff.

The routes whose bodies are not typed yet are named here, so the list can only shrink: a new
route must come typed, and typing one means taking it off the list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from novaberg.config import load_settings
from novaberg.server.app import create_app

UNTYPED = {
    # OpenAI's shapes, JSON or an event stream by the request's `stream`; audio bytes
    "POST /v1/chat/completions",
    "POST /v1/audio/speech",
    # the export file, exactly as `memory export` writes it
    "GET /api/memory/export",
    # not typed yet (issue 24: left)
    "POST /v1/audio/transcriptions",
    "GET /v1/audio/models",
    "GET /v1/audio/voices",
    "GET /api/stats",
    "POST /api/memory/import",
    "GET /api/memory/profile",
    "GET /api/memory/jobs",
    "GET /api/memory/{memory_id}",
    "GET /api/proactive",
    "POST /api/proactive",
    "DELETE /api/proactive/{event_id}",
    "PUT /api/proactive/switches",
    "GET /api/turns/{turn_id}/why",
    "GET /api/memory/{memory_id}/family",
}


@pytest.fixture
def schema(isolated_env: Path) -> dict[str, Any]:
    """The server's schema, as ``GET /openapi.json`` serves it (built without serving)."""
    return create_app(load_settings().settings).openapi()


def fields_of(schema: dict[str, Any], body: dict[str, Any]) -> set[str]:
    """The field names a body schema promises (through references, lists and unions)."""
    parts = schema.get("components", {}).get("schemas", {})
    while "$ref" in body:
        body = parts[body["$ref"].rsplit("/", 1)[-1]]
    if body.get("type") == "array":
        return fields_of(schema, body.get("items", {}))
    for key in ("anyOf", "oneOf"):
        if key in body:
            found = [fields_of(schema, b) for b in body[key]]
            return set.union(*found) if all(found) else set()
    return set(body.get("properties", {}))


def json_bodies(schema: dict[str, Any]) -> dict[str, set[str]]:
    """Each route's ``application/json`` success body, by ``METHOD /path``: its fields."""
    return {
        f"{method.upper()} {path}": fields_of(schema, content["schema"])
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        for status, response in operation.get("responses", {}).items()
        if status.startswith("2")
        for kind, content in response.get("content", {}).items()
        if kind == "application/json"
    }


def test_the_check_reads_fields_through_references_lists_and_unions() -> None:
    schema = {
        "components": {
            "schemas": {
                "A": {"properties": {"a": {}}},
                "B": {"properties": {"b": {}}},
            }
        }
    }
    assert fields_of(schema, {"$ref": "#/components/schemas/A"}) == {"a"}
    assert fields_of(schema, {"type": "array", "items": {"$ref": "#/components/schemas/B"}}) == {
        "b"
    }
    union = {"anyOf": [{"$ref": "#/components/schemas/A"}, {"$ref": "#/components/schemas/B"}]}
    assert fields_of(schema, union) == {"a", "b"}
    assert fields_of(schema, {"anyOf": [{"$ref": "#/components/schemas/A"}, {}]}) == set()
    assert fields_of(schema, {"type": "object", "additionalProperties": True}) == set()


def test_every_success_body_names_its_fields_but_the_listed_ones(schema: dict[str, Any]) -> None:
    bodies = json_bodies(schema)
    assert set(bodies) >= UNTYPED, sorted(UNTYPED - set(bodies))
    bare = {route for route, fields in bodies.items() if not fields}
    assert bare == UNTYPED, (
        f"untyped, not listed: {sorted(bare - UNTYPED)}; typed, still listed: "
        f"{sorted(UNTYPED - bare)}"
    )


def test_a_turn_and_the_pages_have_the_contracts_fields(schema: dict[str, Any]) -> None:
    bodies = json_bodies(schema)
    contract = {
        "reply", "turn_id", "conversation_id", "followups", "calls", "thinker", "tribunal",
        "salience", "events",
    }  # fmt: skip
    assert bodies["POST /api/turns"] == contract
    assert bodies["GET /api/turns/{turn_id}"] == contract
    assert bodies["GET /api/conversations"] == {"items"}
    assert {"items", "more", "messages"} == bodies["GET /api/memory"]
    assert {"id", "text", "kind", "valid_to"} <= bodies["PATCH /api/memory/{memory_id}"]
