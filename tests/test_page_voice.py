"""Talking with Nova in her page (issue 27, part 4), in headless Chromium with a fake
microphone that plays a WAV Nova herself spoke: Talk records, what Nova heard is put in the
message box to edit, the turn runs, and the reply is read aloud sentence by sentence (one
speech request per sentence; the audio element plays each to its end). Mute is remembered by
the browser and silences the next reply; a typed message's reply stays silent; "Send what I
say at once" sends without a click; the voice controls are labelled and work from the
keyboard."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova
from tests.web_helpers import CHROMIUM, DESKTOP, Watched, sign_in, watch

pytest.importorskip("faster_whisper", reason="the voice extra is not installed")

SAID = "Tomorrow I will walk to the park with my sister."
REPLY = "A walk in the park sounds lovely. Say hello to your sister for me!"
EVENTS = """() => {
    window.__played = [];
    const player = document.getElementById('voice-audio');
    for (const kind of ['play', 'ended', 'error']) {
        player.addEventListener(kind, () => window.__played.push(kind));
    }
}"""


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-voice") / "home"
    env = {"NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": "0"}
    with running_nova(ollama_server, home, ("ada", "bob"), extra_env=env) as started:
        yield started


@pytest.fixture(scope="module")
def microphone(nova: Nova, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What the fake microphone plays (over and over): Nova saying SAID, then a second of
    quiet."""
    spoken = httpx.post(
        f"{nova.url}/v1/audio/speech",
        json={"model": "tts-1", "voice": "nova", "input": SAID, "response_format": "wav"},
        headers=nova.auth(),
        timeout=60,
    )
    assert spoken.status_code == 200, spoken.text
    path = tmp_path_factory.mktemp("microphone") / "said.wav"
    path.write_bytes(spoken.content)
    return path


@pytest.fixture(scope="module")
def browser(microphone: Path) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no chromium at {CHROMIUM}: apt-get install chromium (make browser)")
    args = [
        "--no-sandbox",
        "--use-fake-ui-for-media-stream",  # the microphone is allowed without asking
        "--use-fake-device-for-media-stream",
        f"--use-file-for-fake-audio-capture={microphone}",
    ]
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=args)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    made = browser.new_context(viewport=DESKTOP)
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def watched(context: BrowserContext) -> Iterator[Watched]:
    page = context.new_page()
    page.set_default_timeout(30_000)
    seen = watch(page)
    yield seen
    assert not seen.unexpected(), seen.unexpected()


def speech_inputs(page: Page) -> list[str]:
    """The text of every speech request the page sends, from now on."""
    inputs: list[str] = []
    page.on(
        "request",
        lambda r: (
            inputs.append(str(r.post_data_json["input"]))
            if r.url.endswith("/v1/audio/speech")
            else None
        ),
    )
    return inputs


def talk(page: Page, seconds: float) -> None:
    """Press Talk from the keyboard, let the microphone run ``seconds``, press it again."""
    talk_button = page.get_by_role("button", name="Talk")
    talk_button.focus()
    page.keyboard.press("Space")
    done = page.get_by_role("button", name="Done talking")
    expect(done).to_have_attribute("aria-pressed", "true")
    page.wait_for_function(
        "ms => Number(document.getElementById('talk').dataset.recordedMs || 0) >= ms",
        arg=seconds * 1000,
    )
    page.keyboard.press("Space")


def test_push_to_talk_a_whole_turn_and_the_reply_is_read_aloud_sentence_by_sentence(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["ada"])
    page.evaluate(EVENTS)
    inputs = speech_inputs(page)
    talk(page, 3.5)
    box = page.get_by_label("Message to Nova")
    expect(box).to_have_value(re.compile("park", re.I))
    expect(page.locator("#voice-status")).to_contain_text("what Nova heard")
    heard = box.input_value()
    assert "sister" in heard.lower(), heard
    box.fill(heard + " Any ideas?")  # editable before it is sent
    server.script("responder", Reply(content=REPLY))
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages .message.user .text")).to_contain_text("Any ideas?")
    page.wait_for_function("() => window.__played.filter(k => k === 'ended').length >= 2")
    assert inputs == ["A walk in the park sounds lovely.", "Say hello to your sister for me!"]
    played = page.evaluate("window.__played")
    assert played == ["play", "ended", "play", "ended"], played
    expect(page.get_by_role("button", name="Stop speaking")).to_be_hidden()
    server.script("responder", Reply(content="Typed, so not read aloud."))
    box.fill("And now I type.")
    box.press("Control+Enter")
    expect(page.locator("#messages .message.nova .text").last).to_have_text(
        "Typed, so not read aloud."
    )
    expect(page.locator("#messages .message.nova").last).not_to_have_attribute("aria-busy", "true")
    assert len(inputs) == 2  # a typed message's reply stays silent


def test_mute_is_remembered_by_the_browser_and_silences_the_next_reply(
    watched: Watched, nova: Nova, server: OllamaTestServer, context: BrowserContext
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["bob"])
    mute = page.get_by_label("Mute Nova")
    mute.check()
    page.reload()  # the key stays for this tab; the switch is the browser's
    expect(page.locator("body[data-ready=true]")).to_be_attached()
    expect(page.get_by_label("Mute Nova")).to_be_checked()
    inputs = speech_inputs(page)
    server.script("responder", Reply(content="Quietly answered."))
    talk(page, 3.5)
    expect(page.get_by_label("Message to Nova")).to_have_value(re.compile("park", re.I))
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#messages .message.nova .text")).to_have_text("Quietly answered.")
    expect(page.locator("#messages .message.nova")).not_to_have_attribute("aria-busy", "true")
    assert inputs == []
    page.get_by_label("Mute Nova").uncheck()  # leave the browser as it was


def test_send_at_once_sends_what_was_heard_without_a_click(
    watched: Watched, nova: Nova, server: OllamaTestServer
) -> None:
    page = watched.page
    sign_in(page, nova.url, nova.keys["bob"])
    page.get_by_label("Send what I say at once").check()
    page.get_by_label("Mute Nova").check()
    server.script("responder", Reply(content="Heard and answered."))
    talk(page, 3.5)
    expect(page.locator("#messages .message.user .text")).to_contain_text(re.compile("park", re.I))
    expect(page.locator("#messages .message.nova .text")).to_have_text("Heard and answered.")
    expect(page.get_by_label("Message to Nova")).to_have_value("")
