"""What ``/openapi.json`` says of each route's success body (issue 24): every ``2xx``
``application/json`` body names its fields (an object its ``properties``, a list the
properties of its items, a union those of every branch), so a client can be generated from the
schema and a changed body shows in a diff. A bare ``object`` (``dict[str, Any]``) fails,
naming the route.

Left out are only the bodies a JSON schema cannot describe, each with its reason below.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from novaberg.config import PROACTIVE_KINDS, load_settings
from novaberg.server.app import create_app

NO_JSON_SCHEMA = {
    "POST /v1/chat/completions": "OpenAI's shapes, a JSON completion or an event stream by the "
    "request's `stream`; the body is OpenAI's, left as it is",
    "POST /v1/audio/speech": "audio bytes in the requested format (mp3, opus, flac, wav)",
}
"""Routes whose success body is not a JSON document a schema can name: left out, with why.
(The event stream ``GET /api/events``, ``GET /metrics``' Prometheus text and the page's HTML
and static files have no ``application/json`` body at all.)"""


@pytest.fixture
def schema(isolated_env: Path) -> dict[str, Any]:
    """The server's schema, as ``GET /openapi.json`` serves it (built without serving)."""
    return create_app(load_settings().settings).openapi()


def fields_of(schema: dict[str, Any], body: dict[str, Any]) -> set[str]:
    """The field names a body schema promises (through references, lists and unions); empty
    when any part of it promises none."""
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
        f"{method.upper()} {path}": fields_of(schema, content.get("schema", {}))
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
    assert fields_of(schema, {"type": "array", "items": {"type": "object"}}) == set()
    assert fields_of(schema, {}) == set()


def test_every_json_success_body_names_its_fields(schema: dict[str, Any]) -> None:
    bodies = json_bodies(schema)
    left_out = set(NO_JSON_SCHEMA)
    assert set(bodies) >= left_out, (
        f"listed, but no such JSON body: {sorted(left_out - set(bodies))}"
    )
    bare = sorted(route for route, fields in bodies.items() if not fields and route not in left_out)
    assert not bare, f"success bodies with no fields in /openapi.json: {bare}"


def test_a_turn_and_the_pages_have_the_contracts_fields(schema: dict[str, Any]) -> None:
    bodies = json_bodies(schema)
    contract = {
        "reply", "turn_id", "conversation_id", "followups", "calls", "thinker", "tribunal",
        "salience", "events",
    }  # fmt: skip
    assert bodies["POST /api/turns"] == contract
    assert bodies["GET /api/turns/{turn_id}"] == contract
    assert bodies["GET /api/conversations"] == {"items"}
    assert bodies["GET /api/conversations/{conversation_id}/messages"] == {"items"}
    assert {"items", "more", "messages"} == bodies["GET /api/memory"]
    assert {"id", "text", "kind", "valid_to"} <= bodies["PATCH /api/memory/{memory_id}"]
    assert {"id", "text", "history", "source"} <= bodies["GET /api/memory/{memory_id}"]
    assert bodies["GET /api/proactive"] == {"scheduled", "switches"}
    assert {"id", "kind", "due_at", "status", "cause"} <= bodies["POST /api/proactive"]
    assert {"calls", "turns"} <= bodies["GET /api/stats"]
    assert bodies["POST /v1/audio/transcriptions"] >= {"text"}


def test_the_switches_body_has_a_field_per_proactive_kind() -> None:
    from novaberg.engine.scheduled import Switches

    assert tuple(Switches.model_fields) == PROACTIVE_KINDS
