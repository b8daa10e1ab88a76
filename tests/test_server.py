"""``novaberg serve`` as a real uvicorn process (one per module) over the shipped Ollama-
protocol test server, through the official ``openai`` client and raw httpx."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine.conversations import aliased_conversation
from novaberg.server.app import create_app
from novaberg.storage.api_users import UserStore
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova

CONVERSATION = "X-Novaberg-Conversation-Id"
TURN = "X-Novaberg-Turn-Id"


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    with running_nova(ollama_server, tmp_path_factory.mktemp("serve") / "home") as started:
        yield started


def script_reply(server: OllamaTestServer, reply: str) -> None:
    server.script("responder", Reply(content=reply))


def assert_openai_error(response: httpx.Response, status: int, code: str | None = None) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "code"}
    assert body["error"]["message"]
    if code is not None:
        assert body["error"]["code"] == code
    assert "Traceback" not in response.text


def test_health_ready_and_models(nova: Nova, server: OllamaTestServer) -> None:
    assert httpx.get(f"{nova.url}/healthz").json() == {"status": "ok"}
    ready = httpx.get(f"{nova.url}/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json()["checks"] == {"database": "ok", "backend ollama": "ok"}
    models = nova.client().models.list()
    assert [m.id for m in models.data] == ["nova", "nova-tasks"]


def test_non_streamed_completion_reply_usage_and_headers(
    nova: Nova, server: OllamaTestServer
) -> None:
    script_reply(server, "Hello Ada, good to see you.")
    raw = nova.client().chat.completions.with_raw_response.create(
        model="nova",
        messages=[
            {"role": "system", "content": "ignored"},
            {"role": "user", "content": "an earlier message the client resends"},
            {"role": "assistant", "content": "an earlier answer"},
            {"role": "user", "content": "Hello Nova"},
        ],
    )
    completion = raw.parse()
    assert completion.object == "chat.completion" and completion.model == "nova"
    [choice] = completion.choices
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello Ada, good to see you."
    assert choice.finish_reason == "stop"
    turn_id = int(raw.headers[TURN])
    conversation = int(raw.headers[CONVERSATION])
    db = nova.db()
    try:
        turn = db.turn(turn_id)
        calls = db.calls_of(turn_id)
        owner = db.conversation_user(conversation)
    finally:
        db.close()
    assert turn is not None and turn["status"] == "done"
    assert turn["user_text"] == "Hello Nova"  # the last user message, not the history
    assert turn["conversation_id"] == conversation and owner == "ada"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == sum(c["prompt_eval_count"] for c in calls) > 0
    assert completion.usage.completion_tokens == sum(c["eval_count"] for c in calls) > 0
    assert completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


def test_streamed_completion_sends_the_stored_reply_after_progress(
    nova: Nova, server: OllamaTestServer
) -> None:
    script_reply(server, "A streamed answer that is long enough to need several chunks here.")
    with nova.client().chat.completions.with_streaming_response.create(
        model="nova",
        messages=[{"role": "user", "content": "Stream please"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        turn_id = int(response.headers[TURN])
        chunks = list(response.parse())
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    content = [d.content for d in deltas if d.content]
    reasoning = [(d.model_extra or {}).get("reasoning_content") for d in deltas]
    reasoning = [r for r in reasoning if r]
    assert len(content) > 1
    assert "router\n" in reasoning and "responder\n" in reasoning
    assert "tribunal\n" in reasoning
    assert "thinker\n" not in reasoning  # it did not run: the router asked for no check
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    assert all(not d.content for d in deltas[:first_content])  # progress comes first
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    db = nova.db()
    try:
        stored = db.query(
            "SELECT content FROM messages WHERE turn_id = ? AND role = 'assistant'", (turn_id,)
        )
    finally:
        db.close()
    assert "".join(content) == stored[0]["content"]
    assert "".join(content) == "A streamed answer that is long enough to need several chunks here."


def test_stream_is_server_sent_events_ending_in_one_done(
    nova: Nova, server: OllamaTestServer
) -> None:
    script_reply(server, "Raw stream.")
    body = {"model": "nova", "messages": [{"role": "user", "content": "raw"}], "stream": True}
    with httpx.stream(
        "POST", f"{nova.url}/v1/chat/completions", json=body, headers=nova.auth(), timeout=30
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert int(response.headers[CONVERSATION]) > 0 and int(response.headers[TURN]) > 0
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines.count("data: [DONE]") == 1 and lines[-1] == "data: [DONE]"
    objects = [json.loads(line.removeprefix("data: ")) for line in lines[:-1]]
    assert {o["object"] for o in objects} == {"chat.completion.chunk"}
    assert "".join(o["choices"][0]["delta"].get("content") or "" for o in objects) == "Raw stream."


def test_a_conversation_continues_by_header_and_stays_its_users(
    nova: Nova, server: OllamaTestServer
) -> None:
    script_reply(server, "First.")
    script_reply(server, "Second.")
    ada = nova.client("ada")
    first = ada.chat.completions.with_raw_response.create(
        model="nova", messages=[{"role": "user", "content": "one"}]
    )
    conversation = first.headers[CONVERSATION]
    second = ada.chat.completions.with_raw_response.create(
        model="nova",
        messages=[{"role": "user", "content": "two"}],
        extra_headers={CONVERSATION: conversation},
    )
    assert second.headers[CONVERSATION] == conversation
    assert second.parse().choices[0].message.content == "Second."
    history = server.requests(caller="responder")[-1].body["messages"]
    assert any(m["content"] == "First." for m in history)  # the stored first exchange
    db = nova.db()
    try:
        roles = db.query(
            "SELECT role FROM messages WHERE conversation_id = ? ORDER BY id", (int(conversation),)
        )
    finally:
        db.close()
    assert [r["role"] for r in roles] == ["user", "assistant", "user", "assistant"]

    bob = nova.client("bob")
    for named in (conversation, "999999"):
        with pytest.raises(openai.NotFoundError) as caught:
            bob.chat.completions.create(
                model="nova",
                messages=[{"role": "user", "content": "whose?"}],
                extra_headers={CONVERSATION: named},
            )
        assert caught.value.status_code == 404
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "conversation_not_found"
        assert error["message"] == f"There is no conversation {named}."  # the same for both


def test_an_openwebui_chat_id_names_one_conversation_per_user(
    nova: Nova, server: OllamaTestServer
) -> None:
    headers = {"X-OpenWebUI-Chat-Id": "6f1c-chat"}

    def ask(user: str) -> str:
        raw = nova.client(user).chat.completions.with_raw_response.create(
            model="nova", messages=[{"role": "user", "content": "hi"}], extra_headers=headers
        )
        return raw.headers[CONVERSATION]

    first, again, bobs = ask("ada"), ask("ada"), ask("bob")
    assert first == again and bobs != first


def test_no_wrong_or_revoked_key_is_401(nova: Nova, server: OllamaTestServer) -> None:
    url = f"{nova.url}/v1/models"
    assert_openai_error(httpx.get(url), 401, "invalid_api_key")
    assert_openai_error(httpx.get(url, headers={"Authorization": "Bearer nb-wrong"}), 401)
    assert_openai_error(httpx.get(url, headers={"Authorization": nova.keys["eve"]}), 401)
    post = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={"model": "nova", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert_openai_error(post, 401, "invalid_api_key")
    assert httpx.get(url, headers=nova.auth("eve")).status_code == 200
    db = nova.db()
    try:
        UserStore(db).revoke("eve")
    finally:
        db.close()
    with pytest.raises(openai.AuthenticationError):  # refused at once, no restart
        nova.client("eve").models.list()


def test_api_stats_counts_only_the_keys_users_calls(nova: Nova, server: OllamaTestServer) -> None:
    script_reply(server, "Counted.")
    nova.client("ada").chat.completions.create(
        model="nova", messages=[{"role": "user", "content": "Count me"}]
    )
    url = f"{nova.url}/api/stats"
    mine = httpx.get(url, headers=nova.auth("ada"))
    assert mine.status_code == 200, mine.text
    body = mine.json()
    assert {"calls", "turns"} <= set(body)
    responder = [c for c in body["calls"] if c["caller"] == "responder"]
    assert responder and responder[0]["count"] >= 1
    assert set(responder[0]) >= {"caller", "backend", "count", "p50_ms", "p95_ms", "outcomes"}
    assert body["turns"].get("done", 0) >= 1
    # a user who has run no turn sees none of the others' figures
    db = nova.db()
    try:
        key = UserStore(db).add("stats-newcomer")
    finally:
        db.close()
    theirs = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, params={"since": "30m"})
    assert theirs.status_code == 200, theirs.text
    assert theirs.json()["calls"] == [] and theirs.json()["turns"] == {}
    assert httpx.get(url).status_code == 401
    bad = httpx.get(url, headers=nova.auth("ada"), params={"since": "soon"})
    assert bad.status_code == 400 and "since" in bad.json()["detail"]


def test_bad_input_is_a_4xx_in_the_openai_shape(nova: Nova, server: OllamaTestServer) -> None:
    url = f"{nova.url}/v1/chat/completions"
    auth = nova.auth()

    def post(body: Any) -> httpx.Response:
        return httpx.post(url, json=body, headers=auth)

    def user(text: str) -> dict[str, Any]:
        return {"model": "nova", "messages": [{"role": "user", "content": text}]}

    json_type = {**auth, "Content-Type": "application/json"}
    malformed = httpx.post(url, content=b'{"model": "nova", "messa', headers=json_type)
    assert_openai_error(malformed, 400, "invalid_request")
    assert "not valid JSON" in malformed.json()["error"]["message"]
    assert_openai_error(post({"model": "nova", "messages": "hi"}), 400, "invalid_request")
    assert_openai_error(post({"model": 3, "messages": []}), 400, "invalid_request")
    assert_openai_error(post([1, 2]), 400, "invalid_request")
    assert_openai_error(post({**user("hi"), "model": "gpt-4o"}), 404, "model_not_found")
    assert_openai_error(post(user(" \u200b ")), 400, "invalid_message")
    assert_openai_error(post(user("x" * 8001)), 400, "invalid_message")
    # (no user message at all: a front-end's task, answered; tests/test_frontend_tasks.py)
    assert_openai_error(post(user("y" * (1024 * 1024 + 10))), 413, "request_too_large")
    db = nova.db()
    try:
        refused = db.scalar("SELECT COUNT(*) FROM turns WHERE user_text LIKE 'xxxx%'")
    finally:
        db.close()
    assert refused == 0  # refused before a turn started


def test_keys_and_message_text_stay_out_of_the_logs(nova: Nova, server: OllamaTestServer) -> None:
    secret = "my-secret-sailing-plan-4711"
    script_reply(server, "Noted.")
    nova.client("bob").chat.completions.create(
        model="nova", messages=[{"role": "user", "content": secret}]
    )
    logs = nova.logs()
    assert '"POST /v1/chat/completions HTTP/1.1" 200' in logs  # the access log is on
    assert secret not in logs
    assert all(key not in logs for key in nova.keys.values())


def test_a_follow_up_within_the_turn_streams_after_the_answer_set_apart(
    nova: Nova, server: OllamaTestServer
) -> None:
    # The thinker's reasoning stays prose twice: last resort, and a second pass (a follow-up).
    server.standing(
        "router",
        Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True})),
    )
    server.script("responder", Reply(content="Draft answer."), Reply(content="Second look."))
    server.script("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    server.script("thinker_nachfass", Reply(content="prose"), Reply(content="more prose"))
    stream = nova.client().chat.completions.create(
        model="nova", messages=[{"role": "user", "content": "check this"}], stream=True
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    answer, followup = text.split("\n\n---\n\n")
    assert answer.startswith("Draft answer.") and "let me go through that again" in answer
    assert followup == "Second look."


def test_a_backend_failure_is_a_502_or_an_error_event_never_a_trace(
    nova: Nova, server: OllamaTestServer
) -> None:
    failing = Reply(status=400, error="the model refused")
    server.standing("responder", failing)
    with pytest.raises(openai.APIStatusError) as caught:
        nova.client().chat.completions.create(
            model="nova", messages=[{"role": "user", "content": "fail"}]
        )
    assert caught.value.status_code == 502
    assert isinstance(caught.value.body, dict) and caught.value.body["code"] == "backend_error"
    body = {"model": "nova", "messages": [{"role": "user", "content": "fail"}], "stream": True}
    with httpx.stream(
        "POST", f"{nova.url}/v1/chat/completions", json=body, headers=nova.auth(), timeout=30
    ) as response:
        assert response.status_code == 200  # the turn had started: the error is an event
        lines = [line for line in response.iter_lines() if line]
    last = json.loads(lines[-1].removeprefix("data: "))
    assert last["error"]["code"] == "backend_error" and "data: [DONE]" not in lines
    assert "Traceback" not in nova.logs()


async def test_readyz_names_an_unreachable_backend(settings_unreachable: Settings) -> None:
    app = create_app(settings_unreachable)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://nova") as client:
            assert (await client.get("/healthz")).status_code == 200
            ready = await client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"database": "ok", "backend ollama": "unreachable"}
    assert ready.json()["detail"] == "unreachable: backend ollama"


@pytest.fixture
def settings_unreachable(monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")  # OLLAMA_HOST: a closed port (conftest)
    return load_settings().settings


def _readme_block(language: str, marker: str) -> str:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Nova over HTTP\n", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(rf"```{language}\n(.*?)```", section, flags=re.DOTALL)
    return next(block for block in blocks if marker in block)


def test_the_readme_examples_run(
    nova: Nova, server: OllamaTestServer, capsys: pytest.CaptureFixture[str]
) -> None:
    script_reply(server, "Hello from the example.")
    script_reply(server, "Streamed in the example.")
    example = _readme_block("python", "OpenAI(")
    example = example.replace("http://127.0.0.1:8484", nova.url).replace(
        "YOUR_KEY", nova.keys["ada"]
    )
    exec(compile(example, "README.md", "exec"), {})
    assert capsys.readouterr().out == "Hello from the example.\nStreamed in the example."

    script_reply(server, "Hello from curl.")
    curl = _readme_block("sh", "curl").replace("http://127.0.0.1:8484", nova.url)
    done = subprocess.run(
        ["bash", "-c", curl],
        env={**os.environ, "NOVA_KEY": nova.keys["ada"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["choices"][0]["message"]["content"] == "Hello from curl."


def test_a_front_end_chat_id_maps_to_one_conversation_per_user(db: Database) -> None:
    first, new = aliased_conversation(db, "ada", "chat-1")
    assert new and aliased_conversation(db, "ada", "chat-1") == (first, False)
    bobs, new = aliased_conversation(db, "bob", "chat-1")
    assert new and bobs != first
    assert aliased_conversation(db, "ada", "chat-2")[0] not in (first, bobs)
    assert db.conversation_user(first) == "ada" and db.conversation_user(bobs) == "bob"
