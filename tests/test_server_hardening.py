"""The server's guards from outside (issue 19): a revoked key's event stream ends, event
streams per user are capped, no CDN-loading docs on Nova's origin, ``HEAD`` on ``GET`` routes,
nothing a browser stores, no search words in the access log, only the allowed host names,
header and body timeouts, ``TCP_NODELAY`` on accepted connections, a JWT secret long enough.

Against one real ``novaberg serve`` process over the shipped Ollama-protocol test server;
raw sockets where the test is about the connection itself."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from novaberg.config import load_settings
from novaberg.errors import ConfigError
from novaberg.server.hosts import allowed_hosts, host_name
from novaberg.server.listen import bind, uvicorn_config
from novaberg.storage.api_users import UserStore
from novaberg.testing import OllamaTestServer
from tests.server_helpers import Nova, novaberg_env, running_nova
from tests.test_server_events import Sse, last_resort, parse, post_turn, until

MAX_STREAMS = 2
READ_TIMEOUT_S = 1.0
"""server.header_timeout_s and server.body_timeout_s of the server under test."""


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-hardening") / "home"
    env = {
        "NOVABERG_SERVER__MAX_STREAMS": str(MAX_STREAMS),
        "NOVABERG_SERVER__HEADER_TIMEOUT_S": str(READ_TIMEOUT_S),
        "NOVABERG_SERVER__BODY_TIMEOUT_S": str(READ_TIMEOUT_S),
        "NOVABERG_SERVER__FOLLOWUP_WAIT_S": "0",
    }
    users = ("ada", "rev", "many")
    with running_nova(ollama_server, home, users, extra_env=env) as started:
        yield started


@contextlib.contextmanager
def events_of(nova: Nova, key: str, read_s: float = 30.0) -> Iterator[Iterator[Sse]]:
    with httpx.stream(
        "GET",
        f"{nova.url}/api/events",
        headers={"Authorization": f"Bearer {key}"},
        timeout=httpx.Timeout(5.0, read=read_s),
    ) as response:
        assert response.status_code == 200, response.read()
        yield parse(response.iter_lines())


def test_a_revoked_keys_open_event_stream_ends_and_receives_nothing_more(
    nova: Nova, server: OllamaTestServer
) -> None:
    old_key = nova.keys["rev"]
    with events_of(nova, old_key, read_s=10.0) as old_events:
        db = nova.db()
        try:  # what `novaberg users revoke rev` and `users add rev` do, from another process
            store = UserStore(db)
            store.revoke("rev")
            new_key = store.add("rev")
        finally:
            db.close()
        nova.keys["rev"] = new_key
        with events_of(nova, new_key) as new_events:
            last_resort(server, "A follow-up for the new key only.")
            turn = post_turn(nova, "check this", user="rev")
            until(
                new_events,
                lambda e: e.event == "followup" and e.data["parent_turn_id"] == turn["turn_id"],
            )
        seen = list(old_events)  # ends (a read timeout here: the stream went on)
    assert [e for e in seen if e.event == "followup"] == []
    refused = httpx.get(f"{nova.url}/api/events", headers={"Authorization": f"Bearer {old_key}"})
    assert refused.status_code == 401


def test_a_user_holds_at_most_max_streams_event_streams(nova: Nova) -> None:
    key = nova.keys["many"]
    with contextlib.ExitStack() as open_streams:
        for _ in range(MAX_STREAMS):
            open_streams.enter_context(events_of(nova, key))
        refused = httpx.get(f"{nova.url}/api/events", headers=nova.auth("many"), timeout=10)
        assert refused.status_code == 429
        assert "server.max_streams" in refused.json()["detail"]
        assert refused.headers["Retry-After"].isdigit()
        other = httpx.get(f"{nova.url}/api/memory", headers=nova.auth("many"), timeout=10)
        assert other.status_code == 200  # the cap is on streams, not on the user
    # the streams closed: their slots are free again (a new stream at once)
    with events_of(nova, key) as events:
        assert events is not None


def test_no_page_on_novas_origin_loads_a_script_from_elsewhere(nova: Nova) -> None:
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert httpx.get(f"{nova.url}{path}", timeout=10).status_code == 404, path
    schema = httpx.get(f"{nova.url}/openapi.json", timeout=10)
    assert schema.status_code == 200 and schema.json()["info"]["title"] == "Novaberg"
    page = httpx.get(f"{nova.url}/", timeout=10).text
    assert "http://" not in page and "https://" not in page


def get_routes(nova: Nova) -> list[str]:
    """Every GET route of the server without a path parameter (from its OpenAPI schema), and
    the page's."""
    schema = httpx.get(f"{nova.url}/openapi.json", timeout=10).json()
    listed = [p for p, ops in schema["paths"].items() if "get" in ops and "{" not in p]
    return [*listed, "/", "/web/config.json", "/web/app.js", "/openapi.json"]


def test_head_answers_every_get_route_with_its_headers_and_no_body(nova: Nova) -> None:
    routes = get_routes(nova)
    assert {"/healthz", "/metrics", "/v1/models", "/api/memory", "/api/events"} <= set(routes)
    for path in routes:
        head = httpx.head(f"{nova.url}{path}", headers=nova.auth(), timeout=10)
        assert head.content == b"", path
        if path == "/api/events":  # endless as a GET: HEAD ends at once
            assert head.status_code == 200
            continue
        got = httpx.get(f"{nova.url}{path}", headers=nova.auth(), timeout=10)
        assert head.status_code == got.status_code, (path, head.status_code, got.status_code)
        assert head.headers["content-type"] == got.headers["content-type"], path
    assert httpx.head(f"{nova.url}/api/memory", timeout=10).status_code == 401


def test_api_and_v1_responses_are_never_stored_by_a_browser(nova: Nova) -> None:
    private = [p for p in get_routes(nova) if p.startswith(("/api/", "/v1/"))]
    assert len(private) >= 8
    for path in private:
        for auth in (nova.auth(), {}):  # answers and 401s alike
            with httpx.stream("GET", f"{nova.url}{path}", headers=auth, timeout=10) as r:
                assert r.headers["cache-control"] == "no-store", (path, r.status_code)
    searched = httpx.get(f"{nova.url}/api/memory?query=sister", headers=nova.auth(), timeout=10)
    assert searched.headers["cache-control"] == "no-store"


def test_the_access_log_keeps_no_query_string(nova: Nova) -> None:
    words = "zanzibarquokka"
    response = httpx.get(
        f"{nova.url}/api/memory", params={"query": words}, headers=nova.auth(), timeout=10
    )
    assert response.status_code == 200
    marker = httpx.get(f"{nova.url}/healthz", params={"after": "marker"}, timeout=10)
    assert marker.status_code == 200
    logs = nova.logs()
    assert '"GET /api/memory HTTP/1.1" 200' in logs  # the line is there, its query is not
    assert words not in logs and "marker" not in logs


def test_a_request_for_another_host_name_is_refused(nova: Nova) -> None:
    port = nova.url.rsplit(":", 1)[1]
    for host in ("evil.example", f"evil.example:{port}", "127.0.0.1.evil.example", ""):
        for path in ("/healthz", "/v1/models"):
            response = httpx.get(f"{nova.url}{path}", headers={"Host": host}, timeout=10)
            assert response.status_code == 400, (host, path)
    v1 = httpx.get(f"{nova.url}/v1/models", headers={"Host": "evil.example"}, timeout=10)
    assert v1.json()["error"]["code"] == "invalid_host"
    assert "server.allowed_hosts" in v1.json()["error"]["message"]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", "LOCALHOST", f"[::1]:{port}"):
        assert httpx.get(f"{nova.url}/healthz", headers={"Host": host}).status_code == 200, host


def test_the_default_host_names_follow_the_listening_address() -> None:
    assert allowed_hosts([], "127.0.0.1") == ["localhost", "127.0.0.1", "[::1]"]
    assert allowed_hosts([], "::1") == ["localhost", "127.0.0.1", "[::1]"]
    assert allowed_hosts([], "192.168.1.5")[-1] == "192.168.1.5"
    assert allowed_hosts([], "0.0.0.0") == allowed_hosts([], "::") == ["*"]
    assert allowed_hosts(["Nova.LAN"], "127.0.0.1") == ["nova.lan"]
    assert host_name("[::1]:8484") == "[::1]" and host_name("Nova.lan:80") == "nova.lan"


def _closed_within(sock: socket.socket, limit_s: float) -> bytes:
    """What the server sent until it closed the connection (a timeout if it did not)."""
    sock.settimeout(limit_s)
    received = b""
    while chunk := sock.recv(65536):
        received += chunk
    return received


def _address(nova: Nova) -> tuple[str, int]:
    host, port = nova.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def test_a_client_that_sends_no_headers_in_time_is_disconnected(nova: Nova) -> None:
    with socket.create_connection(_address(nova)) as silent:
        assert _closed_within(silent, READ_TIMEOUT_S * 10) == b""
    with socket.create_connection(_address(nova)) as slow:
        slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # never the blank line
        assert _closed_within(slow, READ_TIMEOUT_S * 10) == b""
    with socket.create_connection(_address(nova)) as kept:  # the next request on a kept one
        kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        kept.settimeout(10)
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):  # headers and body may come apart
            chunk = kept.recv(65536)
            assert chunk, answer  # closed before the whole answer
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")
        kept.sendall(b"GET /healthz HTTP/1.1\r\n")
        assert _closed_within(kept, READ_TIMEOUT_S * 10) == b""


def test_a_client_that_sends_no_body_in_time_is_disconnected(nova: Nova) -> None:
    key = nova.keys["ada"]
    with socket.create_connection(_address(nova)) as slow:
        slow.sendall(
            b"POST /api/turns HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {key}\r\n".encode()
            + b"Content-Length: 100\r\n\r\n"
            + b'{"message": '
        )
        assert _closed_within(slow, READ_TIMEOUT_S * 10) == b""


def test_a_slow_request_within_the_timeouts_is_answered(nova: Nova) -> None:
    with socket.create_connection(_address(nova)) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n")
        sock.sendall(b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
        assert _closed_within(sock, 10).startswith(b"HTTP/1.1 200")


async def test_every_accepted_connection_has_tcp_nodelay() -> None:
    settings = load_settings().settings
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]

    async def app(scope: dict[str, object], receive: object, send: object) -> None:
        return None  # the test reads the connection's socket, not an answer

    config = uvicorn_config(app, settings, verbose=False)
    config.lifespan = "off"
    assert config.limit_concurrency == settings.server.max_connections
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, no event
            await asyncio.sleep(0.01)
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        while not server.server_state.connections:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        (connection,) = server.server_state.connections
        accepted = connection.transport.get_extra_info("socket")  # type: ignore[attr-defined]
        assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        writer.close()
    finally:
        server.should_exit = True
        await serving
        sock.close()


@pytest.mark.parametrize("secret", ["short", "x" * 31, "ü" * 15])
def test_a_frontend_jwt_secret_under_32_bytes_is_refused_with_its_reason(
    monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    monkeypatch.setenv("NOVABERG_FRONTEND_JWT_SECRET", secret)
    with pytest.raises(ConfigError, match="at least 32 bytes"):
        load_settings()
    monkeypatch.setenv("NOVABERG_FRONTEND_JWT_SECRET", "x" * 32)
    assert load_settings().settings.frontend_jwt_secret is not None


def test_serve_with_a_short_jwt_secret_exits_with_a_usage_error(
    tmp_path: Path, ollama_server: OllamaTestServer
) -> None:
    env = novaberg_env(ollama_server.url, tmp_path / "home")
    env["NOVABERG_FRONTEND_JWT_SECRET"] = "tooshort"
    done = subprocess.run(
        [sys.executable, "-m", "novaberg", "serve", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    said = " ".join(done.stderr.split())
    assert "NOVABERG_FRONTEND_JWT_SECRET is invalid" in said and "at least 32 bytes" in said
    assert "tooshort" not in done.stderr + done.stdout
    assert json.dumps("tooshort") not in done.stderr
