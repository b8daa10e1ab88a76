"""One turn end to end through the real engine, graph, queue, backend and database."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine import Engine, background
from novaberg.engine.core import SWALLOWED, why_cancelled
from novaberg.errors import BackendTimeout, ModelOutputError, StorageError, UsageError
from novaberg.memory.store import MemoryStore
from novaberg.storage.sql import sqlite_module
from novaberg.telemetry import OUTCOMES
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import CONTRACT_KEYS

CALL_KEYS = {
    "caller",
    "backend",
    "model",
    "think",
    "content_len",
    "thinking_len",
    "eval_count",
    "tool_calls",
    "outcome",
    "ms",
}


def salient(summary: str, score: float = 0.9) -> Reply:
    return Reply(content=json.dumps({"score": score, "summary": summary}))


async def test_a_turn_produces_the_contract_json_with_one_record_per_call(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script(
        "router", Reply(content='{"intent": "smalltalk", "tone": "warm", "needs_check": false}')
    )
    server.script("responder", Reply(content="Hallo! Schön, dich zu sehen."))
    server.script("salience", salient("", 0.1))
    result = await engine.run_turn("Hallo Nova")
    out = result.contract_json()
    assert set(out) == CONTRACT_KEYS
    assert out["reply"] == "Hallo! Schön, dich zu sehen."
    callers = [c["caller"] for c in out["calls"]]
    # one record per call, in the order they ended: the three judges run at once, so their
    # order among themselves varies (a CI run saw persona before psychology)
    assert callers[:2] == ["router", "responder"] and callers[5:] == ["salience"]
    assert sorted(callers[2:5]) == ["judge_legal", "judge_persona", "judge_psychology"]
    assert all(set(c) >= CALL_KEYS for c in out["calls"])
    assert all(c["outcome"] == "ok" and c["backend"] == "ollama" for c in out["calls"])
    assert out["thinker"] is None
    assert out["tribunal"]["rounds"] == 1
    assert [v["vote"] for v in out["tribunal"]["votes"]] == ["ok", "ok", "ok"]
    assert out["salience"] == {"score": 0.1, "stored": False}
    assert out["followups"] == [] and out["events"] == []
    assert OUTCOMES == (
        "ok",
        "error",
        "timeout",
        "think_split_moved",
        "think_split_prose",
        "dropped_tool_call",
        "empty_answer",
        "malformed",
        "truncated",
    )  # the contract's list
    stored = engine.db.calls_of(result.turn_id)
    assert [c["caller"] for c in stored] == [c["caller"] for c in out["calls"]]
    assert engine.db.turn(result.turn_id)["status"] == "done"


async def test_every_structured_call_is_sent_without_thinking(
    engine: Engine, server: OllamaTestServer
) -> None:
    await engine.run_turn("Hallo Nova")
    chats = server.requests("/api/chat")
    assert [r.body["think"] for r in chats] == [False] * 6
    structured = [r.caller for r in chats if "format" in r.body]
    assert sorted(structured) == sorted(
        ["router", "judge_legal", "judge_psychology", "judge_persona", "salience"]
    )


async def test_router_sees_only_the_raw_message(engine: Engine, server: OllamaTestServer) -> None:
    server.script("salience", salient("The user's cat is called Miso."))
    await engine.run_turn("My cat is called Miso.")
    await engine.run_turn("What do you remember?")
    router_prompt = json.dumps(server.requests("/api/chat", caller="router")[-1].body["messages"])
    responder_prompt = json.dumps(
        server.requests("/api/chat", caller="responder")[-1].body["messages"]
    )
    assert "Miso" not in router_prompt.replace("What do you remember?", "")
    assert "The user's cat is called Miso." in responder_prompt


async def test_a_salient_message_is_remembered_and_used_in_the_next_process(
    settings: Settings, server: OllamaTestServer
) -> None:
    server.script("salience", salient("The user's name is Ada and she sails."))
    first = await Engine.open(settings)
    result = await first.run_turn("I'm Ada and I love sailing.")
    await first.aclose()
    assert result.contract_json()["salience"] == {"score": 0.9, "stored": True}

    second = await Engine.open(settings)  # a fresh engine on the same NOVABERG_HOME
    try:
        await second.run_turn("Do you know me?")
    finally:
        await second.aclose()
    prompt = json.dumps(server.requests("/api/chat", caller="responder")[-1].body["messages"])
    assert "The user's name is Ada and she sails." in prompt


async def test_conversation_history_reaches_the_responder(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Nice to meet you, Ada."))
    first = await engine.run_turn("I'm Ada.")
    await engine.run_turn("And what's my name?", conversation_id=first.conversation_id)
    messages = server.requests("/api/chat", caller="responder")[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[2]["content"] == "Nice to meet you, Ada."


async def test_the_enrichers_reads_are_done_while_the_routers_call_is_out(
    engine: Engine, server: OllamaTestServer
) -> None:
    """Issue 21: the history, timeline and profile do not depend on the router's answer, so
    they are read from the turn's start, not after that answer."""
    first = await engine.run_turn("I'm Ada.")
    ended: dict[str, float] = {}
    handed_over = engine.db.run

    async def recorded(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        try:
            return await handed_over(fn, *args, **kwargs)
        finally:
            ended[fn.__name__] = time.perf_counter()

    engine.db.run = recorded  # type: ignore[method-assign]
    server.set_delay(0.3)  # every call, the router's first
    later = await engine.run_turn("And what's my name?", conversation_id=first.conversation_id)
    (router,) = [c for c in later.trace.calls if c.caller == "router"]
    assert ended["read_for_enricher"] < router.started + router.ms / 1000
    # and what was read is what the responder was given: the first exchange
    messages = server.requests("/api/chat", caller="responder")[-1].body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]


async def test_dateparser_loads_after_the_first_memory_job_beside_the_next_ones_call(
    engine: Engine, server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: its pattern compiling, beside a fresh process's first turn, slowed the sending
    of each model request by about 90 ms (at 200 ms per call), and beside the consolidate job's
    embedding it left a 40-70 ms gap before the next job's call. The turn does not use
    dateparser; it loads once the first job has ended, before the next job's call, and the
    timeline job, which needs it, runs after the profile job."""
    sent_when_warmed: list[list[str]] = []

    def warm() -> None:
        sent_when_warmed.append([r.caller for r in server.requests("/api/chat")])

    monkeypatch.setattr(background, "warm_dateparser", warm)
    server.standing("salience", salient("The user sails a boat on the Wannsee tomorrow."))
    result = await engine.run_turn("I sail a boat on the Wannsee tomorrow.")
    assert result.memory_id is not None and sent_when_warmed == []  # a whole turn, without it
    of_the_turn = [r.caller for r in server.requests("/api/chat")]
    outcomes = await engine.run_background()
    assert [o.type for o in outcomes] == ["consolidate", "profile_adaptive", "timeline"]
    assert sent_when_warmed == [[*of_the_turn, "consolidate"]]
    assert [r.caller for r in server.requests("/api/chat")][-2:] == ["profile_adaptive", "timeline"]
    await engine.run_background()
    assert len(sent_when_warmed) == 1  # once a process


async def test_the_memory_jobs_code_is_imported_in_a_thread_beside_the_router_call(
    engine: Engine, server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 21: left to the first run of the jobs, a fresh process spent about 20 ms on the
    import between the turn's last model call and the first job's."""
    imported: list[tuple[bool, bool]] = []  # (in the loop's thread, the router answered)
    loop_thread = threading.current_thread()

    def import_jobs() -> None:
        answered = any(r.answered_at for r in server.requests("/api/chat", caller="router"))
        imported.append((threading.current_thread() is loop_thread, answered))

    monkeypatch.setattr(background, "import_jobs", import_jobs)
    route = '{"intent": "smalltalk", "tone": "warm", "needs_check": false}'
    server.script("router", Reply(content=route, delay_s=0.5))
    await engine.run_turn("Hallo Nova")
    assert imported == [(False, False)]  # in a thread, while the router's call was out
    await engine.run_turn("Noch einmal")
    assert len(imported) == 1  # once a process


async def test_a_timeline_job_run_first_starts_the_dateparser_warm_up_itself(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A timeline job left waiting by an earlier process can be the first job to run: the
    warm-up is then started by its wait for dates, not only between jobs."""
    warmed: list[str] = []
    monkeypatch.setattr(background, "warm_dateparser", lambda: warmed.append("dateparser"))
    dates_ready = engine.background.job_context().dates_ready
    assert dates_ready is not None
    await dates_ready()
    assert warmed == ["dateparser"]
    await dates_ready()
    assert warmed == ["dateparser"]


async def test_malformed_router_json_is_retried_once_then_a_safe_default(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("router", Reply(content="I think it's smalltalk"), Reply(content="{broken"))
    result = await engine.run_turn("Hallo")
    routers = [c for c in result.trace.calls if c.caller == "router"]
    assert [c.outcome for c in routers] == ["malformed", "malformed"]
    assert result.state["router"].default is True
    assert result.reply  # the turn went on


async def test_malformed_router_json_recovered_by_the_retry(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script(
        "router",
        Reply(content="nope"),
        Reply(content='{"intent": "question", "tone": "neutral", "needs_check": true}'),
    )
    result = await engine.run_turn("Wie hoch ist die Zugspitze?")
    assert [c.outcome for c in result.trace.calls if c.caller == "router"] == ["malformed", "ok"]
    assert result.state["router"].needs_check is True


async def test_malformed_salience_stores_nothing_and_says_so(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", Reply(content="very important!"), Reply(content='{"score": 7}'))
    result = await engine.run_turn("I got married today!")
    assert result.contract_json()["salience"] == {"score": None, "stored": False}
    assert MemoryStore(engine.db).items("default") == []


async def test_empty_answers_fail_the_turn_cleanly(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=""), Reply(content=""))
    with pytest.raises(ModelOutputError, match="empty answer twice"):
        await engine.run_turn("Hallo")
    turn = engine.db.one("SELECT * FROM turns")
    assert turn["status"] == "failed" and turn["user_text"] == "Hallo"  # the message is kept
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0
    outcomes = [c["outcome"] for c in engine.db.calls_of(turn["id"])]
    assert outcomes == ["ok", "empty_answer", "empty_answer"]


async def test_a_cut_stream_is_retried_and_the_turn_completes(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script(
        "responder",
        Reply.cut_stream("Half an ans", after_chunks=1),
        Reply(content="A whole answer."),
    )
    result = await engine.run_turn("Hallo")
    assert result.reply == "A whole answer."
    assert [c.outcome for c in result.trace.calls if c.caller == "responder"] == ["error", "ok"]


async def test_a_timeout_fails_the_turn_and_is_recorded(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.timeouts.first_token_s = 0.2
    engine = await Engine.open(settings)
    server.standing("responder", Reply(content="too late", delay_s=1.0))
    try:
        with pytest.raises(BackendTimeout):
            await engine.run_turn("Hallo")
        turn = engine.db.one("SELECT * FROM turns")
        assert turn["status"] == "failed" and "did not answer in time" in turn["error"]
        assert engine.db.calls_of(turn["id"])[-1]["outcome"] == "timeout"
        assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0
    finally:
        await engine.aclose()


async def test_an_aborted_turn_is_recorded_and_the_next_turn_works(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="never finished", delay_s=5))
    task = asyncio.create_task(engine.run_turn("Erzähl mir was"))
    while not server.requests("/api/chat", caller="responder"):  # noqa: ASYNC110 - server thread
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    aborted = engine.db.one("SELECT * FROM turns")
    assert aborted["status"] == "aborted"
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0
    assert engine.db.calls_of(aborted["id"])[-1]["error"].startswith("cancelled")

    server.script("responder", Reply(content="Here I am."))
    result = await engine.run_turn("Hallo?", conversation_id=aborted["conversation_id"])
    assert result.reply == "Here I am."
    messages = server.requests("/api/chat", caller="responder")[-1].body["messages"]
    assert "Erzähl mir was" not in json.dumps(messages)  # the aborted turn is not history


@pytest.mark.parametrize("text", ["", "   \n ", "x" * 8001, "nul\x00byte", "bad \udcff byte"])
async def test_empty_oversized_binary_or_broken_utf8_messages_are_usage_errors(
    engine: Engine, server: OllamaTestServer, text: str
) -> None:
    with pytest.raises(UsageError):
        await engine.run_turn(text)
    assert server.requests("/api/chat") == []
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM turns") == 0


async def test_a_conversation_of_another_user_is_refused(
    engine: Engine, settings: Settings
) -> None:
    other = engine.db.new_conversation("someone-else")
    with pytest.raises(UsageError, match="another user"):
        await engine.run_turn("Hallo", conversation_id=other)


async def test_german_prompts_when_language_is_de(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.language = "de"
    engine = await Engine.open(settings)
    try:
        await engine.run_turn("Hallo Nova")
    finally:
        await engine.aclose()
    salience_prompt = server.requests("/api/chat", caller="salience")[0].body["messages"][1][
        "content"
    ]
    assert salience_prompt.index("=== LAGEBILD") < salience_prompt.index("=== BEWERTUNGSOBJEKT")
    assert salience_prompt.endswith("Nachricht der Person:\nHallo Nova")  # the subject comes last


async def test_a_database_locked_at_the_end_of_a_turn_is_a_clear_error_and_not_done(
    server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_TIMEOUTS__DATABASE_S", "0.2")
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    engine = await Engine.open(load_settings().settings)
    server.script("responder", Reply(content="An answer.", delay_s=0.5))
    try:
        turn = asyncio.create_task(engine.run_turn("Hello there"))
        await asyncio.sleep(0.25)  # the turn has started; now another process locks the file
        holder = sqlite_module().connect(engine.settings.db_path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(StorageError, match="not writable"):
                await turn
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        row = engine.db.one("SELECT status FROM turns")
        assert row is not None and row["status"] != "done"
        assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0
    finally:
        await engine.aclose()


def _short_term_texts(engine: Engine) -> list[str]:
    rows = engine.db.query(
        "SELECT text FROM memories WHERE user_id = ? AND kind = 'short_term' ORDER BY id",
        (engine.settings.user,),
    )
    return [str(r["text"]) for r in rows]


async def test_an_exact_repeat_of_a_memory_is_stored_once(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script(
        "salience",
        salient("Ada keeps bees."),
        salient("ada keeps  bees."),  # the same, up to case and spacing
        salient("Ada keeps three hives."),
    )
    first = await engine.run_turn("I keep bees.")
    again = await engine.run_turn("I keep bees, did I say?")
    other = await engine.run_turn("I have three hives.")
    texts = await engine.db.run(_short_term_texts, engine)
    assert texts == ["Ada keeps bees.", "Ada keeps three hives."]
    assert again.contract_json()["salience"] == {"score": 0.9, "stored": False}
    assert f"memory_write: kept already as memory {first.memory_id}; not stored twice" in (
        again.trace.notices
    )
    assert other.memory_id is not None


async def test_an_exact_repeat_the_enricher_did_not_bring_is_not_stored_again(
    engine: Engine, server: OllamaTestServer
) -> None:
    """As for a user with many items: the repeated one is not among those retrieved for the
    turn (a message that shares no word with it), and is found by its words."""
    user = engine.settings.user

    def stored_before() -> int:
        with engine.db.transaction() as c:
            kept = MemoryStore.add(c, user, "short_term", "Ada keeps bees.", 0.9, "old:0").id
            for n in range(12):  # newer, and closer to the next message in words
                text = f"The weather in Berlin was sunny on day {n}."
                MemoryStore.add(c, user, "short_term", text, 0.9, f"old:{n + 1}")
            return kept

    kept = await engine.db.run(stored_before)
    other = await engine.db.run(MemoryStore(engine.db).current_saying, user, "short_term", "x")
    assert other is None
    found = MemoryStore(engine.db).current_saying
    assert await engine.db.run(found, user, "short_term", "ada KEEPS  bees.") == kept
    assert await engine.db.run(found, "someone-else", "short_term", "Ada keeps bees.") is None
    server.script("salience", salient("Ada keeps bees."))
    again = await engine.run_turn("How is the weather in Berlin today?")
    given = again.state["context"].memories
    assert kept not in [m.id for m in given]  # the premise: not retrieved for this turn
    assert f"memory_write: kept already as memory {kept}; not stored twice" in again.trace.notices
    assert (await engine.db.run(_short_term_texts, engine)).count("Ada keeps bees.") == 1


async def test_memories_that_say_the_same_are_listed_once_in_a_prompt(
    engine: Engine, server: OllamaTestServer
) -> None:
    def stored_twice() -> None:  # as an older release could store them
        with engine.db.transaction() as c:
            for n, text in enumerate(("Ada keeps bees.", "ADA keeps bees.")):
                MemoryStore.add(c, engine.settings.user, "short_term", text, 0.9, f"old:{n}")

    await engine.db.run(stored_twice)
    await engine.run_turn("Tell me about my bees.")
    prompt = json.dumps(server.requests("/api/chat", caller="responder")[-1].body["messages"])
    assert prompt.lower().count("ada keeps bees.") == 1


def test_an_abort_reason_a_library_rewrote_is_stored_as_lost_not_in_its_words() -> None:
    """A cancel that lands while httpx connects to the backend comes back from anyio's cancel
    scope in anyio's words (seen in the test below under load): the stored reason says the
    cancel's own reason was lost, never anyio's text with its task and file names."""
    anyio_words = (
        "Cancelled via cancel scope 7fe3f2192020 by <Task pending name='anyio._core._sockets."
        "connect_tcp.<locals>.try_connect' coro=<...> at /venv/lib/anyio/_backends/_asyncio.py>"
    )
    assert why_cancelled(asyncio.CancelledError(anyio_words)) == SWALLOWED
    assert why_cancelled(asyncio.CancelledError("the client went away")) == "the client went away"
    assert why_cancelled(asyncio.CancelledError()) == "interrupted by the user"
    assert why_cancelled(KeyboardInterrupt()) == "interrupted by the user"


async def test_a_turn_cancelled_at_any_point_is_never_left_running(
    engine: Engine, server: OllamaTestServer
) -> None:
    """A client that goes away cancels its turn (the server's TurnService): wherever the cancel
    lands, even while the turn's row is being written, the turn ends aborted or not at all."""
    server.standing("responder", Reply(content="Slow.", delay_s=0.5))
    for wait_s in [n / 10_000 for n in range(60)] + [0.01, 0.05, 0.2]:  # 0 to 6 ms, then on
        task = asyncio.create_task(engine.run_turn("Hello?", drain_followups=False))
        await asyncio.sleep(wait_s)
        task.cancel("the client went away")
        with pytest.raises(asyncio.CancelledError):
            await task
    rows = await engine.db.run(engine.db.query, "SELECT status, error FROM turns", ())
    assert rows and all(r["status"] == "aborted" for r in rows), rows
    # the cancel's own reason, or, where a part of the pipeline dropped the cancel, that
    assert {r["error"] for r in rows} <= {"the client went away", SWALLOWED}
