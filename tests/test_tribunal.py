"""Tribunal, corrector and salience: situation and subject kept apart, votes handled safely."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.graph.channels import Correcting
from novaberg.memory.store import MemoryStore
from novaberg.prompts.labels import DE, EN
from novaberg.testing import OllamaTestServer, RecordedRequest, Reply

JUDGES = ["judge_legal", "judge_psychology", "judge_persona"]
MEMORY = "ZEBRA-MEMORY-17: the user keeps bees"
CORE = "KOBOLD-CORE: loves astronomy and cooking"
ADAPTIVE = "TUEV-ADAPTIVE-42: stressed about the car inspection"
EVENT = "PETER-TIMELINE-9: Peter's birthday"
DISTINCTIVE = ["ZEBRA-MEMORY-17", "KOBOLD-CORE", "TUEV-ADAPTIVE-42", "PETER-TIMELINE-9"]


def vote(v: str, reason: str = "fine") -> Reply:
    return Reply(content=json.dumps({"vote": v, "reason": reason}))


def user_prompt(request: RecordedRequest) -> str:
    return str(request.body["messages"][-1]["content"])


def split_blocks(text: str, labels: object = EN) -> tuple[str, str, str]:
    """(before, situation, subject) of a judging prompt; the review block counts as neither."""
    sit = text.index(labels.situation_header)  # type: ignore[attr-defined]
    sub = text.index(labels.subject_header)  # type: ignore[attr-defined]
    end_of_situation = sub
    if labels.review_header in text:  # type: ignore[attr-defined]
        end_of_situation = text.index(labels.review_header)  # type: ignore[attr-defined]
    return text[:sit], text[sit:end_of_situation], text[sub:]


@pytest.fixture
async def rich_engine(settings: Settings) -> Engine:
    engine = await Engine.open(settings)
    user = settings.user
    with engine.db.transaction() as c:
        MemoryStore.add(c, user, "short_term", MEMORY, 0.9, "test:memory")
    MemoryStore(engine.db).set_profile_text(user, "core", CORE)
    MemoryStore(engine.db).set_profile_text(user, "adaptive", ADAPTIVE)
    MemoryStore(engine.db).add_event(
        user, (date.today() + timedelta(days=1)).isoformat(), EVENT, "test:event"
    )
    return engine


async def test_judges_vote_concurrently_through_the_queue(
    engine: Engine, server: OllamaTestServer
) -> None:
    for judge in JUDGES:
        server.script(judge, Reply(content='{"vote": "ok", "reason": "fine"}', delay_s=0.3))
    result = await engine.run_turn("Wie hoch ist die Zugspitze?")
    arrivals = [r.at for r in server.requests("/api/chat") if r.caller in JUDGES]
    assert len(arrivals) == 3
    # all three were sent before the first one (0.3 s at the server) could have been answered
    assert max(arrivals) - min(arrivals) < 0.3
    assert result.trace.node_ms("tribunal") < 0.85 * 1000  # sequential would take over 0.9 s


async def test_a_revise_vote_leads_to_a_correction_and_a_second_vote(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Draft with a problem."))
    server.script("judge_persona", vote("revise", "Does not sound like Nova."), vote("ok"))
    server.script("corrector", Reply(content="A warmer, corrected answer."))
    result = await engine.run_turn("Hallo Nova")
    out = result.contract_json()
    assert out["reply"] == "A warmer, corrected answer."
    assert out["tribunal"]["rounds"] == 2 and out["tribunal"]["corrections"] == 1
    assert [v["vote"] for v in out["tribunal"]["votes"]] == ["ok", "ok", "ok"]
    callers = [c["caller"] for c in out["calls"]]
    assert callers.count("corrector") == 1
    assert callers.index("corrector") < len(callers) - 4  # a second vote followed it
    assert sum(c.startswith("judge_") for c in callers) == 6
    second_round = [r for r in server.requests("/api/chat") if r.caller in JUDGES][3:]
    assert all("A warmer, corrected answer." in user_prompt(r) for r in second_round)
    corrector_prompt = user_prompt(server.requests("/api/chat", caller="corrector")[0])
    assert "persona: Does not sound like Nova." in corrector_prompt
    assert result.state["draft"] == "Draft with a problem."  # the draft is kept in the trace
    stored = engine.db.scalar("SELECT trace_json FROM turns WHERE id = ?", (result.turn_id,))
    assert json.loads(stored)["draft"] == "Draft with a problem."  # another than the reply


async def test_corrections_are_bounded(engine: Engine, server: OllamaTestServer) -> None:
    server.standing("judge_legal", vote("revise", "still not right"))
    server.script("corrector", Reply(content="First fix."), Reply(content="Second fix."))
    result = await engine.run_turn("Hallo")
    out = result.contract_json()
    assert out["tribunal"]["rounds"] == 3  # vote, fix, vote, fix, vote — then stop
    assert out["tribunal"]["corrections"] == 2
    assert out["reply"] == "Second fix."
    assert [c["caller"] for c in out["calls"]].count("corrector") == 2


async def test_malformed_judge_output_is_retried_then_counts_as_ok_and_says_so(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("judge_legal", Reply(content="I think it is fine."), Reply(content="{nope"))
    result = await engine.run_turn("Hallo")
    legal = [c for c in result.trace.calls if c.caller == "judge_legal"]
    assert [c.outcome for c in legal] == ["malformed", "malformed"]
    votes = {v["judge"]: v for v in result.contract_json()["tribunal"]["votes"]}
    assert votes["legal"]["vote"] == "ok" and votes["legal"]["malformed"] is True
    assert votes["persona"]["malformed"] is False
    assert "corrector" not in [c.caller for c in result.trace.calls]


async def test_an_invalid_vote_value_is_malformed_and_the_retry_can_recover(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script(
        "judge_psychology",
        Reply(content='{"vote": "maybe", "reason": "?"}'),
        vote("revise", "too cold"),
    )
    server.script("corrector", Reply(content="Kinder words."))
    result = await engine.run_turn("Mir geht's nicht gut.")
    outcomes = [c.outcome for c in result.trace.calls if c.caller == "judge_psychology"]
    assert outcomes[:2] == ["malformed", "ok"]
    assert result.reply == "Kinder words."


async def test_an_empty_correction_keeps_the_answer_and_is_recorded(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Original answer."))
    server.script("judge_legal", vote("revise", "x"), vote("ok"))
    server.script("corrector", Reply(content=""))
    result = await engine.run_turn("Hallo")
    assert result.reply == "Original answer."
    assert result.state["corrector"] == Correcting(1, ("legal: x",), applied=False)
    assert [c.outcome for c in result.trace.calls if c.caller == "corrector"] == ["empty_answer"]


async def test_context_reaches_judges_corrector_and_salience_only_inside_the_situation(
    rich_engine: Engine, server: OllamaTestServer
) -> None:
    message = "Was steht morgen an?"
    server.script("responder", Reply(content="Morgen hast du einen Termin."))
    server.script("judge_legal", vote("revise", "Name the event."), vote("ok"))
    server.script("corrector", Reply(content="Morgen ist Peters Geburtstag."))
    try:
        await rich_engine.run_turn(message)
    finally:
        await rich_engine.aclose()
    chats = server.requests("/api/chat")
    router_text = json.dumps(server.requests("/api/chat", caller="router")[0].body)
    assert not any(token in router_text for token in DISTINCTIVE)

    judging = [r for r in chats if r.caller in (*JUDGES, "corrector", "salience")]
    assert len(judging) == 3 + 1 + 3 + 1
    answers = iter(
        ["Morgen hast du einen Termin."] * 3
        + ["Morgen hast du einen Termin."]
        + ["Morgen ist Peters Geburtstag."] * 3
    )
    for request in judging:
        text = user_prompt(request)
        before, situation, subject = split_blocks(text)
        assert before == ""
        for token in DISTINCTIVE:
            assert token in situation, (request.caller, token)
            assert text.count(token) == situation.count(token), (request.caller, token)
        system = request.body["messages"][0]["content"]
        assert not any(token in system for token in DISTINCTIVE)
        if request.caller == "salience":
            assert subject == f"{EN.subject_header}\n{EN.user_message}\n{message}"
        else:
            expected = next(answers)
            assert subject == (
                f"{EN.subject_header}\n{EN.user_message}\n{message}\n\n{EN.answer}\n{expected}"
            ), request.caller
        assert text.endswith(subject)  # the subject comes last


async def test_salience_sees_the_answer_only_as_background(
    engine: Engine, server: OllamaTestServer
) -> None:
    long_calm_answer = "Here are some calm tips. " * 30
    server.script("responder", Reply(content=long_calm_answer.strip()))
    await engine.run_turn("I'm totally overwhelmed with work!")
    text = user_prompt(server.requests("/api/chat", caller="salience")[0])
    _, situation, subject = split_blocks(text)
    assert "Here are some calm tips." in situation and "calm tips" not in subject
    assert subject.endswith("I'm totally overwhelmed with work!")


async def test_each_judge_gets_its_own_perspective_and_negative_examples(
    engine: Engine, server: OllamaTestServer
) -> None:
    await engine.run_turn("Hallo")
    systems = {r.caller: r.body["messages"][0]["content"] for r in server.requests("/api/chat")}
    assert "Personal data the user gave themselves" in systems["judge_legal"]
    assert "A factual question needs no empathy" in systems["judge_psychology"]
    assert "sounds like Nova" in systems["judge_persona"]
    for judge in JUDGES:
        assert "Judge ONLY the subject" in systems[judge]
        assert "When in doubt: ok." in systems[judge]


async def test_german_judges_use_lagebild_and_bewertungsobjekt(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.language = "de"
    engine = await Engine.open(settings)
    try:
        await engine.run_turn("Hallo Nova")
    finally:
        await engine.aclose()
    for request in server.requests("/api/chat"):
        if request.caller in JUDGES:
            text = user_prompt(request)
            assert text.startswith(DE.situation_header)
            assert text.index(DE.situation_header) < text.index(DE.subject_header)
            assert "Bewerte AUSSCHLIESSLICH" in request.body["messages"][0]["content"]


@pytest.fixture
def brevity_config(isolated_env: Path) -> Path:
    isolated_env.mkdir(parents=True, exist_ok=True)
    path = isolated_env / "config.toml"
    path.write_text(
        '[tribunal]\njudges = ["persona", "brevity"]\n'
        '[tribunal.custom.brevity]\nfocus = "Is the answer short enough for a chat?"\n'
        'not_a_problem = ["A long answer to a request for details"]\n',
        encoding="utf-8",
    )
    return path


async def test_a_custom_judge_from_the_config_file_votes(
    ollama_env: OllamaTestServer, brevity_config: Path
) -> None:
    ollama_env.script("judge_brevity", vote("revise", "Too long."), vote("ok"))
    ollama_env.script("corrector", Reply(content="Short."))
    engine = await Engine.open(load_settings().settings)
    try:
        result = await engine.run_turn("Hallo")
    finally:
        await engine.aclose()
    assert result.reply == "Short."
    system = ollama_env.requests("/api/chat", caller="judge_brevity")[0].body["messages"][0]
    assert "Is the answer short enough for a chat?" in system["content"]
    assert "A long answer to a request for details" in system["content"]
    assert {v["judge"] for v in result.contract_json()["tribunal"]["votes"]} == {
        "persona",
        "brevity",
    }


async def test_no_judges_means_no_tribunal(settings: Settings, server: OllamaTestServer) -> None:
    settings.tribunal.judges = []
    engine = await Engine.open(settings)
    try:
        result = await engine.run_turn("Hallo")
    finally:
        await engine.aclose()
    assert result.contract_json()["tribunal"] is None
    assert not [r for r in server.requests("/api/chat") if r.caller.startswith("judge_")]


def test_unknown_judge_names_are_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from novaberg.errors import ConfigError

    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "legal,astrologer")
    with pytest.raises(ConfigError, match="astrologer"):
        load_settings()


async def test_a_fact_free_turn_costs_six_calls(engine: Engine, server: OllamaTestServer) -> None:
    result = await engine.run_turn("Hallo Nova, wie geht's?")
    assert len(result.trace.calls) == 6  # router, responder, three judges, salience


def stored_trace(engine: Engine, turn_id: int) -> dict[str, object]:
    turn = engine.db.turn(turn_id)
    assert turn is not None and turn["status"] == "done"
    trace: dict[str, object] = json.loads(turn["trace_json"])
    return trace


async def test_a_judge_failing_every_retry_abstains_and_the_answer_stands(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Hello there."))
    server.standing("judge_legal", Reply.http_error(500, "kaputt"))
    result = await engine.run_turn("Hallo Nova")
    out = result.contract_json()
    assert out["reply"] == "Hello there."
    attempts = engine.settings.retries.attempts
    assert [c["outcome"] for c in out["calls"] if c["caller"] == "judge_legal"] == [
        "error"
    ] * attempts
    votes = {v["judge"]: v for v in out["tribunal"]["votes"]}
    assert votes["legal"] == {
        "judge": "legal",
        "vote": "abstained",
        "reason": "no vote: HTTP 500",
        "malformed": False,
        "abstained": True,
    }
    assert votes["psychology"]["vote"] == votes["persona"]["vote"] == "ok"
    assert "corrector" not in [c["caller"] for c in out["calls"]]
    assert stored_trace(engine, result.turn_id)["notices"] == [
        "judge_legal: failed after its retries (HTTP 500); it abstained; the other judges' "
        "votes decide"
    ]


async def test_a_judge_that_failed_is_not_asked_again_in_the_next_round(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Draft."))
    server.standing("judge_legal", Reply.http_error(503))
    server.script("judge_persona", vote("revise", "Warmer, please."), vote("ok"))
    server.script("corrector", Reply(content="A warmer answer."))
    result = await engine.run_turn("Hallo Nova")
    out = result.contract_json()
    assert out["reply"] == "A warmer answer."
    assert out["tribunal"]["rounds"] == 2
    assert (
        len(server.requests("/api/chat", caller="judge_legal")) == engine.settings.retries.attempts
    )
    votes = {v["judge"]: v for v in out["tribunal"]["votes"]}
    assert votes["legal"]["abstained"] is True
    assert votes["legal"]["reason"] == "no vote: failed earlier in this turn"
    assert votes["persona"]["vote"] == "ok"
    notices = stored_trace(engine, result.turn_id)["notices"]
    assert isinstance(notices, list) and len(notices) == 1  # one failure, one notice


async def test_a_judge_that_times_out_abstains(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.timeouts.first_token_s = 0.2
    server.script("responder", Reply(content="Quick answer."))
    server.standing("judge_psychology", Reply(content='{"vote": "revise"}', delay_s=1.0))
    engine = await Engine.open(settings)
    try:
        result = await engine.run_turn("Hallo")
        trace = stored_trace(engine, result.turn_id)
    finally:
        await engine.aclose()
    assert result.reply == "Quick answer."
    votes = {v["judge"]: v for v in result.contract_json()["tribunal"]["votes"]}
    assert votes["psychology"]["vote"] == "abstained"
    assert votes["psychology"]["reason"] == "no vote: timeout"
    assert [c.outcome for c in result.trace.calls if c.caller == "judge_psychology"] == ["timeout"]
    assert trace["notices"] == [
        "judge_psychology: failed (timeout); it abstained; the other judges' votes decide"
    ]
