"""A broken part never blocks the answer: only the responder is essential.

Each part is broken the way a real server breaks — HTTP 500 on every retry, for that caller
only — through the Ollama test server. The turn's reply is the responder's answer, the turn is
stored as done, the call records say ``error``, and the trace has a notice naming the part.
(A failing judge: ``test_tribunal.py``.)"""

from __future__ import annotations

import json
from typing import Any

import pytest

from novaberg.engine import Engine, TurnResult
from novaberg.errors import BackendHTTPError
from novaberg.graph.channels import Correcting
from novaberg.memory.store import MemoryStore
from novaberg.testing import OllamaTestServer, Reply

ANSWER = "Hello! Nice to hear from you."
CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))
BROKEN = Reply.http_error(500, "kaputt")


def stored_trace(engine: Engine, result: TurnResult) -> dict[str, Any]:
    turn = engine.db.turn(result.turn_id)
    assert turn is not None and turn["status"] == "done"
    trace: dict[str, Any] = json.loads(turn["trace_json"])
    return trace


def outcomes(result: TurnResult, caller: str) -> list[str]:
    return [c.outcome for c in result.trace.calls if c.caller == caller]


def notices_of(trace: dict[str, Any], node: str) -> list[str]:
    return [n for n in trace["notices"] if n.startswith(f"{node}: ")]


async def test_a_broken_router_gives_the_default_route(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.standing("router", BROKEN)
    server.script("responder", Reply(content=ANSWER))
    result = await engine.run_turn("Hallo Nova")
    assert result.reply == ANSWER
    assert outcomes(result, "router") == ["error"] * engine.settings.retries.attempts
    assert result.state["router"].default is True
    trace = stored_trace(engine, result)
    assert notices_of(trace, "router") == [
        "router: failed after its retries (HTTP 500); the default route is used"
    ]
    assert "kaputt" not in json.dumps(trace["notices"])  # no server text in a notice


async def test_a_broken_thinker_keeps_the_draft(engine: Engine, server: OllamaTestServer) -> None:
    server.standing("router", CHECK)
    server.script("responder", Reply(content=ANSWER))
    server.standing("thinker", BROKEN)
    result = await engine.run_turn("How high is the Zugspitze?")
    assert result.reply == ANSWER
    assert set(outcomes(result, "thinker")) == {"error"}
    assert result.contract_json()["thinker"] == {
        "iterations": 1,
        "followup_calls": 0,
        "result": "failed",
        "tools": [],
        "recalled": [],
    }
    trace = stored_trace(engine, result)
    assert notices_of(trace, "thinker") == [
        "thinker: failed after its retries (HTTP 500); the draft stays unchecked"
    ]
    assert result.events == []  # no second pass was promised


async def test_a_broken_corrector_keeps_the_answer_and_ends_the_corrections(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=ANSWER))
    server.standing("judge_persona", Reply(content='{"vote": "revise", "reason": "colder"}'))
    server.standing("corrector", BROKEN)
    result = await engine.run_turn("Hallo Nova")
    out = result.contract_json()
    assert out["reply"] == ANSWER
    assert outcomes(result, "corrector") == ["error"] * engine.settings.retries.attempts
    assert out["tribunal"]["rounds"] == 1  # no second vote on an answer that did not change
    assert out["tribunal"]["corrections"] == 1
    assert len(server.requests("/api/chat", caller="judge_persona")) == 1
    assert result.state["corrector"] == Correcting(
        1, ("persona: colder",), applied=False, failed=True
    )
    trace = stored_trace(engine, result)
    assert trace["corrector"] == {
        "rounds": 1,
        "reasons": ["persona: colder"],
        "applied": False,
        "failed": True,
    }
    assert notices_of(trace, "corrector") == [
        "corrector: failed after its retries (HTTP 500); the answer stays as it was"
    ]
    assert out["salience"] is not None  # the turn went on after the tribunal


async def test_a_broken_salience_remembers_nothing(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=ANSWER))
    server.standing("salience", BROKEN)
    result = await engine.run_turn("I got married today!")
    assert result.reply == ANSWER
    assert result.contract_json()["salience"] == {"score": None, "stored": False}
    assert MemoryStore(engine.db).items(engine.settings.user) == []
    trace = stored_trace(engine, result)
    assert notices_of(trace, "salience") == [
        "salience: failed after its retries (HTTP 500); nothing from this turn is remembered"
    ]


async def test_a_broken_responder_fails_the_turn_and_says_so(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.standing("responder", BROKEN)
    with pytest.raises(BackendHTTPError) as info:
        await engine.run_turn("Hallo Nova")
    message = str(info.value)
    assert message.startswith("The responder failed, so this turn has no answer: ")
    assert "HTTP 500" in message
    turn = engine.db.one("SELECT * FROM turns")
    assert turn is not None and turn["status"] == "failed"
    assert turn["error"].startswith("The responder failed")
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0
    assert not server.requests("/api/chat", caller="judge_legal")  # nothing after it ran
