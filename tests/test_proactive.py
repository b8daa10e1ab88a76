"""Nova writes first (issue 26): reminders asked for in conversation or by hand, resolved in the
user's zone (daylight saving included), sent once when due through the engine's turn service
as a turn of origin ``proactive``, with a controllable clock: an earlier reminder added later
fires first, a running turn goes first, a late one is dropped, quiet hours and the daily cap
hold for messages other than reminders, a judge's revise or nothing worth saying withholds
it, forget cancels it, a crashed sender's claim is taken again and sent once, a repeating one
keeps its wall time. Through the real engine and the Ollama test server, on SQLite and
PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.engine.service import TurnService
from novaberg.jobs import user_events
from novaberg.memory.store import MemoryStore
from novaberg.proactive import schedule
from novaberg.proactive.sender import send_due
from novaberg.proactive.when import When, next_after, resolve, wall_time
from novaberg.storage import deliveries
from novaberg.testing import OllamaTestServer, Reply

BERLIN = ZoneInfo("Europe/Berlin")
USER = "default"
PLAIN = Reply(content=json.dumps({"score": 0.1, "summary": ""}))


def route(reminder: dict[str, Any] | None = None) -> Reply:
    return Reply(
        content=json.dumps(
            {"intent": "request", "tone": "warm", "needs_check": False, "reminder": reminder}
        )
    )


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__JOBS", "false")
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "off")
    monkeypatch.setenv("NOVABERG_PROACTIVE__TIMEZONE", "Europe/Berlin")
    monkeypatch.setenv("NOVABERG_PROACTIVE__QUIET_HOURS", "")
    ollama_env.standing("responder", Reply(content="Hello there!"))
    ollama_env.standing("salience", PLAIN)
    ollama_env.standing("router", route())
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


def remind_at(engine: Engine, text: str, due: datetime, kind: str = "reminder") -> int:
    local = due.astimezone(BERLIN)
    with engine.db.transaction() as c:
        return schedule.schedule(
            c, USER, text, When(due.astimezone(UTC), local), cause="a test", kind=kind
        )


def status_of(engine: Engine, event_id: int) -> tuple[str, str]:
    found = schedule.get(engine.db, USER, event_id)
    assert found is not None
    return found.status, found.reason


def proactive_turns(engine: Engine) -> list[dict[str, Any]]:
    return engine.db.query(
        "SELECT t.id, t.conversation_id, t.user_text, t.trace_json, m.role, m.content "
        "FROM turns t LEFT JOIN messages m ON m.turn_id = t.id "
        "WHERE t.origin = 'proactive' ORDER BY t.id"
    )


# -- when ----------------------------------------------------------------------------------
def test_times_are_read_in_the_users_zone_across_a_daylight_saving_change() -> None:
    saturday = datetime(2026, 3, 28, 20, 0, tzinfo=BERLIN)  # the clocks go forward at 02:00
    cases = {
        "tomorrow at 9": datetime(2026, 3, 29, 9, 0, tzinfo=BERLIN),
        "morgen um 9": datetime(2026, 3, 29, 9, 0, tzinfo=BERLIN),
        "am Freitag um 18 Uhr": datetime(2026, 4, 3, 18, 0, tzinfo=BERLIN),
        "at 21:30": datetime(2026, 3, 28, 21, 30, tzinfo=BERLIN),
        "at 9": datetime(2026, 3, 29, 9, 0, tzinfo=BERLIN),  # the next 9 o'clock
        "in 2 hours": datetime(2026, 3, 28, 22, 0, tzinfo=BERLIN),
        "on 14 June": datetime(2026, 6, 14, 9, 0, tzinfo=BERLIN),  # a day alone: the morning
        "14. Juni um 7:15": datetime(2026, 6, 14, 7, 15, tzinfo=BERLIN),
        "tomorrow at 2:30": datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN),  # 02:30 does not exist
        "2026-06-02T09:00": datetime(2026, 6, 2, 9, 0, tzinfo=BERLIN),
    }
    for words, expected in cases.items():
        found = resolve(words, saturday, BERLIN)
        assert found is not None, words
        assert found.due == expected.astimezone(UTC), words
    assert resolve("tomorrow at 9", saturday, BERLIN).due.hour == 7  # type: ignore[union-attr]
    assert resolve("some day", saturday, BERLIN) is None
    assert resolve("2020-01-01T09:00", saturday, BERLIN) is None  # past: nothing to schedule
    weekly = resolve("every Saturday at 9", saturday, BERLIN)
    assert weekly is not None and weekly.repeat == "weekly:5"
    assert weekly.local == datetime(2026, 4, 4, 9, 0, tzinfo=BERLIN)  # today's 9 is past
    before = resolve("every Sunday at 9", datetime(2026, 3, 21, 12, tzinfo=BERLIN), BERLIN)
    assert before is not None
    after = next_after(before, BERLIN)
    assert after is not None
    assert (before.local.hour, after.local.hour) == (9, 9)  # the wall time is kept
    assert after.due - before.due == timedelta(days=7, hours=-1)  # the clocks moved


# -- in conversation -------------------------------------------------------------------------
async def test_a_reminder_asked_in_conversation_is_confirmed_with_its_time_and_scheduled_once(
    engine: Engine, server: OllamaTestServer
) -> None:
    asked = {"what": "call my mother", "when": "tomorrow at 9"}
    server.script("router", route(asked))
    done = await engine.run_turn("Remind me tomorrow at 9 to call my mother.")
    system = str(server.requests(caller="responder")[-1].body["messages"][0]["content"])
    tomorrow = datetime.now(BERLIN).date() + timedelta(days=1)
    assert f"{tomorrow.day} {tomorrow.strftime('%B')}" in system and "at 09:00" in system
    [made] = schedule.listing(engine.db, USER)
    assert (made.kind, made.text, made.cause) == (
        "reminder",
        "call my mother",
        f"asked in turn {done.turn_id}",
    )
    assert datetime.fromisoformat(made.local) == datetime.combine(
        tomorrow, time(9, 0), tzinfo=BERLIN
    )
    trace = json.loads(str(engine.db.turn(done.turn_id)["trace_json"]))  # type: ignore[index]
    assert trace["reminder"]["outcome"] == "scheduled"
    assert trace["reminder"]["event_id"] == made.id
    # a time the model made up (not in the message) schedules nothing
    server.script("router", route({"what": "call my mother", "when": "at 5"}))
    await engine.run_turn("Remind me to call my mother.")
    assert len(schedule.listing(engine.db, USER)) == 1


async def test_a_reminder_without_a_readable_time_is_asked_about_and_not_scheduled(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("router", route({"what": "buy flowers", "when": "sometime soon"}))
    await engine.run_turn("Remind me sometime soon to buy flowers.")
    system = str(server.requests(caller="responder")[-1].body["messages"][0]["content"])
    assert "could not tell when" in system and "nothing is scheduled" in system
    assert schedule.listing(engine.db, USER) == []


# -- sending ---------------------------------------------------------------------------------
async def test_a_due_reminder_is_sent_once_as_a_proactive_turn_and_delivered_once(
    engine: Engine, server: OllamaTestServer
) -> None:
    await engine.run_turn("Hi Nova")  # the conversation it will be sent into
    conversation = engine.db.latest_conversation(USER)
    now = datetime.now(UTC)
    made = remind_at(engine, "water the Quillbert fern", now + timedelta(minutes=30))
    service = TurnService(engine)
    assert await send_due(engine, service, at=now) == []  # not due yet
    server.script("responder", Reply(content="Time to water your Quillbert fern!"))
    [sent] = await send_due(engine, service, at=now + timedelta(minutes=31))
    assert sent.status == "sent" and status_of(engine, made)[0] == "sent"
    [turn] = proactive_turns(engine)
    assert (turn["role"], turn["content"]) == ("assistant", "Time to water your Quillbert fern!")
    assert turn["conversation_id"] == conversation and turn["id"] == sent.turn_id
    request = server.requests(caller="responder")[-1].body["messages"]
    assert "you write first, unasked" in request[0]["content"]
    assert "Quillbert fern" in request[-1]["content"]  # the task, not a message of the user's
    messages = engine.db.query("SELECT role FROM messages WHERE turn_id = ?", (sent.turn_id,))
    assert [m["role"] for m in messages] == ["assistant"]
    assert await send_due(engine, service, at=now + timedelta(minutes=40)) == []  # once
    # delivered once: to the next response of that conversation, and never again
    first = deliveries.claim_waiting(engine.db, conversation, "openai", before_turn=10**9)
    assert [f.text for f in first] == ["Time to water your Quillbert fern!"]
    assert deliveries.claim_waiting(engine.db, conversation, "openai", before_turn=10**9) == []
    logged = [e for e in user_events.after(engine.db, USER, 0) if e.kind == "followup"]
    assert [(e.data or {}).get("origin") for e in logged] == ["proactive"]  # /api/events


async def test_an_earlier_reminder_added_later_fires_first_and_the_other_still_fires(
    engine: Engine, server: OllamaTestServer
) -> None:
    now = datetime.now(UTC)
    later = remind_at(engine, "the later one", now + timedelta(hours=2))
    sooner = remind_at(engine, "the sooner one", now + timedelta(hours=1))
    service = TurnService(engine)
    [first] = await send_due(engine, service, at=now + timedelta(minutes=90))
    assert first.event_id == sooner and status_of(engine, later)[0] == "scheduled"
    [second] = await send_due(engine, service, at=now + timedelta(minutes=150))
    assert second.event_id == later and second.status == "sent"


async def test_nothing_worth_saying_or_a_judges_revise_withholds_the_message(
    engine: Engine, server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    quiet = remind_at(engine, "nothing to say", now - timedelta(minutes=1))
    server.script("responder", Reply(content="NOTHING"))
    [dropped] = await send_due(engine, TurnService(engine), at=now)
    assert dropped.status == "dropped"
    assert status_of(engine, quiet) == ("dropped", "the model found nothing worth saying")
    [turn] = proactive_turns(engine)
    assert turn["role"] is None  # stored as a turn, but no message: NOTHING reached no one
    engine.settings.tribunal = engine.settings.tribunal.model_copy(
        update={"judges": ["persona"], "max_corrections": 0}
    )
    server.standing("judge_persona", Reply(content='{"vote": "revise", "reason": "intrusive"}'))
    revised = remind_at(engine, "a pushy one", now - timedelta(minutes=1))
    [out] = await send_due(engine, TurnService(engine), at=now)
    assert out.status == "dropped"
    assert status_of(engine, revised)[1] == "a judge still asked for a revision after the corrector"
    assert [t["role"] for t in proactive_turns(engine)] == [None, None]


async def test_a_running_turn_goes_first_and_a_message_too_late_is_dropped(
    engine: Engine, server: OllamaTestServer
) -> None:
    now = datetime.now(UTC)
    waiting = remind_at(engine, "after the turn", now - timedelta(minutes=1))
    with engine.db.transaction() as c:  # another user's, due after it: not held up by it
        local = (now - timedelta(seconds=30)).astimezone(BERLIN)
        others = schedule.schedule(c, "bob", "bob's", When(local, local), cause="a test")
    conversation = engine.db.new_conversation(USER)
    running = engine.db.start_turn(conversation, "a long question", "user", None)
    service = TurnService(engine)
    outcomes = {o.event_id: o.status for o in await send_due(engine, service, at=now)}
    assert outcomes == {waiting: "waiting", others: "sent"}
    assert status_of(engine, waiting)[0] == "scheduled"
    engine.db.end_turn_unfinished(running, "aborted", "test", [])
    sent: list[Any] = []
    for _ in range(50):  # the wait holds it for a second: the next sweep's
        if sent := await send_due(engine, service, at=now):
            break
        await asyncio.sleep(0.1)
    [out] = sent
    assert out.event_id == waiting and out.status == "sent"
    stale = remind_at(engine, "long ago", now - timedelta(hours=13))  # max_late_h is 12
    [out] = await send_due(engine, service, at=now)
    assert out.status == "dropped" and "proactive.max_late_h" in status_of(engine, stale)[1]


async def test_quiet_hours_move_and_the_daily_cap_drops_what_is_not_a_reminder(
    engine: Engine, server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = datetime.now(UTC)
    local = now.astimezone(BERLIN)
    start, end = (
        (local - timedelta(hours=1)).strftime("%H:%M"),
        (local + timedelta(hours=1)).strftime("%H:%M"),
    )
    settings = engine.settings.proactive
    engine.settings.proactive = settings.model_copy(
        update={"quiet_hours": f"{start}-{end}", "max_per_day": 1}
    )
    day_event = remind_at(engine, "the concert", now - timedelta(minutes=1), kind="event")
    asked = remind_at(engine, "asked for", now - timedelta(minutes=1))
    service = TurnService(engine)
    outcomes = {o.event_id: o for o in await send_due(engine, service, at=now)}
    assert outcomes[asked].status == "sent"  # a reminder the user asked for: at its time
    assert outcomes[day_event].status == "waiting"
    moved = schedule.get(engine.db, USER, day_event)
    assert moved is not None and moved.status == "scheduled"
    assert datetime.fromisoformat(moved.due_at) > now + timedelta(minutes=50)  # to their end
    engine.settings.proactive = settings.model_copy(update={"max_per_day": 1, "quiet_hours": ""})
    first = remind_at(engine, "first event", now - timedelta(minutes=1), kind="event")
    second = remind_at(engine, "second event", now - timedelta(minutes=1), kind="event")
    statuses = {o.event_id: o.status for o in await send_due(engine, service, at=now)}
    assert sorted(statuses[e] for e in (first, second)) == ["dropped", "sent"]  # cap 1
    [dropped] = [e for e in (first, second) if statuses[e] == "dropped"]
    assert "proactive.max_per_day" in status_of(engine, dropped)[1]


async def test_forget_cancels_the_reminder_its_turn_asked_for(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("router", route({"what": "call Zebulona", "when": "tomorrow at 9"}))
    server.script("salience", Reply(content=json.dumps({"score": 0.9, "summary": "Zebulona."})))
    done = await engine.run_turn("Remind me tomorrow at 9 to call Zebulona.")
    assert done.memory_id is not None
    [made] = schedule.listing(engine.db, USER)
    MemoryStore(engine.db).forget(USER, done.memory_id)
    found = schedule.get(engine.db, USER, made.id)
    assert found is not None and found.status == "cancelled"
    assert found.reason == "its cause was forgotten" and "Zebulona" not in found.text
    tomorrow = datetime.now(UTC) + timedelta(days=2)
    assert await send_due(engine, TurnService(engine), at=tomorrow) == []


async def test_a_claim_whose_process_died_is_taken_again_and_sent_once(
    engine: Engine, server: OllamaTestServer
) -> None:
    now = datetime.now(UTC)
    made = remind_at(engine, "after a crash", now - timedelta(minutes=1))
    dead = 2**22 + 12345  # no such process
    while True:
        try:
            os.kill(dead, 0)
            dead += 1
        except ProcessLookupError:
            break
    host = engine.events.me.rsplit(":", 1)[0]
    engine.db.conn.execute(  # claimed by a sender killed before its turn was stored
        "UPDATE events SET status = 'running', claimed_by = ?, claimed_until = ? WHERE id = ?",
        (f"{host}:{dead}", schedule.stamp(now + timedelta(hours=1)), made),
    )
    outcomes = await send_due(engine, TurnService(engine), at=now)
    assert [o.status for o in outcomes] == ["sent"]
    assert len(proactive_turns(engine)) == 1
    assert await send_due(engine, TurnService(engine), at=now) == []


async def test_a_repeating_reminder_schedules_its_next_at_the_same_wall_time(
    engine: Engine, server: OllamaTestServer
) -> None:
    now = datetime.now(UTC)
    local = now.astimezone(BERLIN) - timedelta(minutes=1)
    first = When(local.astimezone(UTC), local, "daily")
    with engine.db.transaction() as c:
        made = schedule.schedule(c, USER, "stretch", first, cause="a test")
    [out] = await send_due(engine, TurnService(engine), at=now)
    assert out.status == "sent"
    [upcoming] = schedule.listing(engine.db, USER)
    clock = local.time().replace(tzinfo=None, second=0, microsecond=0)
    expected = wall_time(local.date() + timedelta(days=1), clock, BERLIN)
    assert upcoming.id != made and datetime.fromisoformat(upcoming.local) == expected
    assert upcoming.repeat == "daily" and upcoming.text == "stretch"


def test_switching_a_kind_off_is_remembered_per_user(engine: Engine) -> None:
    schedule.switch(engine.db, USER, False, "event")
    assert schedule.switches(engine.db, USER) == {
        "reminder": True,
        "event": False,
        "checkin": True,
        "followup": True,
    }
    assert schedule.switches(engine.db, "someone else")["event"] is True
    schedule.switch(engine.db, USER, True)
    assert all(schedule.switches(engine.db, USER).values())


def test_the_command_sets_lists_and_cancels_a_reminder_as_the_contract_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.test_cli import run

    monkeypatch.setenv("NOVABERG_PROACTIVE__TIMEZONE", "Europe/Berlin")
    made = run("proactive", "remind", "call Oswinde", "--at", "tomorrow at 9", "--json")
    assert made.returncode == 0, made.stderr
    out = json.loads(made.stdout)
    assert set(out) == {"id", "due_at"}
    tomorrow = datetime.now(BERLIN).date() + timedelta(days=1)
    due = datetime.combine(tomorrow, time(9, 0), tzinfo=BERLIN).astimezone(UTC)
    assert datetime.fromisoformat(out["due_at"]) == due
    listed = json.loads(run("proactive", "list", "--json").stdout)
    [row] = listed["scheduled"]
    assert {k: row[k] for k in ("id", "kind", "status", "cause")} == {
        "id": out["id"],
        "kind": "reminder",
        "status": "scheduled",
        "cause": "novaberg proactive remind",
    }
    assert run("proactive", "cancel", str(out["id"])).returncode == 0
    assert json.loads(run("proactive", "list", "--json").stdout)["scheduled"] == []
    bad = run("proactive", "remind", "x", "--at", "whenever")
    assert bad.returncode == 2 and "Cannot tell a time" in " ".join(bad.stderr.split())


def test_chat_shows_what_came_due_when_it_starts_and_what_arrives_while_open_once(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys
    import time as clock

    from novaberg.testing import Match

    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "off")
    monkeypatch.setenv("NOVABERG_SERVER__EVENTS_POLL_S", "0.2")
    ollama_env.standing("router", route())
    for word, reply in (("Oswinde", "Call Oswinde now!"), ("Pelagrin", "Pelagrin time!")):
        ollama_env.script("responder", Reply(content=reply), match=Match(contains=word))
    delivered = "SELECT d.turn_id FROM followup_deliveries d JOIN turns t ON t.id = d.turn_id"
    with asyncio.Runner() as runner:
        engine = runner.run(Engine.open(load_settings().settings))
        try:
            remind_at(engine, "call Oswinde", datetime.now(UTC) - timedelta(minutes=5))
            chat = subprocess.Popen(
                [sys.executable, "-m", "novaberg", "chat"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(os.environ),
            )
            try:
                deadline = clock.monotonic() + 60
                while not engine.db.query(delivered):  # sent and shown as the chat started
                    assert chat.poll() is None and clock.monotonic() < deadline
                    clock.sleep(0.05)
                made = remind_at(engine, "meet Pelagrin", datetime.now(UTC))
                [sent] = runner.run(send_due(engine, TurnService(engine)))  # as a worker would
                assert sent.event_id == made and sent.status == "sent"
                while len(engine.db.query(delivered)) < 2:  # the chat's watcher took it
                    assert chat.poll() is None and clock.monotonic() < deadline
                    clock.sleep(0.05)
                out, err = chat.communicate("/exit\n", timeout=60)
            finally:
                if chat.poll() is None:
                    chat.kill()
        finally:
            runner.run(engine.aclose())
    assert chat.returncode == 0, err
    assert out.count("Call Oswinde now!") == 1 and out.count("Pelagrin time!") == 1
    again = subprocess.run(
        [sys.executable, "-m", "novaberg", "chat"],
        input="/exit\n",
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=60,
    )
    assert "Oswinde" not in again.stdout and "Pelagrin" not in again.stdout  # shown once


# -- the day's events, and the records -------------------------------------------------------
@pytest.fixture
async def jobs_engine(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "off")
    monkeypatch.setenv("NOVABERG_PROACTIVE__TIMEZONE", "Europe/Berlin")
    ollama_env.standing("router", route())
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


async def test_a_dated_event_gets_a_message_on_its_morning_and_an_important_one_the_day_before(
    jobs_engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", Reply(content=json.dumps({"score": 0.9, "summary": "A concert."})))
    server.script("consolidate", Reply(content=json.dumps({"action": "new", "fact": "Concert."})))
    server.script(
        "timeline",
        Reply(content=json.dumps({"events": [{"what": "Concert", "when": "in 3 days"}]})),
    )
    done = await jobs_engine.run_turn("My concert is in 3 days, I'm so nervous!")
    await jobs_engine.run_background()
    [event] = MemoryStore(jobs_engine.db).items(USER, kind="event")
    day = datetime.fromisoformat(f"{event.happens_on}T00:00").date()
    made = schedule.listing(jobs_engine.db, USER)
    assert [(m.kind, m.text) for m in made] == [("event", "Concert"), ("event", "Concert")]
    assert [datetime.fromisoformat(m.local) for m in made] == [
        datetime.combine(day - timedelta(days=1), time(9, 0), tzinfo=BERLIN),
        datetime.combine(day, time(9, 0), tzinfo=BERLIN),
    ]
    assert made[0].cause == f"the timeline: memory {event.id} on {event.happens_on}"
    assert made[0].turn_id == done.turn_id  # forget of that turn cancels them
    day_before = datetime.fromisoformat(made[0].due_at) + timedelta(minutes=1)
    server.script("responder", Reply(content="Your concert is tomorrow. You'll be great!"))
    [sent] = await send_due(jobs_engine, TurnService(jobs_engine), at=day_before)
    assert sent.status == "sent"
    task = server.requests(caller="responder")[-1].body["messages"][-1]["content"]
    assert "tomorrow is the day of" in task and "Concert" in task


async def test_stats_count_proactive_messages_and_why_they_were_dropped(
    engine: Engine, server: OllamaTestServer
) -> None:
    from novaberg.stats import collect

    now = datetime.now(UTC)
    remind_at(engine, "one to send", now - timedelta(minutes=2))
    remind_at(engine, "one with nothing to say", now - timedelta(minutes=1))
    remind_at(engine, "one for later", now + timedelta(days=1))
    server.script("responder", Reply(content="Here it is."), Reply(content="NOTHING"))
    await send_due(engine, TurnService(engine), at=now)
    figures = collect(engine.db, timedelta(days=1)).contract_json()["proactive"]
    assert figures == {
        "sent": 1,
        "dropped": 1,
        "scheduled": 1,
        "dropped_why": {"nothing_to_say": 1},
    }
    assert "proactive" not in collect(engine.db, timedelta(days=1)).contract_json()["jobs"]


async def _concern(engine: Engine, server: OllamaTestServer, text: str, concern: str) -> int:
    """A salient turn whose adaptive profile job names ``concern`` as an open one."""
    server.script("salience", Reply(content=json.dumps({"score": 0.8, "summary": text})))
    server.script("consolidate", Reply(content="not json"), Reply(content="still not"))
    done = await engine.run_turn(text)
    assert done.memory_id is not None
    statement = {"text": concern, "sources": [done.memory_id], "concern": True}
    server.script("profile_adaptive", Reply(content=json.dumps({"statements": [statement]})))
    await engine.run_background()
    return done.memory_id


async def test_an_open_concern_gets_one_check_in_days_later_only_while_it_is_current(
    jobs_engine: Engine, server: OllamaTestServer
) -> None:
    await _concern(jobs_engine, server, "I dread the interview.", "Dreads the job interview.")
    [checkin] = schedule.listing(jobs_engine.db, USER)
    assert (checkin.kind, checkin.text) == ("checkin", "Dreads the job interview.")
    in_three = datetime.now(BERLIN).date() + timedelta(days=3)  # proactive.checkin_days
    assert datetime.fromisoformat(checkin.local) == datetime.combine(
        in_three, time(9, 0), tzinfo=BERLIN
    )
    await _concern(jobs_engine, server, "Still dreading it.", "dreads the job  interview.")
    assert len(schedule.listing(jobs_engine.db, USER)) == 1  # the same concern: once
    due = datetime.fromisoformat(checkin.due_at) + timedelta(minutes=1)
    server.script("responder", Reply(content="How did the interview go?"))
    [sent] = await send_due(jobs_engine, TurnService(jobs_engine), at=due)
    assert sent.status == "sent"
    task = server.requests(caller="responder")[-1].body["messages"][-1]["content"]
    assert "a few days ago" in task and "Dreads the job interview." in task
    # a concern that left the profile is not asked about
    await _concern(jobs_engine, server, "My exam worries me.", "Worried about the exam.")
    [exam] = schedule.listing(jobs_engine.db, USER)
    MemoryStore(jobs_engine.db).set_profile(USER, "adaptive", [])
    later = datetime.fromisoformat(exam.due_at) + timedelta(minutes=1)
    [dropped] = await send_due(jobs_engine, TurnService(jobs_engine), at=later)
    assert dropped.status == "dropped"
    assert status_of(jobs_engine, exam.id)[1] == "the concern is no longer in the adaptive profile"


async def test_forgetting_what_a_concern_rests_on_cancels_its_check_in_and_erases_its_words(
    jobs_engine: Engine, server: OllamaTestServer
) -> None:
    memory = await _concern(jobs_engine, server, "Quorvath worries me.", "Worried about Quorvath.")
    [checkin] = schedule.listing(jobs_engine.db, USER)
    MemoryStore(jobs_engine.db).forget(USER, memory)
    found = schedule.get(jobs_engine.db, USER, checkin.id)
    assert found is not None and found.status == "cancelled"
    rows = jobs_engine.db.query("SELECT payload, result FROM events WHERE type = 'proactive'")
    assert not any("Quorvath" in str(r["payload"]) + str(r["result"]) for r in rows)


async def test_an_event_told_again_or_corrected_moves_its_message_and_a_retracted_one_is_dropped(
    jobs_engine: Engine, server: OllamaTestServer
) -> None:
    async def tell(message: str, when: str) -> None:
        server.script("salience", Reply(content=json.dumps({"score": 0.7, "summary": message})))
        server.script("consolidate", Reply(content=json.dumps({"action": "new", "fact": "."})))
        server.script(
            "timeline", Reply(content=json.dumps({"events": [{"what": "Concert", "when": when}]}))
        )
        await jobs_engine.run_turn(message)
        await jobs_engine.run_background()

    def scheduled() -> list[tuple[int, str, date]]:
        return [
            (m.id, m.cause, datetime.fromisoformat(m.local).date())
            for m in schedule.listing(jobs_engine.db, USER)
        ]

    today = datetime.now(BERLIN).date()
    store = MemoryStore(jobs_engine.db)
    await tell("My concert is in 3 days.", "in 3 days")
    [(first, _, day)] = scheduled()
    assert day == today + timedelta(days=3)
    await tell("The concert moved, it is in 5 days now.", "in 5 days")
    [current] = store.items(USER, kind="event", current_only=True)
    assert scheduled() == [
        (
            first,
            f"the timeline: memory {current.id} on {current.happens_on}",
            today + timedelta(days=5),
        )
    ]  # the same message, moved with its event; the old event superseded by the new one
    # corrected by hand to another day: the message follows the new version
    later = today + timedelta(days=8)
    fixed = store.correct(USER, current.id, f"Concert on {later.day} {later:%B %Y}")
    assert fixed is not None and fixed.happens_on == later.isoformat()
    [(moved, cause, day)] = scheduled()
    assert (moved, day) == (first, later) and f"memory {fixed.id}" in cause
    # retracted: not sent
    store.retract(USER, fixed.id)
    due = datetime.fromisoformat(schedule.listing(jobs_engine.db, USER)[0].due_at)
    [dropped] = await send_due(jobs_engine, TurnService(jobs_engine), at=due + timedelta(minutes=1))
    assert dropped.status == "dropped"
    assert "no longer on the timeline" in status_of(jobs_engine, first)[1]


async def test_two_users_messages_due_together_are_written_at_once_not_one_after_the_other(
    engine: Engine, server: OllamaTestServer
) -> None:
    now = datetime.now(UTC)
    with engine.db.transaction() as c:
        for user in ("wen", "xia"):
            when = When(now - timedelta(minutes=1), now.astimezone(BERLIN))
            schedule.schedule(c, user, "the post", when, cause="a test")
    slow = Reply(content="Your reminder.", delay_s=0.8)
    server.script("responder", slow, slow)
    outcomes = await send_due(engine, TurnService(engine), at=now)
    assert [o.status for o in outcomes] == ["sent", "sent"]
    spans = engine.db.query(
        "SELECT started_at, finished_at FROM turns WHERE origin = 'proactive' ORDER BY id"
    )
    first, second = spans
    assert second["started_at"] < first["finished_at"]  # the second did not wait for the first


async def test_a_proactive_turns_model_calls_wait_behind_a_typed_turns(engine: Engine) -> None:
    from novaberg.queue import BACKGROUND, FOREGROUND

    seen: list[tuple[str, int]] = []
    submit = engine.queue.submit

    async def recorded(request: Any, **kw: Any) -> Any:
        seen.append((request.caller, kw["priority"]))
        return await submit(request, **kw)

    engine.queue.submit = recorded  # type: ignore[method-assign]
    now = datetime.now(UTC)
    remind_at(engine, "the post", now - timedelta(minutes=1))
    [sent] = await send_due(engine, TurnService(engine), at=now)
    assert sent.status == "sent" and seen
    assert {priority for _, priority in seen} == {BACKGROUND}, seen
    seen.clear()
    await engine.run_turn("Hello!")
    assert {priority for _, priority in seen} == {FOREGROUND}, seen
