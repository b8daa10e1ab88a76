"""The system-prompt echo guard: a reply that repeats Nova's instructions is never shown or kept.

Turns run through the real engine against the shipped test server, which streams a scripted
echo in 12-character pieces as a small model would generate it.
"""

from __future__ import annotations

import pytest

from novaberg.config import Settings
from novaberg.echo import ECHO_WORDS, EchoFilter, EchoGuard
from novaberg.engine import Engine
from novaberg.errors import ModelOutputError
from novaberg.nodes.responder import instruction_texts
from novaberg.prompts.templates import DE, EN
from novaberg.testing import OllamaTestServer, Reply

PERSONA_ECHO = EN.persona
"""What Gemma 3 270M answered to a greeting: the system prompt itself."""
GUARD = EchoGuard(instruction_texts(EN))


async def streamed(text: str, size: int = 5) -> tuple[str, EchoFilter]:
    """What reaches the screen when ``text`` streams through the filter in small pieces."""
    shown: list[str] = []
    stream = EchoFilter(GUARD, shown.append)
    for start in range(0, len(text), size):
        await stream.feed(text[start : start + size])
    await stream.finish(GUARD.find(text))
    return "".join(shown), stream


def test_a_reply_repeating_the_persona_is_an_echo_and_the_cut_keeps_the_rest() -> None:
    reply = f"Hallo Nova! Ich heiße Sam. {PERSONA_ECHO} Wie geht's?"
    echo = GUARD.find(reply)
    assert echo is not None and echo.words == len(PERSONA_ECHO.split())
    assert echo.cut(reply) == "Hallo Nova! Ich heiße Sam. Wie geht's?"


def test_case_and_punctuation_do_not_hide_an_echo() -> None:
    assert GUARD.find("you are NOVA a warm curious and honest companion — you talk") is not None


def test_nova_may_describe_herself_in_a_phrase_of_her_persona() -> None:
    reply = "I'm Nova, a warm, curious and honest companion. How was your day?"
    assert GUARD.find(reply) is None  # 7 words in a row: a self-description, not a copy
    assert ECHO_WORDS == 8


def test_the_users_own_memories_in_the_prompt_may_be_quoted_back() -> None:
    assert all("sister" not in text for text in instruction_texts(EN))
    reply = "You told me your sister Lena moves to Lisbon next week, right?"
    assert GUARD.find(reply) is None


async def test_a_stream_holds_back_the_start_of_an_echo_and_never_shows_it() -> None:
    shown, stream = await streamed(f"Hello Sam! {PERSONA_ECHO} Anyway.")
    assert shown == "Hello Sam! "
    assert stream.echoed


async def test_an_echo_cut_short_by_the_end_of_the_answer_is_not_shown_either() -> None:
    shown, _ = await streamed("Hi. You are Nova, a warm, curious and honest")  # exactly 8 words
    assert shown == "Hi. "


async def test_text_that_only_starts_like_the_persona_is_released_in_full() -> None:
    reply = "You are Nova's friend? How lovely, tell me more."
    shown, stream = await streamed(reply)
    assert shown == reply and not stream.echoed


async def test_an_echoed_reply_is_regenerated_and_never_streamed_or_stored(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=PERSONA_ECHO), Reply(content="Hi! Nice to meet you."))
    pieces: list[str] = []
    result = await engine.run_turn("Hallo Nova!", on_token=pieces.append)
    assert result.reply == "Hi! Nice to meet you."
    assert "".join(pieces) == "Hi! Nice to meet you."
    responder = [c for c in result.trace.calls if c.caller == "responder"]
    assert [c.outcome for c in responder] == ["malformed", "ok"]
    assert responder[0].error == (
        f"echo: the reply repeated {len(PERSONA_ECHO.split())} words of the system prompt; "
        "regenerated"
    )
    stored = engine.db.calls_of(result.turn_id)
    assert [c["outcome"] for c in stored if c["caller"] == "responder"] == ["malformed", "ok"]
    texts = [row["content"] for row in engine.db.query("SELECT content FROM messages ORDER BY id")]
    assert texts == ["Hallo Nova!", "Hi! Nice to meet you."]
    turn = engine.db.one("SELECT * FROM turns WHERE id = ?", (result.turn_id,))
    assert turn is not None and "honest companion" not in str(turn)
    judged = server.requests("/api/chat", caller="judge_persona")[0].body["messages"][1]
    assert "honest companion" not in judged["content"]  # the judges never saw it either


async def test_an_echo_twice_is_cut_and_recorded(engine: Engine, server: OllamaTestServer) -> None:
    server.script(
        "responder",
        Reply(content=f"{PERSONA_ECHO} Hello!"),
        Reply(content=f"Hello Sam! {PERSONA_ECHO}"),
    )
    pieces: list[str] = []
    result = await engine.run_turn("Hi, I'm Sam", on_token=pieces.append)
    assert result.reply == "Hello Sam!"
    assert "companion" not in "".join(pieces)
    responder = [c for c in result.trace.calls if c.caller == "responder"]
    assert [c.outcome for c in responder] == ["malformed", "malformed"]
    assert [c.error.rsplit("; ", 1)[1] for c in responder] == ["regenerated", "cut"]


async def test_nothing_but_echoes_fails_the_turn_cleanly(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=PERSONA_ECHO), Reply(content=PERSONA_ECHO))
    with pytest.raises(ModelOutputError, match="only its instructions twice"):
        await engine.run_turn("Hallo")
    assert engine.db.scalar("SELECT COUNT(*) AS n FROM messages") == 0


async def test_a_german_echo_is_caught_with_german_prompts(
    settings: Settings, server: OllamaTestServer
) -> None:
    settings.language = "de"
    server.script("responder", Reply(content=f"Hallo! {DE.persona}"), Reply(content="Hallo Sam!"))
    engine = await Engine.open(settings)
    try:
        result = await engine.run_turn("Hallo Nova")
    finally:
        await engine.aclose()
    assert result.reply == "Hallo Sam!"
    assert [c.outcome for c in result.trace.calls if c.caller == "responder"] == ["malformed", "ok"]
