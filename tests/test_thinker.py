"""The thinker against the Ollama test server, through the real client: every documented
shape of the think/content split, vanishing tool calls, and the last resort end to end."""

from __future__ import annotations

import json
import logging

import pytest

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.jobs.events import EventQueue
from novaberg.testing import OllamaTestServer, Reply, SearxngTestServer
from tests.conftest import closed_port_url

CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))
DRAFT = "The Zugspitze is 3,100 m high."
FIXED = "The Zugspitze is 2,962 m high."
QUESTION = "How high is the Zugspitze?"


@pytest.fixture
def checking(server: OllamaTestServer) -> OllamaTestServer:
    """The router asks for a fact check; the responder drafts a wrong answer."""
    server.standing("router", CHECK)
    server.script("responder", Reply(content=DRAFT))
    return server


def thinker_calls(result: object) -> list[tuple[str, str, str]]:
    return [
        (c.caller, c.outcome, c.normalizer)
        for c in result.trace.calls  # type: ignore[attr-defined]
        if c.caller.startswith("thinker")
    ]


async def test_a_clean_pass_keeps_the_draft(engine: Engine, checking: OllamaTestServer) -> None:
    checking.script("thinker", Reply(content="RESULT: OK", thinking="Looks right."))
    result = await engine.run_turn(QUESTION)
    assert result.reply == DRAFT
    assert result.contract_json()["thinker"] == {
        "iterations": 1,
        "followup_calls": 0,
        "result": "ok",
        "tools": [],
        "recalled": [],
    }
    assert thinker_calls(result) == [("thinker", "ok", "think_split")]
    body = checking.requests("/api/chat", caller="thinker")[0].body
    assert body["think"] is True
    assert [t["function"]["name"] for t in body["tools"]] == [
        "web_search",
        "memory_search",
        "timeline",
        "current_time",
    ]


async def test_case_1_moves_the_control_line_without_an_extra_call(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script(
        "thinker",
        Reply.thinking_swallowed_answer(
            "3,100 m is wrong; it is 2,962 m.", control_line=f"RESULT: REVISED\n{FIXED}"
        ),
    )
    result = await engine.run_turn(QUESTION)
    assert result.reply == FIXED
    assert thinker_calls(result) == [("thinker", "think_split_moved", "think_split")]
    assert result.contract_json()["thinker"]["followup_calls"] == 0


async def test_case_2_is_recovered_by_one_follow_up(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script("thinker", Reply.thinking_swallowed_answer("3,100 m is wrong; 2,962 m."))
    checking.script("thinker_nachfass", Reply(content=f"RESULT: REVISED\n{FIXED}"))
    result = await engine.run_turn(QUESTION)
    assert result.reply == FIXED
    assert thinker_calls(result) == [
        ("thinker", "think_split_prose", "think_split"),
        ("thinker_nachfass", "ok", ""),
    ]
    nachfass = checking.requests("/api/chat", caller="thinker_nachfass")[0].body
    assert nachfass["think"] is False and not nachfass.get("tools")
    assert "3,100 m is wrong; 2,962 m." in nachfass["messages"][-1]["content"]
    out = result.contract_json()["thinker"]
    assert out["iterations"] == 1 and out["followup_calls"] == 1  # not counted as iterations


async def test_case_2_needing_both_follow_ups(engine: Engine, checking: OllamaTestServer) -> None:
    checking.script("thinker", Reply.thinking_swallowed_answer("It is 2,962 m, not 3,100."))
    checking.script(
        "thinker_nachfass",
        Reply(content="I think the draft is wrong."),
        Reply(content=f"ERGEBNIS: REVISED\n{FIXED}"),
    )
    result = await engine.run_turn(QUESTION)
    assert result.reply == FIXED
    assert [c[1] for c in thinker_calls(result)] == ["think_split_prose", "malformed", "ok"]
    assert result.contract_json()["thinker"]["followup_calls"] == 2


async def test_double_failure_appends_the_gesture_and_delivers_a_follow_up(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    checking.script("thinker_nachfass", Reply(content="still prose"), Reply(content="more prose"))
    checking.script("responder", Reply(content="Second look: it is 2,962 m."))  # the 2nd pass
    result = await engine.run_turn(QUESTION)
    out = result.contract_json()
    assert out["reply"] == f"{DRAFT}\n\nHmm… let me go through that again."
    assert out["thinker"]["result"] == "last_resort"
    assert out["followups"] == [
        {
            "reply": "Second look: it is 2,962 m.",
            "origin": "self_trigger",
            "turn_id": out["turn_id"] + 1,
        }
    ]
    assert [(e["type"], e["status"]) for e in out["events"]] == [("self_trigger", "delivered")]
    rows = engine.db.query(
        "SELECT t.origin, m.role, m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
        "ORDER BY m.id"
    )
    assert [tuple(r.values()) for r in rows] == [
        ("user", "user", QUESTION),
        ("user", "assistant", out["reply"]),
        ("self_trigger", "assistant", "Second look: it is 2,962 m."),
    ]
    second = engine.db.turn(out["turn_id"] + 1)
    assert second is not None and second["status"] == "done"
    # the second pass had no decision either, and did not self-trigger again
    assert json.loads(second["trace_json"])["thinker"]["result"] == "unresolved"
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM events") == 1


async def test_self_trigger_log_lines_claim_only_what_happened(
    engine: Engine, checking: OllamaTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    checking.script("thinker", Reply.thinking_swallowed_answer("prose"))
    checking.script("thinker_nachfass", Reply(content="x"), Reply(content="y"))
    with caplog.at_level(logging.INFO, logger="novaberg"):
        result = await engine.run_turn(QUESTION)
    event_id = result.contract_json()["events"][0]["id"]
    messages = [r.getMessage() for r in caplog.records]
    assert f"self-trigger enqueued (event {event_id})" in messages
    assert any(m.startswith(f"self-trigger event {event_id} delivered") for m in messages)


class BrokenQueue(EventQueue):
    def enqueue(self, *args: object, **kwargs: object) -> int:
        raise RuntimeError("queue is down")


async def test_a_failing_event_queue_is_logged_as_such_and_promises_nothing(
    engine: Engine, checking: OllamaTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    engine.events = BrokenQueue(engine.db)
    checking.script("thinker", Reply.thinking_swallowed_answer("prose"))
    checking.script("thinker_nachfass", Reply(content="x"), Reply(content="y"))
    with caplog.at_level(logging.INFO, logger="novaberg"):
        result = await engine.run_turn(QUESTION)
    messages = " | ".join(r.getMessage() for r in caplog.records)
    assert "self-trigger could NOT be enqueued" in messages
    assert "enqueued (event" not in messages and "delivered" not in messages
    assert result.reply == DRAFT  # no gesture: nothing was scheduled to keep the promise
    assert result.contract_json()["thinker"]["result"] == "unresolved"
    assert result.followups == [] and result.events == []


async def test_a_dropped_tool_call_is_recovered_by_the_retry(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script(
        "thinker",
        Reply.dropped_tool_call("calendar"),  # undeclared: swallowed
        Reply.dropped_tool_call("current_time"),
        Reply(content="RESULT: OK"),
    )
    result = await engine.run_turn(QUESTION)
    assert [c[1] for c in thinker_calls(result)] == ["dropped_tool_call", "ok", "ok"]
    assert result.contract_json()["thinker"]["tools"] == ["current_time"]
    last = checking.requests("/api/chat", caller="thinker")[-1].body["messages"]
    assert last[-1]["role"] == "tool" and "<<<TOOL result from current_time" in last[-1]["content"]


async def test_an_unknown_tool_from_the_model_is_never_executed(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script(
        "thinker",
        Reply(content='TOOL: delete_everything({"all": true})'),
        Reply(content="RESULT: OK"),
    )
    result = await engine.run_turn(QUESTION)
    assert result.contract_json()["thinker"]["result"] == "ok"
    tool_message = checking.requests("/api/chat", caller="thinker")[-1].body["messages"][-1]
    assert "ERROR" in tool_message["content"] and "no tool named" in tool_message["content"]


async def test_a_failing_tool_and_invalid_arguments_go_back_to_the_model(
    settings: Settings, checking: OllamaTestServer
) -> None:
    with SearxngTestServer() as searxng:
        searxng.status = 500
        settings.searxng_url = searxng.url
        engine = await Engine.open(settings)
        checking.script(
            "thinker",
            Reply(content='TOOL: web_search({"query": "Zugspitze"})'),
            Reply(content='TOOL: web_search({"q": 1})'),
            Reply(content=f"RESULT: REVISED\n{FIXED}"),
        )
        try:
            result = await engine.run_turn(QUESTION)
        finally:
            await engine.aclose()
    assert result.reply == FIXED
    messages = checking.requests("/api/chat", caller="thinker")[-1].body["messages"]
    tool_results = [m["content"] for m in messages if m["role"] == "tool"]
    assert "The tool failed: WebSearchFailed" in tool_results[0]
    assert "Invalid arguments" in tool_results[1]


async def test_max_iterations_is_reached_with_an_honest_trace(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.standing("thinker", Reply(content="TOOL: current_time({})"))
    result = await engine.run_turn(QUESTION)
    out = result.contract_json()["thinker"]
    assert out["result"] == "max_iterations" and out["iterations"] == 5
    assert out["tools"] == ["current_time"] * 5
    assert result.reply == DRAFT
    assert len(checking.requests("/api/chat", caller="thinker")) == 5


async def test_a_fallback_backend_that_answered_gets_the_noop_normaliser(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.ollama_host = closed_port_url()
    settings.fallback = ["openai"]
    settings.openai_url = server.url + "/v1"
    settings.openai_model = "qwen3:4b"
    settings.retries.attempts = 1
    server.standing("router", CHECK)
    server.script("thinker", Reply(content="RESULT: OK", thinking="checked"))
    engine = await Engine.open(settings)
    try:
        result = await engine.run_turn(QUESTION)
    finally:
        await engine.aclose()
    thinking = [c for c in result.trace.calls if c.caller == "thinker" and c.outcome == "ok"]
    assert thinking and thinking[0].backend == "openai" and thinking[0].normalizer == "noop"


async def test_the_thinker_runs_only_when_asked(
    settings: Settings, server: OllamaTestServer
) -> None:
    engine = await Engine.open(settings)
    try:
        plain = await engine.run_turn("Hallo!")  # the router's default: needs_check false
        assert plain.contract_json()["thinker"] is None
        engine.settings.thinker.mode = "always"
        server.script("thinker", Reply(content="RESULT: OK"))
        forced = await engine.run_turn("Hallo!")
        assert forced.contract_json()["thinker"]["result"] == "ok"
    finally:
        await engine.aclose()


async def test_prose_in_content_without_a_decision_is_malformed_then_followed_up(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script("thinker", Reply(content="I believe the draft might be off."))
    checking.script("thinker_nachfass", Reply(content="RESULT: OK"))
    result = await engine.run_turn(QUESTION)
    assert [c[1] for c in thinker_calls(result)] == ["malformed", "ok"]
    assert result.contract_json()["thinker"]["result"] == "ok"


async def test_the_second_pass_weighs_nothing_again(
    engine: Engine, checking: OllamaTestServer
) -> None:
    checking.script("thinker", Reply.thinking_swallowed_answer("prose"))
    checking.script("thinker_nachfass", Reply(content="x"), Reply(content="y"))
    result = await engine.run_turn(QUESTION)
    assert len(result.followups) == 1
    assert len(checking.requests("/api/chat", caller="salience")) == 1  # the first turn only
