"""The auth matrix against a real ``novaberg serve`` process: every route under ``/v1`` and
``/api`` (read from the server's own ``/openapi.json``, so a new route is covered without
editing this file) refuses a missing, wrong or revoked key; another user's ids answer exactly
as missing ones; a front-end key's end users, signed with the JWT secret this server has. On
SQLite and on PostgreSQL (one server process per database)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import jwt
import pytest

from novaberg.storage.api_users import UserStore
from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, running_nova

SECRET = "a-test-secret-shared-with-open-webui-0123456789"
JWT = "X-OpenWebUI-User-Jwt"
END_USER = "X-OpenWebUI-User-Id"
CONVERSATION = "X-Novaberg-Conversation-Id"
MISSING = 10**9
PREFIXES = ("/v1/", "/api/")


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nova(
    request: pytest.FixtureRequest,
    ollama_server: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Nova]:
    """The server on SQLite, then on PostgreSQL (keys, revocation and every user's ids are
    looked up in the database)."""
    home = tmp_path_factory.mktemp("serve-auth") / "home"
    url = None
    if request.param == "postgres":
        url = create_database(request.getfixturevalue("postgres_server"))
    env = {"NOVABERG_FRONTEND_JWT_SECRET": SECRET, LOOP_GUARD_ENV: "1"}
    try:
        with running_nova(
            ollama_server, home, ("ada", "bob", "rev"), extra_env=env, database=url
        ) as started:
            db = started.db()
            try:
                store = UserStore(db)
                store.revoke("rev")
                started.keys["owui"] = store.add("owui", frontend=True)
            finally:
                db.close()
            assert (started.database is None) == (request.param == "sqlite")
            yield started
    finally:
        if url is not None:
            drop_database(request.getfixturevalue("postgres_server"), url)


def routes(nova: Nova) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) of every route under /v1 and /api, from /openapi.json."""
    spec = httpx.get(f"{nova.url}/openapi.json").json()
    found = [
        (method.upper(), path, operation)
        for path, operations in spec["paths"].items()
        if path.startswith(PREFIXES)
        for method, operation in operations.items()
    ]
    paths = {p for _, p, _ in found}
    assert {"/v1/models", "/v1/chat/completions", "/api/turns", "/api/memory"} <= paths
    return found


def fill(path: str, ids: dict[str, int] | None = None) -> str:
    """The path with each ``{param}`` replaced by the id ``ids`` gives it (default 1)."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if ids is None:
            return "1"
        assert name in ids, f"{path}: no test id of kind {name!r}; add one to this test"
        return str(ids[name])

    return re.sub(r"\{([^}]+)\}", one, path)


def call(
    nova: Nova, method: str, path: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {} if method in ("POST", "PUT", "PATCH") else None
    return httpx.request(method, f"{nova.url}{path}", headers=headers, json=body, timeout=30)


def assert_401(response: httpx.Response, path: str, method: str = "") -> None:
    where = f"{method} {path}"
    assert response.status_code == 401, f"{where}: {response.status_code} {response.text}"
    assert response.headers.get("www-authenticate") == "Bearer", where
    body = response.json()
    if path.startswith("/v1/"):
        assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}
        assert body["error"]["type"] == "invalid_request_error", where  # as OpenAI's 401
        assert body["error"]["code"] in ("invalid_api_key", "invalid_end_user"), where
    else:
        assert set(body) == {"detail"}, where


def test_every_route_refuses_no_wrong_and_revoked_keys(
    nova: Nova, server: OllamaTestServer
) -> None:
    for method, path, _ in routes(nova):
        target = fill(path)
        for headers in (
            {},
            {"Authorization": "Bearer nb-not-a-key"},
            {"Authorization": "Basic " + nova.keys["ada"]},
            nova.auth("rev"),
        ):
            assert_401(call(nova, method, target, headers), path, method)


def token(subject: str, secret: str = SECRET, **claims: Any) -> str:
    now = int(time.time())
    payload = {
        "sub": subject,
        "email": f"{subject}@example.test",
        "name": subject,
        "role": "user",
        "iss": "open-webui",
        "iat": now,
        "exp": now + 300,
        **claims,
    }
    return jwt.encode(payload, secret, algorithm="HS256")


def as_end_user(nova: Nova, subject: str) -> dict[str, str]:
    return {**nova.auth("owui"), JWT: token(subject)}


def salient(summary: str) -> Reply:
    return Reply(content=json.dumps({"score": 0.9, "summary": summary}))


def ada_turn(nova: Nova, server: OllamaTestServer, headers: dict[str, str]) -> dict[str, Any]:
    server.script("salience", salient("The user's locker code is 8812."))
    response = httpx.post(
        f"{nova.url}/api/turns",
        json={"message": "My locker code is 8812"},
        headers=headers,
        timeout=60,
    )
    assert response.status_code == 200, response.text
    posted: dict[str, Any] = response.json()
    assert posted["salience"]["stored"] is True
    return posted


def memory_ids(nova: Nova, headers: dict[str, str]) -> list[int]:
    items = httpx.get(f"{nova.url}/api/memory", headers=headers).json()["items"]
    return [int(i["id"]) for i in items]


def test_another_users_ids_answer_exactly_like_missing_ones(
    nova: Nova, server: OllamaTestServer
) -> None:
    posted = ada_turn(nova, server, nova.auth("ada"))
    [memory] = memory_ids(nova, nova.auth("ada"))
    reminder = httpx.post(
        f"{nova.url}/api/proactive",
        json={"text": "water the plants", "at": "tomorrow at 9"},
        headers=nova.auth("ada"),
        timeout=30,
    )
    assert reminder.status_code == 200, reminder.text
    theirs = {
        "turn_id": int(posted["turn_id"]),
        "conversation_id": int(posted["conversation_id"]),
        "memory_id": memory,
        "event_id": int(reminder.json()["id"]),
    }
    missing = dict.fromkeys(theirs, MISSING)
    checked = 0
    for method, path, _ in routes(nova):
        if "{" not in path:
            continue
        leaked = call(nova, method, fill(path, theirs), nova.auth("bob"))
        absent = call(nova, method, fill(path, missing), nova.auth("bob"))
        assert leaked.status_code == absent.status_code == 404, (path, leaked.text)
        text = leaked.text
        for value in theirs.values():
            text = re.sub(rf"\b{value}\b", "N", text)
        assert text == re.sub(rf"\b{MISSING}\b", "N", absent.text), path
        checked += 1
    assert checked >= 4
    # a conversation named in a /v1 header
    for named in (str(theirs["conversation_id"]), str(MISSING)):
        response = httpx.post(
            f"{nova.url}/v1/chat/completions",
            json={"model": "nova", "messages": [{"role": "user", "content": "whose?"}]},
            headers={**nova.auth("bob"), CONVERSATION: named},
        )
        assert response.status_code == 404
        assert response.json()["error"]["message"] == f"There is no conversation {named}."
    # bob's DELETE did not forget ada's item
    assert memory_ids(nova, nova.auth("ada")) == [memory]


def test_a_frontend_key_with_a_valid_jwt_runs_as_its_end_user(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Hello, signed user."))
    response = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={"model": "nova", "messages": [{"role": "user", "content": "hi"}]},
        headers=as_end_user(nova, "5d0c-uuid"),
        timeout=60,
    )
    assert response.status_code == 200, response.text
    db = nova.db()
    try:
        owner = db.conversation_user(int(response.headers[CONVERSATION]))
    finally:
        db.close()
    assert owner == "owui/5d0c-uuid"


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({JWT: token("u-1", secret="another-secret-entirely-0123456789")}, id="sig"),
        pytest.param({JWT: token("u-1", exp=int(time.time()) - 3600)}, id="expired"),
        pytest.param({JWT: token("u-1", iss="someone-else")}, id="issuer"),
        pytest.param({JWT: jwt.encode({"sub": "u-1"}, None, algorithm="none")}, id="alg-none"),
        pytest.param({JWT: "not.a.token"}, id="garbage"),
        pytest.param({END_USER: "u-1"}, id="unsigned-id"),
        pytest.param({}, id="no-jwt"),
    ],
)
def test_a_frontend_key_without_a_valid_jwt_is_401(
    nova: Nova, server: OllamaTestServer, headers: dict[str, str]
) -> None:
    sent = {**nova.auth("owui"), **headers}
    response = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={"model": "nova", "messages": [{"role": "user", "content": "hi"}]},
        headers=sent,
    )
    assert_401(response, "/v1/chat/completions")
    assert response.json()["error"]["code"] == "invalid_end_user"
    assert_401(httpx.get(f"{nova.url}/api/conversations", headers=sent), "/api/conversations")


def test_a_frontend_key_lists_models_without_an_end_user(nova: Nova) -> None:
    response = httpx.get(f"{nova.url}/v1/models", headers=nova.auth("owui"))
    assert response.status_code == 200 and response.json()["data"][0]["id"] == "nova"


JSON_BODY = {"Content-Type": "application/json"}


def test_a_frontend_key_lists_mcp_tools_without_an_end_user_and_calls_none(nova: Nova) -> None:
    """Open WebUI's *Verify connection* of a tool server sends the key alone: the handshake
    and the tool list read no user's data; a call of a tool is refused as on ``/v1``."""
    sent = nova.auth("owui") | {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    listed = httpx.post(
        f"{nova.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=sent
    )
    assert listed.status_code == 200, listed.text
    assert "recall" in {t["name"] for t in listed.json()["result"]["tools"]}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    for params in (
        {"name": "recall", "arguments": {"query": "oboe"}},
        {"name": "profile", "arguments": {}},
    ):
        refused = httpx.post(f"{nova.url}/mcp", json=call | {"params": params}, headers=sent)
        assert refused.status_code == 401
        assert refused.json()["detail"].startswith("A front-end key must name its end user")
    read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read"}
    refused = httpx.post(
        f"{nova.url}/mcp", json=read | {"params": {"uri": "nova://profile"}}, headers=sent
    )
    assert refused.status_code == 401
    smuggled = [{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, call | {"params": params}]
    assert httpx.post(f"{nova.url}/mcp", json=smuggled, headers=sent).status_code == 401
    deep = b"[" * 15_000 + b"]" * 15_000  # nested past Python's recursion limit: no 500
    refused = httpx.post(f"{nova.url}/mcp", content=deep, headers=sent | JSON_BODY)
    assert refused.status_code == 401
    mcp_headers = {k: v for k, v in sent.items() if k != "Authorization"} | JSON_BODY
    answered = httpx.post(f"{nova.url}/mcp", content=deep, headers=nova.auth("ada") | mcp_headers)
    assert answered.status_code < 500, answered.text  # the SDK's own answer to bad JSON


def test_a_normal_key_ignores_end_user_headers(nova: Nova, server: OllamaTestServer) -> None:
    headers = {**nova.auth("ada"), JWT: "not.a.token", END_USER: "someone"}
    response = httpx.get(f"{nova.url}/api/conversations", headers=headers)
    assert response.status_code == 200, response.text


def test_two_end_users_of_one_frontend_key_never_see_each_others_memory(
    nova: Nova, server: OllamaTestServer
) -> None:
    first, second = as_end_user(nova, "end-one"), as_end_user(nova, "end-two")
    posted = ada_turn(nova, server, first)
    [item] = memory_ids(nova, first)
    assert memory_ids(nova, second) == []
    for path in (f"/api/memory/{item}", f"/api/turns/{posted['turn_id']}"):
        assert httpx.get(f"{nova.url}{path}", headers=second).status_code == 404
    found = httpx.get(f"{nova.url}/api/memory", params={"query": "locker"}, headers=second)
    assert found.status_code == 200 and found.json()["items"] == []
    exported = httpx.get(f"{nova.url}/api/memory/export", headers=second)
    assert exported.status_code == 200 and "8812" not in exported.text
    assert httpx.get(f"{nova.url}/api/memory/export", headers=first).text.count("8812") >= 1
    # the key's own user (no end user) is a third, separate user
    assert memory_ids(nova, as_end_user(nova, "end-three")) == []
    logs = [line for line in nova.logs().splitlines() if "WARNING" in line or "ERROR" in line]
    assert not any("end-one" in line or "end-two" in line for line in logs)
