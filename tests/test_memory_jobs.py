"""Background memory jobs through the event queue and the model queue, against the Ollama test
server, on SQLite and on PostgreSQL: consolidation (new / same / update), timeline dates,
profile statements with sources; failures recorded as failed; reruns change nothing twice."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.memory.jobs import resolve_date
from novaberg.memory.store import MemoryStore
from novaberg.testing import OllamaTestServer, Reply

FACT = "Ada's sister is called Lena."


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


@pytest.fixture
async def memory_engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        yield engine
    finally:
        await engine.aclose()


async def salient_turn(engine: Engine, server: OllamaTestServer, text: str, summary: str) -> int:
    server.script("salience", said({"score": 0.9, "summary": summary}))
    result = await engine.run_turn(text)
    assert result.memory_id is not None
    return result.memory_id


def job_events(engine: Engine) -> list[dict[str, object]]:
    return engine.db.query("SELECT id, type, status, result FROM events ORDER BY id")


async def test_a_salient_turn_enqueues_its_jobs_in_the_same_transaction(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    await salient_turn(memory_engine, server, "My sister is Lena.", FACT)
    assert [(e["type"], e["status"]) for e in job_events(memory_engine)] == [
        ("consolidate", "pending"),
        ("profile_adaptive", "pending"),
        ("timeline", "pending"),  # last: the one that needs dateparser (job_policy)
    ]


async def test_consolidation_makes_a_fact_that_covers_the_item(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    item = await salient_turn(memory_engine, server, "My sister is Lena.", FACT)
    server.script("consolidate", said({"action": "new", "fact_id": None, "fact": FACT}))
    [outcome] = await memory_engine.run_background(limit=1)
    assert outcome.status == "done" and outcome.result.startswith("new fact ")
    store = MemoryStore(memory_engine.db)
    [fact] = store.items("default", kind="long_term")
    assert fact.text == FACT and fact.derived_from == [item]
    covered = store.get("default", item)
    assert covered is not None and covered.consolidated_into == fact.id
    [request] = server.requests("/api/chat", caller="consolidate")
    assert request.body["think"] is False
    calls = memory_engine.db.query(
        "SELECT caller, event_id, outcome FROM llm_calls WHERE turn_id IS NULL"
    )
    assert calls == [{"caller": "consolidate", "event_id": outcome.event_id, "outcome": "ok"}]


async def test_an_update_supersedes_the_old_fact_and_same_links_to_it(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(memory_engine.db)
    await salient_turn(memory_engine, server, "I live in Hamburg.", "Ada lives in Hamburg.")
    server.script("consolidate", said({"action": "new", "fact": "Ada lives in Hamburg."}))
    await memory_engine.run_background(limit=1)
    [hamburg] = store.items("default", kind="long_term")

    await salient_turn(
        memory_engine,
        server,
        "I moved to Berlin!",
        "Ada moved to Berlin, no longer lives in Hamburg.",
    )
    server.script(
        "consolidate",
        said({"action": "update", "fact_id": hamburg.id, "fact": "Ada lives in Berlin."}),
    )
    server.standing("*", said({"events": [], "statements": []}))
    outcomes = await memory_engine.run_background()
    consolidated = next(o for o in outcomes if o.type == "consolidate")
    assert consolidated.status == "done" and f"supersedes fact {hamburg.id}" in consolidated.result
    facts = {f.text: f for f in store.items("default", kind="long_term")}
    berlin = facts["Ada lives in Berlin."]
    assert facts["Ada lives in Hamburg."].valid_to is not None
    assert facts["Ada lives in Hamburg."].superseded_by == berlin.id
    prompt = json.dumps(server.requests("/api/chat", caller="consolidate")[-1].body)
    assert f"[{hamburg.id}] Ada lives in Hamburg." in prompt

    item = await salient_turn(memory_engine, server, "Berlin is home now.", "Ada lives in Berlin.")
    server.script("consolidate", said({"action": "same", "fact_id": berlin.id, "fact": ""}))
    await memory_engine.run_background()
    linked = store.get("default", berlin.id)
    assert linked is not None and item in linked.derived_from
    assert len(store.items("default", kind="long_term")) == 2


async def test_malformed_or_impossible_extractions_are_recorded_as_failed(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    item = await salient_turn(memory_engine, server, "My sister is Lena.", FACT)
    server.script("consolidate", Reply(content="sure!"), Reply(content="{broken"))
    [outcome] = await memory_engine.run_background(limit=1)
    assert outcome.status == "failed" and "no usable JSON" in outcome.result
    outcomes = [
        r["outcome"]
        for r in memory_engine.db.query(
            "SELECT outcome FROM llm_calls WHERE event_id = ?", (outcome.event_id,)
        )
    ]
    assert outcomes == ["malformed", "malformed"]
    # The item is not lost: still retrievable as a short-term item.
    store = MemoryStore(memory_engine.db)
    current = store.get("default", item)
    assert current is not None and current.consolidated_into is None

    await salient_turn(memory_engine, server, "I like tea.", "Ada likes tea.")
    server.script("consolidate", said({"action": "update", "fact_id": 999, "fact": "x"}))
    server.standing("*", said({"events": [], "statements": []}))
    outcomes = await memory_engine.run_background()
    failed = [o for o in outcomes if o.type == "consolidate"]
    assert failed and "fact 999, which it was not shown" in failed[-1].result
    profile = [o for o in outcomes if o.type == "profile_adaptive"]
    assert profile[-1].status == "failed" and "no usable statement" in profile[-1].result


async def test_timeline_dates_are_resolved_against_the_message_time(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    item = await salient_turn(
        memory_engine, server, "My dentist appointment is tomorrow.", "Ada sees the dentist."
    )
    server.script("consolidate", said({"action": "new", "fact": "Ada sees the dentist."}))
    server.script("timeline", said({"events": [{"what": "Dentist", "when": "tomorrow"}]}))
    server.script("profile_adaptive", said({"statements": []}))
    await memory_engine.run_background(limit=3)  # consolidate, profile_adaptive, timeline
    [event] = MemoryStore(memory_engine.db).items("default", kind="event")
    turn = memory_engine.db.turn(1)
    assert turn is not None
    sent = datetime.fromisoformat(str(turn["started_at"])).date()
    assert event.happens_on == (sent + timedelta(days=1)).isoformat()
    assert event.text == "Dentist" and event.derived_from == [item]


def test_relative_dates_resolve_in_english_and_german() -> None:
    monday = datetime(2026, 11, 30, 10, 0)
    assert resolve_date("morgen", monday, "de") == date(2026, 12, 1)
    assert resolve_date("next Friday", monday, "en") == date(2026, 12, 4)
    assert resolve_date("nächsten Freitag", monday, "de") == date(2026, 12, 4)
    assert resolve_date("in two weeks", monday, "en") == date(2026, 12, 14)
    assert resolve_date("someday, maybe", monday, "en") is None


async def test_a_message_without_a_date_costs_no_timeline_call(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    await salient_turn(memory_engine, server, "I love my cat Miso.", "Ada loves her cat Miso.")
    server.standing("*", said({"action": "new", "fact": "Ada has a cat.", "statements": []}))
    outcomes = {o.type: o for o in await memory_engine.run_background()}
    assert outcomes["timeline"].status == "done"
    assert "no date expression" in outcomes["timeline"].result
    assert server.requests("/api/chat", caller="timeline") == []


async def test_a_date_the_model_misses_is_a_failure_not_nothing_to_remember(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    await salient_turn(memory_engine, server, "My exam is next Friday.", "Ada has an exam.")
    server.script("consolidate", said({"action": "new", "fact": "Ada has an exam."}))
    server.script("timeline", said({"events": []}))
    server.standing("*", said({"statements": []}))
    outcomes = {o.type: o for o in await memory_engine.run_background()}
    assert outcomes["timeline"].status == "failed"
    assert "dateparser found 1 date expression" in outcomes["timeline"].result
    assert "Friday" not in outcomes["timeline"].result  # a reason never quotes the message


async def test_the_profile_keeps_only_statements_with_sources_it_was_shown(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    item = await salient_turn(
        memory_engine, server, "Work is crushing me.", "Ada is stressed at work."
    )
    server.script("consolidate", said({"action": "new", "fact": "Ada is stressed at work."}))
    await memory_engine.run_background(limit=1)
    store = MemoryStore(memory_engine.db)
    [fact] = store.items("default", kind="long_term")
    server.script(
        "profile_adaptive",
        said(
            {
                "statements": [
                    {"text": "Stressed at work lately.", "sources": [fact.id]},
                    {"text": "Invented: loves opera.", "sources": [4242]},
                    {"text": "No source at all.", "sources": []},
                ]
            }
        ),
    )
    outcomes = await memory_engine.run_background()
    profile = next(o for o in outcomes if o.type == "profile_adaptive")
    assert profile.status == "done" and "2 without valid sources dropped" in profile.result
    adaptive = store.profile("default")["adaptive"]
    assert adaptive.text == "Stressed at work lately."
    # forget the source item: the statement built on it goes too
    store.forget("default", item)
    assert store.profile("default")["adaptive"].text == ""


async def test_a_job_run_again_after_a_crash_changes_nothing_twice(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    await salient_turn(memory_engine, server, "My sister is Lena.", FACT)
    server.standing("consolidate", said({"action": "new", "fact": FACT}))
    [first] = await memory_engine.run_background(limit=1)
    # as if the process had died after the commit but before anyone saw "done"
    memory_engine.events.mark(first.event_id, "running")
    [again] = await memory_engine.run_background(limit=1)
    assert again.event_id == first.event_id and again.status == "done"
    assert "already consolidated" in again.result
    assert len(MemoryStore(memory_engine.db).items("default", kind="long_term")) == 1


async def test_retrieval_reasons_are_in_the_turn_trace_and_the_fact_reaches_the_responder(
    memory_engine: Engine, server: OllamaTestServer
) -> None:
    await salient_turn(memory_engine, server, "My sister is Lena.", FACT)
    result = await memory_engine.run_turn("What is my sister called?")
    turn = memory_engine.db.turn(result.turn_id)
    assert turn is not None
    retrieval = json.loads(str(turn["trace_json"]))["retrieval"]
    assert len(retrieval) == 1 and "'sister'" in retrieval[0]["reason"]
    assert "Lena" not in json.dumps(retrieval)  # ids and reasons only: forget stays complete
    prompt = json.dumps(server.requests("/api/chat", caller="responder")[-1].body)
    assert FACT in prompt


async def test_embeddings_come_from_the_backend_and_rank_by_meaning(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MEMORY__EMBED_MODEL", "nomic-embed-text")
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        await salient_turn(engine, ollama_env, "My sister is Lena.", FACT)
        ollama_env.script("consolidate", said({"action": "new", "fact": FACT}))
        await engine.run_background(limit=1)
        stored = engine.db.query("SELECT memory_id, embedder FROM memory_vectors")
        assert [r["embedder"] for r in stored] == ["nomic-embed-text"]
        result = await engine.run_turn("Tell me about Lena's family")
        embeds = ollama_env.requests("/api/embed")
        # the new fact (consolidation job), then the second turn's message (enricher); the
        # first turn's message is not embedded: there was no item to compare it with yet
        assert [r.caller for r in embeds] == ["embed", "embed"]
        assert [r.body["input"] for r in embeds] == [[FACT], ["Tell me about Lena's family"]]
        chosen = [c.view() for c in result.state["context"].retrieval]
        assert chosen and "meaning: " in chosen[0].reason  # the signal that found it
        assert [c.caller for c in result.trace.calls][:2] == ["router", "embed"]
    finally:
        await engine.aclose()


async def test_a_job_runs_for_the_user_whose_turn_enqueued_it(
    memory_engine: Engine,
    server: OllamaTestServer,
    database_target: Path | str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVABERG_USER", "bob")
    bob = await Engine.open(load_settings().settings)
    try:
        item = await salient_turn(bob, server, "My sister is Lena.", "Bob's sister is Lena.")
    finally:
        await bob.aclose()
    server.script("consolidate", said({"action": "new", "fact": "Bob has a sister, Lena."}))
    [outcome] = await memory_engine.run_background(limit=1)  # a process of user "default"
    assert outcome.status == "done" and outcome.result.startswith("new fact")
    store = MemoryStore(memory_engine.db)
    [fact] = store.items("bob", kind="long_term")
    assert fact.derived_from == [item] and store.items("default") == []


async def test_a_german_setting_sends_german_job_prompts(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from novaberg.memory.job_prompts import job_prompts

    monkeypatch.setenv("NOVABERG_LANGUAGE", "de")
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__CORE_EVERY", "1")
    engine = await Engine.open(load_settings().settings)
    try:
        await salient_turn(
            engine, ollama_env, "Morgen habe ich einen Zahnarzttermin.", "Ada geht zum Zahnarzt."
        )
        ollama_env.script("consolidate", said({"action": "new", "fact": "Ada hat einen Termin."}))
        ollama_env.script("timeline", said({"events": [{"what": "Zahnarzt", "when": "morgen"}]}))
        ollama_env.standing("*", said({"statements": []}))
        await engine.run_background()
    finally:
        await engine.aclose()
    de = job_prompts("de")
    sent = {
        caller: ollama_env.requests("/api/chat", caller=caller)[0].body["messages"]
        for caller in ("consolidate", "timeline", "profile_adaptive", "profile_core")
    }
    assert sent["consolidate"][0]["content"] == de.consolidate
    assert sent["consolidate"][1]["content"].startswith("BEKANNTE FAKTEN:\n(keine)")
    assert "NEUER EINTRAG:\nAda geht zum Zahnarzt." in sent["consolidate"][1]["content"]
    assert sent["timeline"][0]["content"] == de.timeline
    assert sent["profile_adaptive"][0]["content"] == de.profile_adaptive
    assert sent["profile_core"][0]["content"] == de.profile_core
    assert sent["profile_core"][1]["content"].startswith("ERINNERUNGEN:\n")
    assert de.consolidate != job_prompts("en").consolidate
