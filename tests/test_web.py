"""Nova's web page in a real browser (Debian's chromium through Playwright) against a real
``novaberg serve`` process over the shipped Ollama-protocol test server: sign in, chat with the
answer streaming and the pipeline's progress, the Why panel (calls, votes, corrections,
memories), a last resort's follow-up arriving without a reload, forgetting a memory, export
and import, error banners, stopping a turn, hostile text rendered as text. Any console error
or page error fails a test (the few a test provokes on purpose are named). Screenshots of each
page at desktop width and at 375 px go to test-artifacts/web/."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from novaberg.config import load_settings
from novaberg.memory.store import MemoryStore
from novaberg.server.app import create_app
from novaberg.server.web import CSP, page_weight
from novaberg.storage.memories import Statement
from novaberg.testing import Match, OllamaTestServer, Reply
from novaberg.text import visible
from tests.server_helpers import Nova, running_nova
from tests.web_helpers import DESKTOP, PHONE, Watched, chromium, shoot, sign_in, watch

USERS = tuple(
    "ada bob cyd dan eve fay gus hal ivy kim lea max ned ola pia rex sam tia uma vic".split()  # noqa: SIM905
)
FOLLOWUP_WAIT_S = 1.0
"""How long the server's turn stream waits for a follow-up; a slower one comes over /api/events."""
LOADED = {"stats": "#stats-body", "memory": "#memory-summary", "chat": "#conversation-list"}
"""An element each view fills once its data arrived."""
CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))


def salient(summary: str) -> Reply:
    return Reply(content=json.dumps({"score": 0.9, "summary": summary}))


def vote(v: str, reason: str) -> Reply:
    return Reply(content=json.dumps({"vote": v, "reason": reason}))


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-web") / "home"
    env = {
        "NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": "60",
        "NOVABERG_SERVER__FOLLOWUP_WAIT_S": str(FOLLOWUP_WAIT_S),
    }
    with running_nova(ollama_server, home, USERS, extra_env=env) as started:
        yield started


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as (_, launched):
        yield launched


@pytest.fixture
def watched(browser: Browser, nova: Nova) -> Iterator[Watched]:
    context = browser.new_context(viewport=DESKTOP, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(15_000)
    seen = watch(page)
    try:
        yield seen
        assert not seen.unexpected(), seen.unexpected()
        assert not seen.dialogs, seen.dialogs
        keys = list(nova.keys.values())
        assert not [u for u in seen.urls if any(k in u for k in keys)]  # never in a URL
    finally:
        context.close()


def send(page: Page, text: str) -> None:
    box = page.get_by_label("Message to Nova")
    box.fill(text)
    box.press("Control+Enter")


def record_progress(page: Page) -> None:
    """Remember every text the live progress line and Nova's last message show."""
    page.evaluate(
        """() => {
        window.__progress = []; window.__texts = [];
        new MutationObserver(() => window.__progress.push(
            document.getElementById('progress').textContent)).observe(
            document.getElementById('progress'), {childList: true, characterData: true,
            subtree: true});
        new MutationObserver(() => {
            const t = document.querySelectorAll('#messages .message.nova .text');
            if (t.length) window.__texts.push(t[t.length - 1].textContent);
        }).observe(document.getElementById('messages'),
            {childList: true, characterData: true, subtree: true});
    }"""
    )


def nova_messages(page: Page) -> list[str]:
    return page.locator(
        "#messages .message.nova .text, #messages .message.followup .text"
    ).all_text_contents()


def test_sign_in_chat_streams_and_why_shows_calls_votes_and_memories(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["ada"])
    shoot(page, "chat-empty-desktop")
    server.script("salience", salient("The user's parrot is called Pixelkorn."))
    server.script("responder", Reply(content="What a lovely name for a parrot."))
    record_progress(page)
    send(page, "My parrot is called Pixelkorn.")
    expect(page.locator("#messages .message.nova .text")).to_have_text(
        "What a lovely name for a parrot."
    )
    # the second turn retrieves the first one's memory and goes through a revise round
    server.script("router", CHECK)
    server.script("responder", Reply(content="Parrots need company."))
    server.script("judge_persona", vote("revise", "Too curt for Nova."), vote("ok", "Warmer."))
    server.script("corrector", Reply(content="Pixelkorn will love some company, I think!"))
    send(page, "Does Pixelkorn need company?")
    last = page.locator("#messages .message.nova").last
    expect(last.locator(".text")).to_have_text("Pixelkorn will love some company, I think!")
    progress = page.evaluate("window.__progress")
    texts = page.evaluate("window.__texts")
    assert any("router" in p for p in progress), progress  # the live line named the nodes
    assert any("responder" in p and "tribunal" in p for p in progress), progress
    assert "Parrots need company." not in texts  # a draft the tribunal sent back never shows
    last.get_by_role("button", name=re.compile("Why")).click()
    why = page.locator("#why")
    expect(why).to_be_visible()
    expect(why.locator("svg.waterfall")).to_be_visible()
    rows = why.locator("svg.waterfall .call-row")
    callers = [rows.nth(i).get_attribute("data-caller") for i in range(rows.count())]
    assert callers.count("corrector") == 1 and "responder" in callers and "router" in callers
    assert sum(c.startswith("judge_") for c in callers if c) == 6
    table = why.locator("table.calls tbody tr")
    assert table.count() == len(callers)
    expect(table.first.locator(".badge")).to_have_text("ok")
    expect(why.locator("table.votes")).to_have_count(2)  # two rounds
    persona = why.locator("table.votes").first.locator("tr[data-judge=persona]")
    expect(persona).to_contain_text("revise")
    expect(persona).to_contain_text("Too curt for Nova.")
    expect(why.locator(".corrections")).to_have_text(re.compile(r"Corrections: 1"))
    expect(why.locator(".given")).to_contain_text("Pixelkorn")  # the memory it was given
    expect(why.locator(".given .reason")).to_contain_text(re.compile("pixelkorn", re.I))
    expect(why.locator(".salience")).to_be_visible()
    shoot(page, "why-desktop")
    page.get_by_role("button", name="Close").click()
    page.set_viewport_size(PHONE)
    last.get_by_role("button", name=re.compile("Why")).click()
    expect(why.locator("table.votes")).to_have_count(2)
    shoot(page, "why-375")
    page.get_by_role("button", name="Close").click()
    expect(why).to_be_hidden()
    shoot(page, "chat-375")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    page.set_viewport_size(DESKTOP)
    shoot(page, "chat-desktop")


@pytest.mark.parametrize("slow", [False, True], ids=["in-the-turn-stream", "over-api-events"])
def test_a_last_resorts_follow_up_appears_without_a_reload(
    watched: Watched, nova: Nova, server: OllamaTestServer, slow: bool
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["bob"])
    page.evaluate("window.__same_page = 42")
    server.script("router", CHECK)
    second_pass = Reply(content="Second look.", delay_s=FOLLOWUP_WAIT_S + 1.5 if slow else 0.0)
    server.script("responder", Reply(content="Draft answer."), second_pass)
    server.script("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    server.script("thinker_nachfass", Reply(content="prose"), Reply(content="more prose"))
    send(page, "check this for me")
    if slow:  # the turn's stream ended without it: only /api/events can bring it
        expect(page.get_by_role("button", name="Stop")).to_be_hidden()
        expect(page.locator("#messages .message.nova .why-button")).to_have_count(1)
        assert page.locator("#messages .message.followup").count() == 0
    expect(page.locator("#messages .message.followup .text")).to_have_text("Second look.")
    expect(page.locator("#messages .message.followup")).to_have_count(1)  # never twice
    assert page.evaluate("window.__same_page") == 42  # no reload
    assert nova_messages(page)[0].startswith("Draft answer.")
    page.locator("#messages .message.nova").first.get_by_role(
        "button", name=re.compile("Why")
    ).click()
    why = page.locator("#why")
    expect(why.locator(".badge.thinker-last_resort")).to_have_text("last_resort")
    expect(why.locator(".badge.outcome-think_split_prose").first).to_be_visible()
    expect(why.locator(".badge.outcome-malformed").first).to_be_visible()


def test_a_memory_is_corrected_in_place_and_retracted_from_the_page(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["sam"])
    server.script("salience", salient("The user's sister Quillana lives in Berlin."))
    send(page, "My sister Quillana lives in Berlin.")
    expect(page.locator("#messages .message.nova .text")).not_to_be_empty()
    page.get_by_role("link", name="Memory").click()
    items = page.locator("#memory-list .memory-item")
    old = items.filter(has_text="Quillana lives in Berlin").first
    old.get_by_role("button", name=re.compile("^Edit")).click()
    field = page.get_by_label("What it says now")
    expect(field).to_be_focused()
    field.fill("The user's sister Quillana lives in Munich.")
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#memory-summary")).to_contain_text("Corrected")
    current = items.filter(has_text="lives in Munich")
    expect(current).to_have_count(1)
    ended = items.filter(has_text="lives in Berlin").first
    expect(ended.locator(".badge-superseded")).to_have_text("superseded")  # kept, not current
    expect(ended.get_by_role("button", name=re.compile("^Edit"))).to_have_count(0)
    current.get_by_role("button", name=re.compile("^Retract")).click()
    expect(page.locator("#memory-summary")).to_contain_text("Retracted")
    expect(items.filter(has_text="lives in Munich").locator(".badge-superseded")).to_have_text(
        "retracted"
    )
    found = httpx.get(
        f"{nova.url}/api/memory", params={"query": "Quillana"}, headers=nova.auth("sam")
    ).json()["items"]
    assert not [i for i in found if "Quillana lives" in i["text"]]  # nothing current is left


def test_forget_a_memory_and_it_is_gone_from_list_and_search(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["cyd"])
    server.script("salience", salient("The user's cat is called Quokkamiso."))
    send(page, "My cat is called Quokkamiso.")
    expect(page.locator("#messages .message.nova .text")).not_to_be_empty()
    page.get_by_role("link", name="Memory").click()
    items = page.locator("#memory-list .memory-item")
    expect(items.filter(has_text="Quokkamiso")).to_have_count(1)
    shoot(page, "memory-desktop")
    page.get_by_role("tab", name="Jobs").click()  # the turn's background memory jobs
    expect(page.locator("#panel-jobs table.jobs tbody tr").first).to_be_visible()
    shoot(page, "memory-jobs-desktop")
    page.get_by_role("tab", name="Profile").click()
    expect(page.locator("#panel-profile")).not_to_be_empty()
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#panel-timeline")).not_to_be_empty()
    page.get_by_role("tab", name="Items").click()
    expect(items.filter(has_text="Quokkamiso")).to_have_count(1)
    page.get_by_label("Search what Nova remembers").fill("Quokkamiso")
    page.get_by_role("button", name="Search", exact=True).click()
    found = items.filter(has_text="Quokkamiso")
    expect(found).to_have_count(1)
    expect(found.locator(".reason")).to_contain_text(re.compile("quokkamiso", re.I))  # why
    expect(found.locator(".provenance")).to_have_text(re.compile(r"from turn \d+"))
    found.locator(".provenance").click()  # the turn it came from, in the Why panel
    expect(page.locator("#why-title")).to_contain_text(re.compile(r"\(\d+\)"))
    expect(page.locator("#why svg.waterfall")).to_be_visible()
    page.get_by_role("button", name="Close").click()
    found.get_by_role("button", name=re.compile("Forget")).click()
    confirm = page.locator("#confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("Quokkamiso")  # it says what goes
    expect(confirm).to_contain_text("turn")
    page.locator("#confirm-ok").click()
    expect(page.locator("#memory-summary")).to_contain_text("Forgotten")
    expect(items.filter(has_text="Quokkamiso")).to_have_count(0)  # gone from the search
    page.get_by_role("button", name="Show all").click()
    expect(page.locator("#memory-summary")).not_to_contain_text("Forgotten")
    expect(items.filter(has_text="Quokkamiso")).to_have_count(0)  # and from the list
    listed = httpx.get(f"{nova.url}/api/memory", headers=nova.auth("cyd")).json()["items"]
    assert not [i for i in listed if "Quokkamiso" in i["text"]]


def test_export_and_import_round_trip(
    watched: Watched, nova: Nova, server: OllamaTestServer, tmp_path: Path
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["dan"])
    server.script("salience", salient("The user grows Zitronenmelisse."))
    send(page, "I grow Zitronenmelisse on my balcony.")
    expect(page.locator("#messages .message.nova .text")).not_to_be_empty()
    page.get_by_role("link", name="Memory").click()
    page.get_by_role("tab", name="Export and import").click()
    shoot(page, "transfer-desktop")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download export").click()
    exported = tmp_path / "export.json"
    info.value.save_as(exported)
    assert info.value.suggested_filename == "novaberg-memory.json"
    assert "Zitronenmelisse" in exported.read_text(encoding="utf-8")
    listed = httpx.get(f"{nova.url}/api/memory", headers=nova.auth("dan")).json()["items"]
    [item] = [i for i in listed if "Zitronenmelisse" in i["text"]]
    assert httpx.delete(f"{nova.url}/api/memory/{item['id']}", headers=nova.auth("dan")).is_success
    page.get_by_label("Import an export file").set_input_files(str(exported))
    expect(page.locator("#transfer-status")).to_contain_text("Imported")
    page.get_by_role("tab", name="Items").click()
    expect(
        page.locator("#memory-list .memory-item").filter(has_text="Zitronenmelisse")
    ).to_have_count(1)
    # a file that is not an export is refused with the CLI's checks, and nothing changes
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something else"}', encoding="utf-8")
    watched.allow(r"status of 400")
    page.get_by_role("tab", name="Export and import").click()
    page.get_by_label("Import an export file").set_input_files(str(bad))
    expect(page.locator("#transfer-status")).to_contain_text("Import refused")


def _seed_memory(nova: Nova, user: str) -> None:
    """A fact superseded by a newer one, a profile statement resting on the newer fact, and
    two dated events — written as the memory jobs write them."""
    db = nova.db()
    try:
        store = MemoryStore(db)
        with db.transaction() as c:
            old = store.add(c, user, "long_term", "The user lives in Bremen.", 0.8, "seed:old")
            new = store.add(c, user, "long_term", "The user lives in Kiel.", 0.8, "seed:new")
            store.supersede(c, old.id, new.id)
        store.set_profile(user, "adaptive", [Statement("Settling into Kiel.", [new.id])])
        store.add_event(user, "2027-03-14", "The user's sister visits.", "seed:event:2")
        store.add_event(user, "2027-01-02", "The user starts a new job.", "seed:event:1")
    finally:
        db.close()


def test_profile_sources_timeline_and_superseded_facts(watched: Watched, nova: Nova) -> None:
    seeding = threading.Thread(target=_seed_memory, args=(nova, "lea"))  # off Playwright's loop
    seeding.start()
    seeding.join(30)
    page = watched.page
    sign_in(page, nova.url, nova.keys["lea"])
    page.get_by_role("link", name="Memory").click()
    page.get_by_role("tab", name="Profile").click()  # first: its sources' texts are fetched
    statement = page.locator("#panel-profile .statements li")
    expect(statement).to_contain_text("Settling into Kiel.")
    expect(statement).to_contain_text("The user lives in Kiel.")  # its source, by its text
    shoot(page, "memory-profile-desktop")
    page.get_by_role("tab", name="Items").click()
    items = page.locator("#memory-list .memory-item")
    bremen = items.filter(has_text="Bremen")
    expect(bremen).to_have_class(re.compile("superseded"))
    expect(bremen.locator(".badge-superseded")).to_have_text("superseded")
    expect(items.filter(has_text="Kiel").locator(".badge-superseded")).to_have_count(0)
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#panel-timeline time")).to_have_count(2)
    dates = page.locator("#panel-timeline time").all_text_contents()
    assert dates == ["2027-01-02", "2027-03-14"]  # in date order
    expect(page.locator("#panel-timeline")).to_contain_text("The user's sister visits.")
    shoot(page, "memory-timeline-desktop")
    page.get_by_role("tab", name="Profile").press("ArrowRight")  # tabs move with the arrows
    expect(page.get_by_role("tab", name="Timeline")).to_be_focused()


def test_a_hostile_reply_renders_as_text(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["eve"])
    hostile = "<img src=x onerror=alert(1)>"
    server.script("responder", Reply(content=hostile))
    send(page, "<b>bold?</b> " + hostile)
    expect(page.locator("#messages .message.nova .text")).to_have_text(hostile)
    expect(page.locator("#messages .message.user .text")).to_have_text("<b>bold?</b> " + hostile)
    assert page.locator("#messages img, #messages b").count() == 0
    page.wait_for_timeout(200)  # an onerror would have fired by now
    assert not watched.dialogs
    page.get_by_role("link", name="Memory").click()  # the conversation list and memory too
    assert page.locator("img").count() == 0


def test_a_banner_says_the_backend_is_down(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["fay"])
    watched.allow(r"status of 502")
    server.standing("responder", Reply(status=400, error="the model refused"))
    send(page, "are you there?")
    banner = page.locator("#banners .banner")
    expect(banner).to_contain_text("model backend")
    expect(page.locator("#messages .message.nova")).to_have_count(0)  # no empty answer left
    shoot(page, "banner-desktop")
    page.locator("#banners .dismiss").click()
    expect(banner).to_have_count(0)


def test_a_message_sent_while_the_answer_is_still_being_stored_goes_out_after_it(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["vic"])
    server.script("responder", Reply(content="Shown first."))
    # the answer is on the page before salience: this keeps the turn running after it
    server.script("salience", Reply(content=json.dumps({"score": 0.1, "summary": ""}), delay_s=3.0))
    send(page, "one")
    first = page.locator("#messages .message.nova").last
    expect(first.locator(".text")).to_have_text("Shown first.")
    expect(first).to_have_attribute("aria-busy", "true")  # still running
    server.script("responder", Reply(content="Then this."))
    send(page, "two")
    expect(page.locator("#progress")).to_contain_text("still finishing")
    expect(page.get_by_label("Message to Nova")).to_have_value("two")  # kept until it goes out
    expect(page.locator("#messages .message.nova").last.locator(".text")).to_have_text(
        "Then this.", timeout=20_000
    )
    assert nova_messages(page) == ["Shown first.", "Then this."]
    assert page.locator("#messages .message.user .text").all_text_contents() == ["one", "two"]
    expect(page.get_by_label("Message to Nova")).to_have_value("")


def test_a_banner_says_a_turn_is_still_running_409(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["fay"])
    watched.allow(r"status of 409")
    server.script("responder", Reply(content="First."))
    send(page, "first")
    expect(page.locator("#messages .message.nova .text")).to_have_text("First.")
    conversation = int(
        page.locator(".conversation[aria-current=true]").get_attribute("data-conversation") or 0
    )
    server.script("responder", Reply(content="Slow.", delay_s=3.0))
    body = {"message": "slow one", "conversation_id": conversation}
    with httpx.Client(timeout=30) as client:
        slow = threading.Thread(
            target=client.post,
            args=(f"{nova.url}/api/turns",),
            kwargs={"json": body, "headers": nova.auth("fay")},
        )
        slow.start()
        _wait_running(nova, "fay")
        probe = client.post(
            f"{nova.url}/api/turns",
            json={"message": "probe", "conversation_id": conversation},
            headers=nova.auth("fay"),
        )
        assert probe.status_code == 409, probe.text  # the server's answer while one runs
        send(page, "second")
        expect(page.locator("#banners .banner")).to_contain_text("still running")
        slow.join()


def test_a_banner_says_how_long_to_wait_after_a_429(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["kim"])
    watched.allow(r"status of 429")
    spent = threading.Event()
    done = threading.Event()

    def spend() -> None:  # keep this user's requests per minute spent until the page is refused
        with httpx.Client(timeout=30) as client:
            while not done.is_set():
                answer = client.get(f"{nova.url}/api/conversations", headers=nova.auth("kim"))
                if answer.status_code == 429:
                    spent.set()

    spender = threading.Thread(target=spend)
    spender.start()
    try:
        assert spent.wait(30), "no 429"
        send(page, "third")
        expect(page.locator("#banners .banner")).to_contain_text(re.compile(r"wait \d+ s"))
    finally:
        done.set()
        spender.join()


def _wait_running(nova: Nova, user: str) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        db = nova.db()
        try:
            running = db.scalar(
                "SELECT COUNT(*) FROM turns t JOIN conversations c ON c.id = t.conversation_id "
                "WHERE c.user_id = ? AND t.status = 'running'",
                (user,),
            )
        finally:
            db.close()
        if running:
            return
        time.sleep(0.02)
    pytest.fail("the slow turn never started")


def test_escape_stops_a_running_turn(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["gus"])
    server.script("responder", Reply(content="Too late.", delay_s=2.0))
    send(page, "take your time")
    expect(page.get_by_role("button", name="Stop")).to_be_visible()
    _wait_running(nova, "gus")
    deadline = time.monotonic() + 10
    while not server.requests("/api/chat", caller="responder"):  # Nova is writing
        assert time.monotonic() < deadline, "the responder was never asked"
        time.sleep(0.02)
    page.keyboard.press("Escape")
    expect(page.locator("#progress")).to_contain_text("Stopped")
    expect(page.get_by_role("button", name="Stop")).to_be_hidden()
    assert "Too late." not in nova_messages(page)
    expect(page.locator("#progress")).to_contain_text("nothing of it was kept")
    # the server aborts the turn: its answer had not reached the page (README "Nova over HTTP")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        db = nova.db()
        try:
            turns = db.query(
                "SELECT t.status, t.conversation_id FROM turns t "
                "JOIN conversations c ON c.id = t.conversation_id WHERE c.user_id = ?",
                ("gus",),
            )
        finally:
            db.close()
        if turns and turns[-1]["status"] == "aborted":
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the stopped turn was not aborted: {turns}")
    conversation = turns[-1]["conversation_id"]
    stored = httpx.get(
        f"{nova.url}/api/conversations/{conversation}/messages", headers=nova.auth("gus")
    )
    assert stored.json()["items"] == []  # nothing unseen is kept as history
    # and the conversation takes the next message at once (no 409)
    server.script("responder", Reply(content="Here I am."))
    send(page, "are you there?")
    expect(page.locator("#messages .message.nova .text").last).to_have_text("Here I am.")


def test_stats_draws_charts_and_every_page_fits_375_px(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["hal"])
    send(page, "hello")
    expect(page.locator("#messages .message.nova .text")).not_to_be_empty()
    page.get_by_role("link", name="Stats").click()
    expect(page.locator("#view-chat")).to_be_hidden()  # one view at a time
    charts = page.locator("#stats-body svg.chart")
    expect(charts.nth(1)).to_be_visible()  # rates and latency; judges' corrections when any
    assert page.locator("#stats-body svg.chart rect").count() >= 6
    expect(page.locator("#stats-body figure").nth(1)).to_contain_text("responder")
    shoot(page, "stats-desktop")
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.emulate_media(color_scheme="dark")  # the system's choice, no switch of its own
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") != light
    shoot(page, "stats-dark-desktop")
    page.emulate_media(color_scheme="light")
    page.set_viewport_size(PHONE)
    for view in ("stats", "memory", "chat"):
        page.goto(f"{nova.url}/#{view}")
        expect(page.locator(f"#view-{view}")).to_be_visible()
        expect(page.locator(LOADED[view])).not_to_be_empty()
        shoot(page, f"{view}-375" if view != "chat" else "chat-reloaded-375")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"], view
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    assert page.evaluate("sessionStorage.length") == 0
    shoot(page, "signin-375")
    page.set_viewport_size(DESKTOP)
    shoot(page, "signin-desktop")


def test_a_wrong_key_is_refused_and_the_keyboard_reaches_every_control(
    watched: Watched, nova: Nova
) -> None:
    page = watched.page
    watched.allow(r"status of 401")
    page.goto(nova.url + "/")
    expect(page.get_by_label("API key")).to_be_focused()
    page.keyboard.type("not-a-key")
    page.keyboard.press("Enter")
    expect(page.locator("#signin-error")).to_contain_text("refused")
    page.get_by_label("API key").fill(nova.keys["ivy"])
    page.keyboard.press("Enter")
    expect(page.get_by_label("Message to Nova")).to_be_focused()
    expect(page.locator("#conversation-list li").first).to_be_attached()
    reached = []
    for _ in range(20):
        page.keyboard.press("Tab")
        reached.append(
            page.evaluate("document.activeElement.id || document.activeElement.textContent")
        )
    assert "Skip to content" in reached, reached
    start = reached.index("Skip to content")
    reached = reached[start:] + reached[:start]  # one round, from the top of the page
    for control in ("Chat", "Memory", "Stats", "sign-out"):
        assert control in reached, (control, reached)
    for control in ("new-conversation", "message", "send"):
        assert control in reached, (control, reached)
    assert reached.index("new-conversation") < reached.index("message") < reached.index("send")


def test_german_when_the_server_says_de(watched: Watched, nova: Nova) -> None:
    page = watched.page
    page.route(
        "**/web/config.json",
        lambda route: route.fulfill(json={"language": "de"}, headers={"Cache-Control": "no-store"}),
    )
    sign_in_de = page.goto(nova.url + "/")
    assert sign_in_de is not None
    expect(page.locator("html")).to_have_attribute("lang", "de")
    expect(page.get_by_role("button", name="Anmelden")).to_be_visible()
    page.get_by_label("API-Schlüssel").fill(nova.keys["ivy"])
    page.get_by_role("button", name="Anmelden").click()
    expect(page.get_by_role("link", name="Gedächtnis")).to_be_visible()
    shoot(page, "chat-de-desktop")


def test_page_headers_csp_cache_and_weight(nova: Nova) -> None:
    with httpx.Client(base_url=nova.url, timeout=10) as client:
        index = client.get("/")
        assert index.status_code == 200 and index.headers["content-security-policy"] == CSP
        assert "script-src 'self';" in CSP and "unsafe-inline" not in CSP
        assert index.headers["cache-control"] == "no-cache"
        again = client.get("/", headers={"If-None-Match": index.headers["etag"]})
        assert again.status_code == 304
        script = client.get("/web/app.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert script.headers["content-security-policy"] == CSP
        assert client.get("/web/..%2Fapp.py").status_code == 404
        assert client.get("/web/nothing.js").status_code == 404
        assert client.get("/web/config.json").json() == {"language": "en"}
        html = index.text
        assert "<script>" not in html and "<style" not in html and "style=" not in html
        assert not re.search(r"\son[a-z]+=", html)  # no inline event handlers
    assert page_weight() < 200_000


def test_the_page_config_names_the_servers_language(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVABERG_LANGUAGE", "de")

    async def ask() -> httpx.Response:
        app = create_app(load_settings().settings)
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://nova") as client:
                return await client.get("/web/config.json")

    answers: list[httpx.Response] = []
    # a thread of its own: the module's browser keeps Playwright's loop in this one
    worker = threading.Thread(target=lambda: answers.append(asyncio.run(ask())))
    worker.start()
    worker.join(60)
    assert answers and answers[0].json() == {"language": "de"}


def test_the_pages_scripts_never_turn_strings_into_html() -> None:
    """Text reaches the page only as text nodes / textContent (dom.js); no script parses a
    string as HTML or code."""
    folder = Path(__file__).resolve().parent.parent / "src" / "novaberg" / "server" / "web"
    scripts = sorted(folder.glob("*.js"))
    assert len(scripts) >= 8
    for script in scripts:
        code = "\n".join(
            line
            for line in script.read_text(encoding="utf-8").splitlines()
            if not line.lstrip().startswith("//")
        )
        for sink in (
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            'setAttribute("style"',
            ".style.",
        ):
            assert sink not in code, (script.name, sink)


def test_every_text_reaches_the_page_through_dom_js_and_its_escapes() -> None:
    """Only dom.js sets a text (setText, h, s), so every text shows hidden characters
    escaped; no other script sets textContent or makes a text node itself."""
    folder = Path(__file__).resolve().parent.parent / "src" / "novaberg" / "server" / "web"
    setter = re.compile(r"\.(textContent|innerText|nodeValue)\s*=(?!=)|createTextNode\(")
    for script in sorted(folder.glob("*.js")):
        if script.name != "dom.js":
            code = script.read_text(encoding="utf-8")
            assert not setter.search(code), (script.name, setter.search(code))


def _seed_family(nova: Nova, user: str) -> tuple[int, int]:
    db = nova.db()
    try:
        store = MemoryStore(db)
        with db.transaction() as c:
            item = store.add(c, user, "short_term", "The user adopted a dog.", 0.7, "fam:item")
            fact = store.add(
                c, user, "long_term", "The user has a dog.", 0.8, "fam:fact", derived_from=[item.id]
            )
        return item.id, fact.id
    finally:
        db.close()


def test_api_memory_family_names_what_forget_takes_and_changes_nothing(nova: Nova) -> None:
    seeded: list[tuple[int, int]] = []
    seeding = threading.Thread(target=lambda: seeded.append(_seed_family(nova, "lea")))
    seeding.start()
    seeding.join(30)
    [(item, fact)] = seeded
    got = httpx.get(f"{nova.url}/api/memory/{item}/family", headers=nova.auth("lea"))
    assert got.status_code == 200, got.text
    assert [i["id"] for i in got.json()["items"]] == [item, fact]  # the item first
    assert got.json()["items"][1]["text"] == "The user has a dog."
    of_fact = httpx.get(f"{nova.url}/api/memory/{fact}/family", headers=nova.auth("lea")).json()
    assert [i["id"] for i in of_fact["items"]] == [fact, item]  # what the fact was made of
    assert httpx.get(f"{nova.url}/api/memory/{item}", headers=nova.auth("lea")).is_success
    theirs = httpx.get(f"{nova.url}/api/memory/{item}/family", headers=nova.auth("eve"))
    missing = httpx.get(f"{nova.url}/api/memory/{10**9}/family", headers=nova.auth("eve"))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"].replace(str(item), "N") == missing.json()["detail"].replace(
        str(10**9), "N"
    )


def test_api_turn_why_gives_send_times_rounds_and_memories(
    nova: Nova, server: OllamaTestServer
) -> None:
    auth = nova.auth("hal")
    server.script("salience", salient("The user's boat is called Wellenreiter."))
    first = httpx.post(
        f"{nova.url}/api/turns",
        json={"message": "My boat is Wellenreiter."},
        headers=auth,
        timeout=60,
    ).json()
    server.script("judge_legal", vote("revise", "Say it more carefully."), vote("ok", "Fine."))
    server.script("corrector", Reply(content="Wellenreiter sounds like a fine boat."))
    body = {"message": "Tell me about Wellenreiter.", "conversation_id": first["conversation_id"]}
    turn = httpx.post(f"{nova.url}/api/turns", json=body, headers=auth, timeout=60).json()
    why = httpx.get(f"{nova.url}/api/turns/{turn['turn_id']}/why", headers=auth).json()
    sent = why["call_sent_ms"]
    assert len(sent) == len(turn["calls"]) and all(isinstance(x, float) for x in sent)
    callers = [c["caller"] for c in turn["calls"]]
    assert sent[callers.index("router")] < sent[callers.index("responder")]
    assert sent[callers.index("responder")] < sent[callers.index("corrector")]
    assert len(why["rounds"]) == 2 and why["corrector"]["rounds"] == 1
    [legal] = [v for v in why["rounds"][0] if v["judge"] == "legal"]
    assert legal == {**legal, "vote": "revise", "reason": "Say it more carefully."}
    [given] = [m for m in why["retrieved"] if m["text"] and "Wellenreiter" in m["text"]]
    assert given["reason"] and given["current"] is True
    assert why["nodes"][0] == "router"
    other = httpx.get(f"{nova.url}/api/turns/{turn['turn_id']}/why", headers=nova.auth("eve"))
    assert other.status_code == 404


def _seed_everywhere(nova: Nova, user: str, text: str) -> int:
    """``text`` in one memory item, one profile statement resting on it and one dated event;
    the item's id."""
    db = nova.db()
    try:
        store = MemoryStore(db)
        with db.transaction() as c:
            item = store.add(c, user, "long_term", text, 0.8, f"seed:{user}")
        store.set_profile(user, "adaptive", [Statement(text, [item.id])])
        store.add_event(user, "2027-05-01", text, f"seed:{user}:event")
        return item.id
    finally:
        db.close()


def _seeded(nova: Nova, user: str, text: str) -> int:
    ids: list[int] = []
    seeding = threading.Thread(  # off Playwright's loop
        target=lambda: ids.append(_seed_everywhere(nova, user, text))
    )
    seeding.start()
    seeding.join(30)
    [item] = ids
    return item


def test_the_next_user_signing_in_sees_nothing_of_the_last_even_when_requests_fail(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    secret = "Quarzwal"
    item = _seeded(nova, "max", f"The user's whale is called {secret}.")
    sign_in(page, nova.url, nova.keys["max"])
    server.script("responder", Reply(content=f"{secret} is a fine name for a whale."))
    send(page, f"My whale is called {secret}.")
    expect(page.locator("#messages .message.nova .text")).to_contain_text(secret)
    page.locator("#messages .message.nova").get_by_role("button", name=re.compile("Why")).click()
    expect(page.locator("#why svg.waterfall")).to_be_visible()
    page.get_by_role("button", name="Close").click()
    page.get_by_role("link", name="Memory").click()
    expect(page.locator("#memory-list .memory-item").filter(has_text=secret).first).to_be_visible()
    for tab in ("Profile", "Timeline"):
        page.get_by_role("tab", name=tab).click()
        expect(page.locator(f"#panel-{tab.lower()}")).to_contain_text(secret)
    page.get_by_role("tab", name="Jobs").click()
    expect(page.locator("#panel-jobs")).not_to_be_empty()
    page.get_by_role("tab", name="Items").click()
    page.get_by_label("Search what Nova remembers").fill(secret)
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#memory-summary")).to_contain_text(secret)
    page.get_by_role("link", name="Chat").click()
    page.get_by_label("Message to Nova").fill(f"a draft about {secret}")
    page.get_by_role("link", name="Stats").click()
    expect(page.locator("#stats-body svg.chart").first).to_be_visible()
    held: list[Route] = []  # a request still unanswered when the user signs out
    page.route(re.compile(r"/api/stats"), lambda route: held.append(route))
    with page.expect_request(re.compile(r"/api/stats")):
        page.get_by_role("button", name="Refresh").click()
    with (
        page.expect_event("requestfailed", lambda r: r.url.endswith("/api/events")),
        page.expect_event("requestfailed", lambda r: "/api/stats" in r.url),
    ):
        page.get_by_role("button", name="Sign out").click()  # the last key's requests stop
    assert held
    page.unroute_all(behavior="ignoreErrors")

    # the next user, on the same page, whose memory and stats requests all fail; their
    # profile names the last user's item as a source (a cached text must not show)
    watched.allow(r"status of 500")
    failed = {"status": 500, "json": {"detail": "failing for this test"}}
    page.route(re.compile(r"/api/(memory|stats)"), lambda route: route.fulfill(**failed))
    profile = {
        "adaptive": {
            "version": 1,
            "created_at": "2027-05-01T00:00:00+00:00",
            "statements": [{"text": "Ned's own statement.", "sources": [item]}],
        }
    }
    page.route(re.compile(r"/api/memory/profile$"), lambda route: route.fulfill(json=profile))
    page.get_by_label("API key").fill(nova.keys["ned"])  # no reload: the same page's state
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#conversation-list")).to_contain_text("No conversations yet.")
    banners = page.locator("#banners .banner")

    def refused_once() -> None:  # the view's request failed: one banner (the same text shows once)
        expect(banners).to_have_count(1)
        banners.get_by_role("button", name="Dismiss").click()
        expect(banners).to_have_count(0)

    page.get_by_role("link", name="Memory").click()
    refused_once()
    page.get_by_role("tab", name="Profile").click()
    statement = page.locator("#panel-profile .statements li")
    expect(statement).to_contain_text("Ned's own statement.")
    expect(statement).to_contain_text(f"#{item}")
    assert secret not in (statement.text_content() or "")
    refused_once()  # its sources
    for tab in ("Timeline", "Jobs"):
        page.get_by_role("tab", name=tab).click()
        refused_once()
    page.get_by_role("link", name="Stats").click()
    refused_once()
    html = page.evaluate("document.documentElement.outerHTML")  # hidden views and dialogs too
    assert secret not in html
    values = page.evaluate("[...document.querySelectorAll('input, textarea')].map(e => e.value)")
    assert not [v for v in values if secret in v], values
    for emptied in ("#memory-list", "#memory-summary", "#stats-body", "#why-body", "#messages"):
        expect(page.locator(emptied)).to_be_empty()
    expect(page.locator("#memory-list .forget")).to_have_count(0)


def test_bidi_controls_and_zero_width_characters_show_escaped_as_the_cli_shows_them(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sneaky = "safe \u202egnp.exe, zero\u200bwidth, 👩\u200d💻 kept"
    shown = "safe \\u202egnp.exe, zero\\u200bwidth, 👩\u200d💻 kept"
    assert visible(sneaky) == shown  # what the CLI prints
    _seeded(nova, "ola", sneaky)
    sign_in(page, nova.url, nova.keys["ola"])
    server.script("router", CHECK)
    server.script("thinker", Reply(content="RESULT: OK"))
    server.script("responder", Reply(content=sneaky))
    server.script("judge_persona", vote("ok", sneaky))
    send(page, sneaky)
    expect(page.locator("#messages .message.nova .text")).to_have_text(shown)
    expect(page.locator("#messages .message.user .text")).to_have_text(shown)
    page.locator("#messages .message.nova").get_by_role("button", name=re.compile("Why")).click()
    expect(page.locator("#why tr[data-judge=persona]")).to_contain_text(shown)
    page.get_by_role("button", name="Close").click()
    page.get_by_role("link", name="Memory").click()
    item = page.locator("#memory-list .memory-item").filter(has_text="gnp.exe").first
    expect(item.locator(".memory-text")).to_have_text(shown)
    assert "\u202e" not in (item.get_by_role("button").last.get_attribute("aria-label") or "")
    page.get_by_role("tab", name="Profile").click()
    expect(page.locator("#panel-profile .statements li p")).to_have_text(shown)
    page.get_by_role("tab", name="Timeline").click()
    expect(page.locator("#panel-timeline li")).to_contain_text(shown)
    html = page.evaluate("document.documentElement.outerHTML")
    assert "\u202e" not in html and "\u200b" not in html


def test_a_5000_character_word_keeps_every_view_at_the_windows_width(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    word = "Donaudampfschiff" * 313  # 5,008 characters, no break
    _seeded(nova, "pia", f"The user's word is {word}.")  # memory keeps its first 2,000
    sign_in(page, nova.url, nova.keys["pia"])
    server.script("router", CHECK)
    server.script("thinker", Reply(content="RESULT: OK"))
    server.script("responder", Reply(content=word))
    server.script("judge_persona", vote("ok", word[:600]))  # a reason's limit
    send(page, word)
    expect(page.locator("#messages .message.nova .text")).to_contain_text(word[:3000])
    page.locator("#messages .message.nova").get_by_role("button", name=re.compile("Why")).click()
    votes = page.locator("#why table.votes").first
    expect(votes.locator("tr[data-judge=persona]")).to_contain_text(word[:600])
    wrap = "[...document.querySelectorAll('#why .table-wrap')]"
    wide = page.evaluate(f"{wrap}.filter(e => e.scrollWidth > e.clientWidth).length")
    assert wide == 0  # the votes' reasons wrap instead of scrolling sideways
    page.get_by_role("button", name="Close").click()
    page.get_by_role("link", name="Memory").click()
    views = {
        "Items": "#memory-list .memory-item",
        "Profile": "#panel-profile .statements li",
        "Timeline": "#panel-timeline li",
    }
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        for tab, shown in views.items():
            page.get_by_role("tab", name=tab).click()
            expect(page.locator(shown).filter(has_text=word[:1000]).first).to_be_visible()
            width = page.evaluate("document.documentElement.scrollWidth")
            assert width <= viewport["width"], (tab, viewport, width)
    page.set_viewport_size(DESKTOP)


def test_a_pasted_key_loses_invisible_characters_and_a_foreign_one_is_named(
    watched: Watched, nova: Nova
) -> None:
    page = watched.page
    key = nova.keys["rex"]
    page.goto(nova.url + "/")
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    box = page.get_by_label("API key")
    box.fill(key[:12] + "\u2026")  # a key copied from where it was shown cut short
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#signin-error")).to_have_text(
        "This key contains characters a key never has (\u2026 U+2026); paste it again."
    )
    expect(page.locator("#banners .banner")).to_have_count(0)  # not "cannot be reached"
    box.fill("\ufeff\u00a0 " + key[:10] + "\u200b" + key[10:] + "\u200d\u2060\u00a0")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#nav")).to_be_visible()
    expect(page.locator("#signin-error")).to_be_empty()
    assert page.evaluate("sessionStorage.getItem('novaberg.key')") == key


NOTIFICATION_SPY = """
window.__notified = [];
window.__hidden = false;
Object.defineProperty(Document.prototype, "hidden", { get: () => window.__hidden === true });
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options) { window.__notified.push([title, options.body]); }
};
"""


def test_a_reminder_arrives_live_as_nova_writing_first_and_notifies_a_tab_in_the_background(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    """The serve process's sweeper sends it; the page gets it over /api/events. The browser's
    Notification API is replaced by a spy (headless chromium shows none): what is checked is
    that the page calls it, for a hidden tab only."""
    page = watched.page
    page.add_init_script(NOTIFICATION_SPY)
    sign_in(page, nova.url, nova.keys["tia"])
    server.script("responder", Reply(content="Hello Tia."))
    send(page, "Hi Nova")
    expect(page.locator("#messages .message.nova .text")).to_have_text("Hello Tia.")
    server.script(
        "responder", Reply(content="Time to feed the Quorble!"), match=Match(contains="Quorble")
    )
    made = httpx.post(
        f"{nova.url}/api/proactive",
        json={"text": "feed the Quorble", "at": "in 5 minutes"},
        headers=nova.auth("tia"),
        timeout=30,
    )
    assert made.status_code == 200, made.text
    page.evaluate("window.__hidden = true")
    db = nova.db()
    try:  # due now: the server's sweeper (every server.poll_s) sends it
        past = (datetime.now(UTC) - timedelta(seconds=1)).isoformat(timespec="milliseconds")
        db.conn.execute("UPDATE events SET due_at = ? WHERE id = ?", (past, made.json()["id"]))
    finally:
        db.close()
    arrived = page.locator("#messages .message.followup")
    expect(arrived.locator(".text")).to_have_text("Time to feed the Quorble!", timeout=30_000)
    expect(arrived.locator(".who")).to_have_text("Nova, writing first")
    assert page.evaluate("window.__notified") == [
        ["Nova, writing first", "Time to feed the Quorble!"]
    ]
    page.reload()  # after a reload: stored in the conversation, labelled the same
    page.locator("#conversation-list button.conversation").first.click()
    expect(page.locator("#messages .message.followup .who")).to_have_text("Nova, writing first")


def test_the_memory_view_lists_what_is_scheduled_and_cancels_one(
    watched: Watched, nova: Nova
) -> None:
    page = watched.page
    for text, at in (("water the Fennikel", "tomorrow at 9"), ("call Oswaldine", "in 3 days")):
        made = httpx.post(
            f"{nova.url}/api/proactive",
            json={"text": text, "at": at},
            headers=nova.auth("uma"),
            timeout=30,
        )
        assert made.status_code == 200, made.text
    sign_in(page, nova.url, nova.keys["uma"])
    page.get_by_role("link", name="Memory").click()
    page.get_by_role("tab", name="Reminders").click()
    listed = page.locator("#panel-reminders li")
    expect(listed.locator(".reminder-text")).to_have_text(["water the Fennikel", "call Oswaldine"])
    expect(listed.first).to_contain_text("POST /api/proactive")  # its cause
    listed.first.get_by_role("button", name="Cancel").click()
    expect(listed.locator(".reminder-text")).to_have_text(["call Oswaldine"])
    left = httpx.get(f"{nova.url}/api/proactive", headers=nova.auth("uma"), timeout=30).json()
    assert [s["text"] for s in left["scheduled"]] == ["call Oswaldine"]
