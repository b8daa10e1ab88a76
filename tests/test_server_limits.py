"""Limits of a real ``novaberg serve`` process: the per-user rate limit (429 with
Retry-After, in both error shapes), one running turn per conversation (409), a full model
queue (503 with Retry-After), and CORS only for the configured origins."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from novaberg.server.ratelimit import RateLimiter, retry_after
from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer
from tests.server_helpers import Nova, running_nova

RATE = 6
ALLOWED = "http://allowed.example"
CHAT = "X-OpenWebUI-Chat-Id"
USERS = ("ada", "bob", "carl", "dan", "erin", "fay", "gus")


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    env = {
        "NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": str(RATE),
        "NOVABERG_SERVER__MAX_QUEUE": "1",
        "NOVABERG_CONCURRENCY__OLLAMA": "1",
        "NOVABERG_SERVER__CORS_ORIGINS": f'["{ALLOWED}"]',
        LOOP_GUARD_ENV: "1",  # a database call on the server's event loop raises
    }
    home = tmp_path_factory.mktemp("serve-limits") / "home"
    with running_nova(ollama_server, home, USERS, extra_env=env) as started:
        yield started


def ask(nova: Nova, who: str, text: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={"model": "nova", "messages": [{"role": "user", "content": text}]},
        headers={**nova.auth(who), **(headers or {})},
        timeout=60,
    )


class Background:
    """A request running in a thread; ``result()`` waits for its response."""

    def __init__(self, send: Callable[[], httpx.Response]) -> None:
        self._response: httpx.Response | None = None
        self._thread = threading.Thread(target=self._run, args=(send,), daemon=True)
        self._thread.start()

    def _run(self, send: Callable[[], httpx.Response]) -> None:
        self._response = send()

    def result(self) -> httpx.Response:
        self._thread.join(timeout=60)
        assert self._response is not None, "the background request did not finish"
        return self._response


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def sent(server: OllamaTestServer, text: str) -> bool:
    """Whether a model call carrying ``text`` reached the test server."""
    return any(text in json.dumps(r.body) for r in server.requests())


def queue_waiting(nova: Nova) -> int:
    """Model calls waiting for a slot, from the server's own /metrics."""
    text = httpx.get(f"{nova.url}/metrics").text
    return sum(
        int(float(m.group(1)))
        for m in re.finditer(r"^novaberg_queue_waiting\{[^}]*\} (\S+)$", text, re.MULTILINE)
    )


def test_the_rate_limit_is_429_with_retry_after_in_both_shapes(nova: Nova) -> None:
    for _ in range(RATE):
        assert httpx.get(f"{nova.url}/v1/models", headers=nova.auth("ada")).status_code == 200
    refused = httpx.get(f"{nova.url}/v1/models", headers=nova.auth("ada"))
    assert refused.status_code == 429, refused.text
    assert 1 <= int(refused.headers["retry-after"]) <= 60 // RATE + 1
    error = refused.json()["error"]
    assert error["code"] == "rate_limit_exceeded" and set(error) == {"message", "type", "code"}
    native = httpx.get(f"{nova.url}/api/conversations", headers=nova.auth("ada"))
    assert native.status_code == 429 and set(native.json()) == {"detail"}
    assert int(native.headers["retry-after"]) >= 1
    # another user's bucket is their own
    assert httpx.get(f"{nova.url}/v1/models", headers=nova.auth("gus")).status_code == 200


def test_a_second_turn_in_a_running_conversation_is_409(
    nova: Nova, server: OllamaTestServer
) -> None:
    opened = ask(nova, "fay", "open a conversation")
    named = {"X-Novaberg-Conversation-Id": opened.headers["X-Novaberg-Conversation-Id"]}
    server.set_delay(1.0)
    first = Background(lambda: ask(nova, "fay", "first-7731", named))
    wait_for(lambda: sent(server, "first-7731"), "the first turn's model call")
    second = ask(nova, "fay", "second", named)
    assert second.status_code == 409, second.text
    assert second.json()["error"]["code"] == "conversation_busy"
    native = httpx.post(
        f"{nova.url}/api/turns",
        json={"message": "third", "conversation_id": int(named["X-Novaberg-Conversation-Id"])},
        headers=nova.auth("fay"),
    )
    assert native.status_code == 409 and set(native.json()) == {"detail"}, native.text
    other = Background(lambda: ask(nova, "fay", "elsewhere", {CHAT: "another-chat"}))
    server.set_delay(0.0)
    assert first.result().status_code == 200
    assert other.result().status_code == 200  # another conversation was not refused
    assert ask(nova, "fay", "again", named).status_code == 200  # free again


def test_a_full_model_queue_is_503_with_retry_after(nova: Nova, server: OllamaTestServer) -> None:
    wait_for(lambda: queue_waiting(nova) == 0, "an empty queue to start from")
    server.set_delay(1.5)
    running = Background(lambda: ask(nova, "bob", "holds the one slot"))
    wait_for(lambda: sent(server, "holds the one slot"), "the first turn's model call")
    waiting = Background(lambda: ask(nova, "carl", "waits for it"))
    wait_for(lambda: queue_waiting(nova) >= 1, "a call waiting in the model queue")
    refused = ask(nova, "dan", "one too many")
    assert refused.status_code == 503, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json()["error"]["code"] == "queue_full"
    server.set_delay(0.0)
    assert running.result().status_code == 200
    assert waiting.result().status_code == 200
    wait_for(lambda: queue_waiting(nova) == 0, "an empty queue")
    assert ask(nova, "dan", "room again").status_code == 200


def test_cors_preflight_is_allowed_only_for_the_configured_origins(nova: Nova) -> None:
    def preflight(origin: str) -> httpx.Response:
        return httpx.options(
            f"{nova.url}/v1/chat/completions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type,x-openwebui-chat-id",
            },
        )

    allowed = preflight(ALLOWED)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED
    assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
    refused = preflight("http://elsewhere.example")
    assert refused.status_code == 400
    assert "access-control-allow-origin" not in refused.headers
    simple = httpx.get(f"{nova.url}/v1/models", headers={**nova.auth("erin"), "Origin": ALLOWED})
    assert simple.headers["access-control-allow-origin"] == ALLOWED
    assert "x-novaberg-conversation-id" in simple.headers["access-control-expose-headers"].lower()
    other = httpx.get(
        f"{nova.url}/v1/models", headers={**nova.auth("erin"), "Origin": "http://elsewhere.example"}
    )
    assert "access-control-allow-origin" not in other.headers


def test_the_bucket_refills_continuously_and_says_how_long_to_wait() -> None:
    now = [0.0]
    limiter = RateLimiter(60, clock=lambda: now[0])  # one request a second, 60 at once
    assert all(limiter.take("ada") is None for _ in range(60))
    wait = limiter.take("ada")
    assert wait is not None and wait == pytest.approx(1.0)
    assert retry_after(wait) == "1"
    now[0] = 0.5
    assert limiter.take("ada") == pytest.approx(0.5)  # half a request's worth is back
    now[0] = 1.0
    assert limiter.take("ada") is None and limiter.take("ada") is not None
    assert limiter.take("bob") is None  # a bucket per user
    assert RateLimiter(0).take("ada") is None  # 0: no limit
