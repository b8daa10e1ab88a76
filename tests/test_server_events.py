"""Streaming and events: ``POST /api/turns?stream=true``, ``GET /api/events`` and follow-ups
on ``/v1`` (delivered in time, else at the start of the next response; never lost, never
twice), against a real ``novaberg serve`` process over the shipped Ollama-protocol test
server; server-sent events read from the raw httpx stream. The event log and the delivery
records on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.jobs import user_events
from novaberg.storage import deliveries
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from novaberg.trace_document import TraceDocument
from tests.conftest import CONTRACT_KEYS
from tests.server_helpers import Nova, running_nova, wait_for

FOLLOWUP_WAIT_S = 1.5
SLOW_S = 3.5  # longer than FOLLOWUP_WAIT_S: the follow-up misses its response
SEPARATOR = "\n\n---\n\n"
CONVERSATION = "X-Novaberg-Conversation-Id"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nova(
    request: pytest.FixtureRequest,
    ollama_server: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Nova]:
    """One server per database: the event log's ordering and the delivery claims are SQL."""
    home = tmp_path_factory.mktemp(f"serve-events-{request.param}") / "home"
    env = {
        "NOVABERG_SERVER__FOLLOWUP_WAIT_S": str(FOLLOWUP_WAIT_S),
        "NOVABERG_LOOP_GUARD": "1",  # a database call on the server's event loop raises
    }
    server_url = database = None
    if request.param == "postgres":
        server_url = request.getfixturevalue("postgres_server")
        database = create_database(server_url)
    try:
        with running_nova(ollama_server, home, extra_env=env, database=database) as started:
            yield started
    finally:
        if server_url is not None and database is not None:
            drop_database(server_url, database)


@dataclass
class Sse:
    id: int | None
    event: str
    data: Any


def parse(lines: Iterator[str]) -> Iterator[Sse]:
    """Server-sent events from raw lines (comments skipped)."""
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "event" in fields:
                event_id = int(fields["id"]) if "id" in fields else None
                yield Sse(event_id, fields["event"], json.loads(fields.get("data", "null")))
            fields = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value.removeprefix(" ")


@contextmanager
def event_stream(
    nova: Nova, user: str = "ada", *, last_id: int | None = None, after: int | None = None
) -> Iterator[Iterator[Sse]]:
    """``GET /api/events`` open (its resume point is fixed once this returns)."""
    headers = nova.auth(user)
    if last_id is not None:
        headers["Last-Event-ID"] = str(last_id)
    params = {} if after is None else {"after": after}
    with httpx.stream(
        "GET", f"{nova.url}/api/events", headers=headers, params=params, timeout=30
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield parse(response.iter_lines())


def until(events: Iterator[Sse], done: Any) -> list[Sse]:
    """Events read until one for which ``done(event)`` holds (included)."""
    seen = []
    for event in events:
        seen.append(event)
        if done(event):
            return seen
    pytest.fail(f"the stream ended before the awaited event; got {seen}")


def followup_of(turn_id: int) -> Any:
    return lambda e: e.event == "followup" and e.data["turn_id"] == turn_id


def last_resort(
    server: OllamaTestServer, followup: str, delay_s: float = 0.0, answer_delay_s: float = 0.0
) -> None:
    """The next turn ends in the thinker's last resort (prose twice): its draft stays with a
    promise (after ``answer_delay_s``), and a second pass answers ``followup`` (after
    ``delay_s``)."""
    server.standing(
        "router",
        Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True})),
    )
    server.script(
        "responder",
        Reply(content="Draft answer.", delay_s=answer_delay_s),
        Reply(content=followup, delay_s=delay_s),
    )
    server.script("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    server.script("thinker_nachfass", Reply(content="prose"), Reply(content="more prose"))


def post_turn(nova: Nova, message: str, user: str = "ada", **extra: Any) -> dict[str, Any]:
    response = httpx.post(
        f"{nova.url}/api/turns",
        headers=nova.auth(user),
        json={"message": message, **extra},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def stream_turn(nova: Nova, body: dict[str, Any], user: str = "ada") -> list[Sse]:
    with httpx.stream(
        "POST",
        f"{nova.url}/api/turns",
        params={"stream": "true"},
        headers=nova.auth(user),
        json=body,
        timeout=60,
    ) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        return list(parse(response.iter_lines()))


def log_ids(nova: Nova, user: str) -> list[int]:
    db = nova.db()
    try:
        rows = db.query("SELECT id FROM user_events WHERE user_id = ? ORDER BY id", (user,))
    finally:
        db.close()
    return [int(r["id"]) for r in rows]


def test_a_streamed_turn_sends_its_events_in_order(nova: Nova, server: OllamaTestServer) -> None:
    last_resort(server, "A second look, in time.")
    events = stream_turn(nova, {"message": "check this"})
    names = [e.event for e in events]
    assert names[0] == "start" and names[-1] == "done"
    first_token, reply_at = names.index("token"), names.index("reply")
    assert set(names[1:first_token]) == {"progress"}
    assert set(names[first_token:reply_at]) == {"token"}
    assert names[reply_at + 1 :] == ["followup", "done"]
    start, done = events[0].data, events[-1].data
    turn_id = start["turn_id"]
    assert set(done) == CONTRACT_KEYS and done["turn_id"] == turn_id
    assert start["conversation_id"] == done["conversation_id"]
    nodes = [e.data["node"] for e in events if e.event == "progress"]
    assert {"router", "responder", "thinker"} <= set(nodes)
    assert all(e.data["turn_id"] == turn_id for e in events if e.event == "progress")
    streamed = "".join(e.data["text"] for e in events if e.event == "token")
    assert streamed == events[reply_at].data["text"] == done["reply"]
    assert streamed.startswith("Draft answer.")  # the kept draft, with the promise
    assert events[reply_at].data["turn_id"] == turn_id
    followup = events[reply_at + 1].data
    assert followup["text"] == "A second look, in time."
    assert followup["parent_turn_id"] == turn_id
    assert done["followups"] == [
        {
            "reply": "A second look, in time.",
            "origin": "self_trigger",
            "turn_id": followup["turn_id"],
        }
    ]
    stored = httpx.get(f"{nova.url}/api/turns/{turn_id}", headers=nova.auth(), timeout=30)
    assert stored.json()["reply"] == done["reply"]


def test_a_streamed_turns_failure_is_an_error_event_and_bad_input_a_plain_error(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.standing("responder", Reply(status=400, error="the model refused"))
    events = stream_turn(nova, {"message": "fail please"})
    assert events[0].event == "start" and events[-1].event == "error"
    assert events[-1].data == {"detail": "The model backend gave no usable answer.", "status": 502}
    assert "token" not in [e.event for e in events]
    for body, status in (
        ({"message": "   "}, 400),
        ({"message": "hi", "conversation_id": 10**9}, 404),
    ):
        response = httpx.post(
            f"{nova.url}/api/turns",
            params={"stream": "true"},
            headers=nova.auth(),
            json=body,
            timeout=30,
        )
        assert response.status_code == status and set(response.json()) == {"detail"}


def test_the_tribunals_rejected_draft_never_streams(nova: Nova, server: OllamaTestServer) -> None:
    server.script("responder", Reply(content="Draft with a problem."))
    server.script(
        "judge_persona",
        Reply(content=json.dumps({"vote": "revise", "reason": "Not like Nova."})),
        Reply(content=json.dumps({"vote": "ok", "reason": "fine"})),
    )
    server.script("corrector", Reply(content="A warmer, corrected answer."))
    events = stream_turn(nova, {"message": "Hallo Nova"})
    tokens = "".join(e.data["text"] for e in events if e.event == "token")
    assert tokens == "A warmer, corrected answer." == events[-1].data["reply"]
    assert events[-1].data["tribunal"]["corrections"] == 1
    assert "Draft with a problem" not in json.dumps([e.data for e in events[:-1]])


def test_a_client_that_leaves_after_the_answer_leaves_the_turn_to_finish_with_its_follow_up(
    nova: Nova, server: OllamaTestServer
) -> None:
    last_resort(server, "Finished without you.", delay_s=1.0)
    with event_stream(nova, "eve") as events:
        with httpx.stream(
            "POST",
            f"{nova.url}/api/turns",
            params={"stream": "true"},
            headers=nova.auth("eve"),
            json={"message": "I will not wait"},
            timeout=60,
        ) as response:
            seen = until(parse(response.iter_lines()), lambda e: e.event == "reply")
        start = seen[0]
        assert start.event == "start"  # gone after the answer, before the follow-up (1 s)
        [followup] = [
            e for e in until(events, lambda e: e.event == "followup") if e.event == "followup"
        ]
    turn_id = start.data["turn_id"]
    assert followup.data["parent_turn_id"] == turn_id
    assert followup.data["text"] == "Finished without you."
    stored = httpx.get(f"{nova.url}/api/turns/{turn_id}", headers=nova.auth("eve"), timeout=30)
    assert stored.status_code == 200 and stored.json()["reply"].startswith("Draft answer.")
    db = nova.db()
    try:
        delivered = db.query(
            "SELECT * FROM followup_deliveries WHERE turn_id = ?", (followup.data["turn_id"],)
        )
    finally:
        db.close()
    assert delivered == []  # no response showed it: the next /v1 response will


def test_a_client_that_leaves_before_the_answer_aborts_the_turn(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Nobody reads this.", delay_s=30))
    with httpx.stream(
        "POST",
        f"{nova.url}/api/turns",
        params={"stream": "true"},
        headers=nova.auth("eve"),
        json={"message": "Never mind"},
        timeout=60,
    ) as response:
        lines = response.iter_lines()
        start = next(parse(lines))
        wait_for(lambda: bool(server.requests(caller="responder")), "the responder call")
    turn_id = start.data["turn_id"]

    def status() -> str:
        db = nova.db()
        try:
            turn = db.turn(turn_id)
        finally:
            db.close()
        return str(turn["status"]) if turn else ""

    wait_for(lambda: status() == "aborted", "the turn marked aborted")  # not after 30 s
    stored = httpx.get(f"{nova.url}/api/turns/{turn_id}", headers=nova.auth("eve"), timeout=30)
    assert stored.status_code == 409 and "aborted" in stored.json()["detail"]
    db = nova.db()
    try:
        kept = db.query("SELECT role FROM messages WHERE turn_id = ?", (turn_id,))
        why = db.turn(turn_id)
    finally:
        db.close()
    assert kept == [] and why is not None and "went away" in why["error"]
    # the conversation is free at once for the next message
    server.reset()
    server.script("responder", Reply(content="Here now."))
    nxt = post_turn(nova, "Back again", "eve", conversation_id=start.data["conversation_id"])
    assert nxt["reply"] == "Here now."


def test_a_follow_up_arrives_on_api_events_and_only_for_its_user(
    nova: Nova, server: OllamaTestServer
) -> None:
    before = log_ids(nova, "ada")
    with event_stream(nova, "ada") as events, ThreadPoolExecutor(1) as pool:
        last_resort(server, "Second look for Ada.")
        posted = pool.submit(post_turn, nova, "a question for Nova")
        seen = until(events, lambda e: e.event == "followup")
        turn = posted.result()
    [followup] = [e for e in seen if e.event == "followup"]
    assert followup.data["text"] == "Second look for Ada."
    assert followup.data["parent_turn_id"] == turn["turn_id"]
    assert followup.data["conversation_id"] == turn["conversation_id"]
    assert followup.data["turn_id"] == turn["followups"][0]["turn_id"]
    assert all(e.id is not None and e.id > max(before, default=0) for e in seen)  # only new
    # Eve's own follow-up comes after Ada's; her whole log from the start has none of Ada's.
    server.reset()
    last_resort(server, "Second look for Eve.")
    eve_turn = post_turn(nova, "a question from Eve", "eve")
    with event_stream(nova, "eve", after=0) as events:
        eves = until(events, followup_of(eve_turn["followups"][0]["turn_id"]))
    assert "Second look for Ada." not in json.dumps([e.data for e in eves])
    db = nova.db()
    try:
        for event in eves:
            if event.event == "followup":
                owner = db.conversation_user(event.data["conversation_id"])
            else:
                row = db.one(
                    "SELECT conversation_id FROM events WHERE id = ?", (event.data["event_id"],)
                )
                assert row is not None
                owner = db.conversation_user(int(row["conversation_id"]))
            assert owner == "eve"
    finally:
        db.close()


def test_an_event_another_process_wrote_arrives_through_the_poll(nova: Nova) -> None:
    """Written by this test process into the server's database, as a ``novaberg worker`` or
    a second ``serve`` would: no in-process wake-up, the stream's poll finds it."""
    with event_stream(nova, "ada") as events:
        db = nova.db()
        try:
            _, parent, second = _followup_turn(db, "ada", "From another process.")
        finally:
            db.close()
        began = time.monotonic()
        [event] = [e for e in until(events, followup_of(second)) if e.event == "followup"]
        took = time.monotonic() - began
    assert event.data["text"] == "From another process." and event.data["parent_turn_id"] == parent
    assert took < 2.0 + 1.5  # server.events_poll_s (2 s) and some slack


def test_reconnecting_with_last_event_id_gets_exactly_the_missed_events(
    nova: Nova, server: OllamaTestServer
) -> None:
    for n in range(2):
        server.reset()
        last_resort(server, f"Follow-up number {n}.")
        post_turn(nova, f"question {n}", "bob")
    ids = log_ids(nova, "bob")
    assert len(ids) >= 2
    with event_stream(nova, "bob", after=0) as events:
        everything = until(events, lambda e: e.id == ids[-1])
    assert [e.id for e in everything] == ids  # nothing forgotten here: every id, in order
    middle = ids[len(ids) // 2 - 1]
    with event_stream(nova, "bob", last_id=middle) as events:
        resumed = until(events, lambda e: e.id == ids[-1])
    assert [e.id for e in resumed] == [i for i in ids if i > middle]
    assert [e.data for e in resumed] == [e.data for e in everything if e.id and e.id > middle]
    with event_stream(nova, "bob", after=middle) as events:
        by_query = until(events, lambda e: e.id == ids[-1])
    assert [e.id for e in by_query] == [e.id for e in resumed]
    bad = httpx.get(
        f"{nova.url}/api/events",
        headers={**nova.auth("bob"), "Last-Event-ID": "not-an-id"},
        timeout=30,
    )
    assert bad.status_code == 400 and set(bad.json()) == {"detail"}


@pytest.mark.parametrize("next_streams", [True, False], ids=["streamed", "whole"])
def test_a_slow_follow_up_comes_at_the_start_of_the_next_v1_response_once(
    nova: Nova, server: OllamaTestServer, next_streams: bool
) -> None:
    client = nova.client("eve")
    last_resort(server, "The slow second look.", delay_s=SLOW_S)
    with event_stream(nova, "eve") as events:
        began = time.monotonic()
        raw = client.chat.completions.with_raw_response.create(
            model="nova", messages=[{"role": "user", "content": "think hard"}]
        )
        waited = time.monotonic() - began
        first = raw.parse().choices[0].message.content or ""
        conversation = raw.headers[CONVERSATION]
        assert SEPARATOR not in first and first.startswith("Draft answer.")
        assert waited < SLOW_S + FOLLOWUP_WAIT_S  # it did not wait for the follow-up
        [followup] = [
            e for e in until(events, lambda e: e.event == "followup") if e.event == "followup"
        ]
    assert followup.data["text"] == "The slow second look."
    server.reset()  # no last resort in the next turns
    server.script("responder", Reply(content="The next answer."))
    headers = {CONVERSATION: conversation}
    if next_streams:
        stream = client.chat.completions.create(
            model="nova",
            messages=[{"role": "user", "content": "and now?"}],
            stream=True,
            extra_headers=headers,
        )
        second = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    else:
        whole = client.chat.completions.create(
            model="nova", messages=[{"role": "user", "content": "and now?"}], extra_headers=headers
        )
        second = whole.choices[0].message.content or ""
    assert second == f"The slow second look.{SEPARATOR}The next answer."
    server.script("responder", Reply(content="A third answer."))
    third = client.chat.completions.create(
        model="nova", messages=[{"role": "user", "content": "and then?"}], extra_headers=headers
    )
    assert third.choices[0].message.content == "A third answer."  # not twice
    db = nova.db()
    try:
        rows = db.query(
            "SELECT channel FROM followup_deliveries WHERE turn_id = ?",
            (followup.data["turn_id"],),
        )
    finally:
        db.close()
    assert rows == [{"channel": "openai"}]


def test_a_reminder_the_servers_sweeper_sent_opens_the_next_v1_response_once(
    nova: Nova, server: OllamaTestServer
) -> None:
    from datetime import UTC, datetime, timedelta

    from novaberg.proactive import schedule
    from novaberg.proactive.when import When

    client = nova.client("bob")
    server.script("responder", Reply(content="Hello, Bob."))
    raw = client.chat.completions.with_raw_response.create(
        model="nova", messages=[{"role": "user", "content": "hi"}]
    )
    conversation = raw.headers[CONVERSATION]
    server.script("responder", Reply(content="Time to water the ferns, Bob!"))
    db = nova.db()
    try:
        due = datetime.now(UTC) - timedelta(seconds=1)
        with db.transaction() as c:
            made = schedule.schedule(
                c, "bob", "water the ferns", When(due, due), cause="a test",
                conversation=int(conversation),
            )  # fmt: skip
        wait_for(
            lambda: schedule.get(db, "bob", made).status == "sent",  # type: ignore[union-attr]
            "the server's sweeper to send the reminder",
            timeout_s=30,
        )
        [message] = db.query(
            "SELECT t.id, t.conversation_id FROM turns t WHERE t.origin = 'proactive'"
            " AND t.conversation_id = ?",
            (int(conversation),),
        )
        server.script("responder", Reply(content="Glad to help."))
        headers = {CONVERSATION: conversation}
        second = client.chat.completions.create(
            model="nova", messages=[{"role": "user", "content": "thanks"}], extra_headers=headers
        )
        assert second.choices[0].message.content == (
            f"Time to water the ferns, Bob!{SEPARATOR}Glad to help."
        )
        server.script("responder", Reply(content="Anything else?"))
        third = client.chat.completions.create(
            model="nova", messages=[{"role": "user", "content": "ok"}], extra_headers=headers
        )
        assert third.choices[0].message.content == "Anything else?"  # not twice
        rows = db.query(
            "SELECT channel FROM followup_deliveries WHERE turn_id = ?", (message["id"],)
        )
        assert rows == [{"channel": "openai"}]
    finally:
        db.close()


def test_forget_removes_a_follow_ups_text_from_the_replay(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script(
        "salience",
        Reply(content=json.dumps({"score": 0.9, "summary": "Ada's boat is the Zwiebelfisch."})),
    )
    last_resort(server, "About the Zwiebelfisch: a second look.")
    told = post_turn(nova, "My boat is called Zwiebelfisch.", "ada")
    [kept] = told["followups"]
    with event_stream(nova, "ada", after=0) as events:
        before = until(events, followup_of(kept["turn_id"]))
    assert before[-1].data["text"] == "About the Zwiebelfisch: a second look."
    found = httpx.get(
        f"{nova.url}/api/memory", params={"query": "Zwiebelfisch"}, headers=nova.auth(), timeout=30
    ).json()["items"]
    [item] = [i for i in found if "Zwiebelfisch" in i["text"]]
    forgot = httpx.delete(f"{nova.url}/api/memory/{item['id']}", headers=nova.auth(), timeout=60)
    assert forgot.status_code == 200, forgot.text
    server.reset()
    last_resort(server, "An unrelated second look.")
    later = post_turn(nova, "Something else entirely.", "ada")
    newest = log_ids(nova, "ada")[-1]
    with httpx.stream(
        "GET", f"{nova.url}/api/events", params={"after": 0}, headers=nova.auth(), timeout=30
    ) as response:
        raw: list[str] = []
        replay = until(parse(_keep(response.iter_lines(), raw)), lambda e: (e.id or 0) >= newest)
    turns = [e.data["turn_id"] for e in replay if e.event == "followup"]
    assert kept["turn_id"] not in turns and later["followups"][0]["turn_id"] in turns
    assert "Zwiebelfisch" not in "\n".join(raw)


def test_the_readme_stream_and_events_curl_examples_run(
    nova: Nova, server: OllamaTestServer
) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Nova over HTTP", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    streamed = next(b for b in blocks if "stream=true" in b)
    listen = next(b for b in blocks if "/api/events" in b)
    env = {**os.environ, "NOVA_KEY": nova.keys["bob"]}
    last_resort(server, "A second look from the README.")
    done = subprocess.run(
        ["bash", "-c", streamed.replace("http://127.0.0.1:8484", nova.url)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    events = list(parse(iter(done.stdout.splitlines())))
    assert events[0].event == "start" and events[-1].event == "done"
    [followup] = [e.data for e in events if e.event == "followup"]
    assert followup["text"] == "A second look from the README."
    with subprocess.Popen(
        ["bash", "-c", listen.replace("http://127.0.0.1:8484", nova.url)],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as curl:
        assert curl.stdout is not None
        try:
            heard = until(
                parse(line.rstrip("\n") for line in curl.stdout), followup_of(followup["turn_id"])
            )
        finally:
            curl.terminate()
    assert heard[-1].data["text"] == "A second look from the README."


def _keep(lines: Iterator[str], into: list[str]) -> Iterator[str]:
    for line in lines:
        into.append(line)
        yield line


def test_the_event_stream_ends_when_the_server_stops(
    ollama_server: OllamaTestServer, tmp_path: Path
) -> None:
    with running_nova(ollama_server, tmp_path / "stopping", ("ada",)) as own:
        with event_stream(own, "ada") as events:
            own.proc.send_signal(signal.SIGTERM)
            began = time.monotonic()
            assert list(events) == []  # ended, with nothing to say
            assert time.monotonic() - began < 10
        own.proc.wait(timeout=20)  # uvicorn exits by the signal it was sent, once shut down
        assert "Application shutdown complete" in own.logs()
        assert "Traceback" not in own.logs()


# -- the log and the delivery records, on SQLite and PostgreSQL --------------------------------
def _followup_turn(db: Database, user: str, text: str) -> tuple[int, int, int]:
    conversation = db.new_conversation(user)
    parent = db.start_turn(conversation, "a question")
    db.finish_turn(
        parent,
        conversation_id=conversation,
        user_text="a question",
        reply="Draft.",
        trace=TraceDocument(),
        calls=[],
    )
    second = db.start_turn(conversation, "a question", "self_trigger", parent)
    db.finish_turn(
        second,
        conversation_id=conversation,
        user_text="a question",
        reply=text,
        trace=TraceDocument(),
        calls=[],
        user_message=False,
        also=lambda c, _: user_events.record(c, user, "followup", second),
    )
    return conversation, parent, second


def test_the_log_reads_after_an_id_per_user_and_skips_forgotten_text(db: Database) -> None:
    conversation, parent, second = _followup_turn(db, "ada", "A follow-up.")
    _, _, others = _followup_turn(db, "eve", "Eve's follow-up.")
    [event] = user_events.after(db, "ada", 0)
    assert event.kind == "followup" and event.data == {
        "turn_id": second,
        "parent_turn_id": parent,
        "conversation_id": conversation,
        "text": "A follow-up.",
        "origin": "self_trigger",
    }
    assert user_events.after(db, "ada", event.id) == []
    assert user_events.latest_id(db, "ada") == event.id
    assert [e.data["turn_id"] for e in user_events.after(db, "eve", 0) if e.data] == [others]
    with db.transaction() as c:
        c.execute("UPDATE turns SET forgotten_at = 'now' WHERE id = ?", (second,))
    [gone] = user_events.after(db, "ada", 0)
    assert gone.id == event.id and gone.data is None


def test_a_follow_up_is_claimed_by_one_response_only(db: Database) -> None:
    conversation, parent, second = _followup_turn(db, "ada", "Waiting follow-up.")
    assert deliveries.claim_waiting(db, conversation, "openai", before_turn=parent) == []
    [waiting] = deliveries.claim_waiting(db, conversation, "openai")
    assert waiting == deliveries.Followup(second, parent, "Waiting follow-up.")
    assert deliveries.claim_waiting(db, conversation, "openai") == []
    assert deliveries.mark_delivered(db, [second], "api") == []


def test_no_database_call_ran_on_the_servers_event_loop(nova: Nova) -> None:
    """Runs after the server tests above (file order): the guard (a StorageError naming the
    call) raised nowhere — not in a request, a turn, a follow-up or a memory job."""
    logs = nova.logs()
    assert "database call on the event loop" not in logs
    assert "StorageError" not in logs and "crashed" not in logs
    assert "Traceback" not in logs


def test_event_ids_are_handed_out_in_commit_order(db: Database) -> None:
    """A writer whose transaction is still open holds back the next one, so a reader resuming
    after an id never misses a smaller id committed later (PostgreSQL: the table lock)."""
    recorded = threading.Event()
    commit = threading.Event()

    def first() -> None:
        with db.transaction() as c:
            user_events.record(c, "ada", "job", 1)
            recorded.set()
            commit.wait(10)

    def second() -> None:
        with db.transaction() as c:
            user_events.record(c, "ada", "job", 2)

    a = threading.Thread(target=first)
    a.start()
    assert recorded.wait(10)
    b = threading.Thread(target=second)
    b.start()
    b.join(timeout=0.5)
    try:
        assert b.is_alive()  # waits for the first writer's commit
        assert user_events.after(db, "ada", 0) == []  # neither is visible yet
    finally:
        commit.set()
        a.join()
        b.join()
    rows = db.query("SELECT id, ref_id FROM user_events WHERE user_id = 'ada' ORDER BY id")
    assert [r["ref_id"] for r in rows] == [1, 2]
