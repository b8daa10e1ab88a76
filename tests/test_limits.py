"""Sizes are bounded (issue 13): every request carries its node's output limit, a reply is kept
up to ``limits.reply_chars``, history and situation are bounded by tokens, and every prompt fits
the context window with its subject whole — through real turns on the Ollama test server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.memory.store import MemoryStore
from novaberg.prompts.budget import (
    MESSAGE_TOKENS,
    context_window,
    cut_middle,
    cut_reply,
    estimate_tokens,
    fair_shares,
    messages_tokens,
    output_tokens,
)
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.ollama_server import RecordedRequest

SENTENCE = "Sailing on the lake at dawn is the calmest thing I know. "
LONG_REPLY = (SENTENCE * (200_000 // len(SENTENCE) + 1))[:200_000]
ROUTE_CHECK = Reply(content=json.dumps({"intent": "question", "tone": "warm", "needs_check": True}))


def salient(summary: str) -> Reply:
    return Reply(content=json.dumps({"score": 0.9, "summary": summary}))


def chats(server: OllamaTestServer, prefix: str = "") -> list[RecordedRequest]:
    return [r for r in server.requests("/api/chat") if r.caller.startswith(prefix)]


def prompt_text(request: RecordedRequest) -> str:
    return "\n".join(str(m.get("content") or "") for m in request.body["messages"])


def prompt_tokens(request: RecordedRequest) -> int:
    body = request.body
    schema = body.get("format") if isinstance(body.get("format"), dict) else None
    return messages_tokens(body["messages"], body.get("tools") or [], schema)


def trace_of(engine: Engine, turn_id: int) -> dict[str, Any]:
    turn = engine.db.turn(turn_id)
    assert turn is not None
    return dict(json.loads(turn["trace_json"]))


def limited(monkeypatch: pytest.MonkeyPatch, **env: str) -> Settings:
    for key, value in env.items():
        monkeypatch.setenv(f"NOVABERG_{key}", value)
    return load_settings().settings


@pytest.fixture
async def small_engine(
    monkeypatch: pytest.MonkeyPatch, ollama_env: OllamaTestServer
) -> AsyncIterator[Engine]:
    """A 1,024-token window, the thinker always on, generous memory retrieval."""
    settings = limited(
        monkeypatch,
        LIMITS__CONTEXT_TOKENS="1024",
        THINKER__MODE="always",
        MEMORY__BUDGET_TOKENS="8000",
        MEMORY__MAX_ITEMS="30",
    )
    engine = await Engine.open(settings)
    try:
        yield engine
    finally:
        await engine.aclose()


def fill_memory(engine: Engine, items: int = 30, chars: int = 1500) -> None:
    """Many long memories, a huge profile and a crowded timeline for the default user."""
    store = MemoryStore(engine.db)
    user = engine.settings.user
    with engine.db.transaction() as c:
        for i in range(items):
            text = f"Memory {i} about sailing and boats: " + "the wind was strong. " * (chars // 21)
            MemoryStore.add(c, user, "short_term", text, 0.9, f"test:{i}")
    store.set_profile_text(user, "core", "Loves sailing and long stories. " * 600)
    store.set_profile_text(user, "adaptive", "Lately busy with the boat. " * 600)
    for day in range(12):
        store.add_event(user, f"2031-01-{day + 1:02d}", "Regatta practice. " * 60, f"ev:{day}")


# -- the reply ------------------------------------------------------------------------------------
async def test_a_200k_reply_is_stored_cut_to_reply_chars_with_a_notice(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=LONG_REPLY))
    result = await engine.run_turn("Tell me about sailing.")
    limit = engine.settings.limits.reply_chars
    assert len(result.reply) <= limit
    assert result.reply.endswith("I know.")  # cut after a whole sentence
    assert LONG_REPLY.startswith(result.reply)
    stored = engine.db.query(
        "SELECT content FROM messages WHERE turn_id = ? AND role = 'assistant'", (result.turn_id,)
    )
    assert [row["content"] for row in stored] == [result.reply]
    trace = trace_of(engine, result.turn_id)
    assert trace["draft"] is None  # the reply is the draft (cut): stored once, as the reply
    notices = [n for n in trace["notices"] if n.startswith("responder: reply cut")]
    assert notices == [
        f"responder: reply cut from 200000 to {len(result.reply)} characters "
        f"(limits.reply_chars = {limit})"
    ]
    assert SENTENCE.strip() not in json.dumps(trace["notices"])  # never the text itself


async def test_judges_and_salience_are_sent_the_cut_reply_not_200k(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=LONG_REPLY))
    result = await engine.run_turn("Tell me about sailing.")
    judging = chats(server, "judge_") + chats(server, "salience")
    assert sorted(r.caller for r in judging) == [
        "judge_legal",
        "judge_persona",
        "judge_psychology",
        "salience",
    ]
    for request in judging:
        text = prompt_text(request)
        assert len(text) < 2 * engine.settings.limits.reply_chars, request.caller
        assert result.reply[-200:] in text or request.caller == "salience", request.caller
        assert prompt_tokens(request) + request.body["options"]["num_predict"] <= 4096


async def test_the_next_turn_sends_history_within_history_tokens(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=LONG_REPLY), Reply(content="Sure."))
    first = await engine.run_turn("Tell me about sailing.")
    second = await engine.run_turn("And rowing?", conversation_id=first.conversation_id)
    messages = chats(server, "responder")[-1].body["messages"]
    assert messages[0]["role"] == "system" and messages[-1]["content"] == "And rowing?"
    history = messages[1:-1]
    assert history and history[0]["role"] == "user"  # a chat template wants the user first
    spent = sum(MESSAGE_TOKENS + estimate_tokens(m["content"]) for m in history)
    assert spent <= engine.settings.limits.history_tokens
    notices = trace_of(engine, second.turn_id)["notices"]
    assert any(n.startswith("responder: history:") for n in notices), notices


async def test_a_streamed_reply_stops_at_reply_chars(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content=LONG_REPLY))
    pieces: list[str] = []
    result = await engine.run_turn("Tell me about sailing.", on_token=pieces.append)
    shown = "".join(pieces)
    assert len(shown) <= engine.settings.limits.reply_chars
    assert shown.startswith(result.reply)


# -- output limits ------------------------------------------------------------------------------
async def test_every_request_carries_its_nodes_output_limit(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", salient("The user sails at dawn."))
    await engine.run_turn("I sail at dawn.")
    limits = {r.caller: r.body["options"]["num_predict"] for r in chats(server)}
    assert limits == {
        "router": 96,
        "responder": 512,
        "judge_legal": 160,
        "judge_psychology": 160,
        "judge_persona": 160,
        "salience": 160,
    }


# -- the window ---------------------------------------------------------------------------------
async def test_with_a_small_window_every_request_fits_the_estimate(
    small_engine: Engine, server: OllamaTestServer
) -> None:
    fill_memory(small_engine)
    server.standing("router", ROUTE_CHECK)
    server.script("responder", Reply(content=LONG_REPLY))
    tool = 'TOOL: memory_search({"query": "sailing boats wind"})'
    server.script(
        "thinker",
        Reply(content=tool),
        Reply(content=tool),
        Reply.thinking_swallowed_answer("Let me weigh this. " * 3000),
    )
    server.script("thinker_nachfass", Reply(content="RESULT: REVISED\n" + LONG_REPLY))
    server.script("judge_legal", Reply(content='{"vote": "revise", "reason": "too long"}'))
    server.script("corrector", Reply(content=LONG_REPLY))
    result = await small_engine.run_turn("Tell me about sailing. " * 40)
    callers = [r.caller for r in chats(server)]
    for caller in ("thinker", "thinker_nachfass", "corrector", "salience"):
        assert caller in callers
    assert callers.count("thinker") == 3
    for request in chats(server):
        output = request.body["options"]["num_predict"]
        assert prompt_tokens(request) + output <= 1024, request.caller
    assert len(result.reply) <= small_engine.settings.limits.reply_chars
    notices = trace_of(small_engine, result.turn_id)["notices"]
    assert any(n.startswith("thinker: an earlier tool result cut") for n in notices), notices
    assert any(n.startswith("thinker: reply cut") for n in notices), notices  # RESULT: REVISED
    assert any(n.startswith("corrector: reply cut") for n in notices), notices
    for request in chats(server, "judge_") + chats(server, "corrector") + chats(server, "salience"):
        # fitted by the rule that keeps the subject: the last-resort cut of whole messages
        # never touched a judging prompt, whose subject block is there, with the message whole
        prompt = request.body["messages"][-1]["content"]
        assert prompt.count("=== SUBJECT") == 1, request.caller
        assert ("Tell me about sailing. " * 40).strip() in prompt, request.caller
    assert not [n for n in notices if "a message (" in n and not n.startswith("thinker")]


async def test_the_subject_is_whole_in_a_judge_prompt_when_memory_and_profile_are_huge(
    monkeypatch: pytest.MonkeyPatch, ollama_env: OllamaTestServer
) -> None:
    settings = limited(monkeypatch, MEMORY__BUDGET_TOKENS="8000", MEMORY__MAX_ITEMS="30")
    engine = await Engine.open(settings)
    try:
        fill_memory(engine)
        message = "Which boat should I take for sailing tomorrow, and why? " * 20
        answer = "Take the small dinghy: the wind is light and it turns quickly. " * 50
        ollama_env.script("responder", Reply(content=answer))
        result = await engine.run_turn(message)
    finally:
        await engine.aclose()
    assert result.reply == answer.strip()
    notices = result.trace.notices
    for request in chats(ollama_env, "judge_"):
        text = request.body["messages"][-1]["content"]
        subject = text[text.index("=== SUBJECT") :]
        assert message.strip() in subject and answer.strip() in subject, request.caller
        assert "profile" in text.lower() or "Profile" in text
        assert prompt_tokens(request) + request.body["options"]["num_predict"] <= 4096
        assert any(n.startswith(f"{request.caller}: ") for n in notices), request.caller
    salience = chats(ollama_env, "salience")[0].body["messages"][-1]["content"]
    assert salience.rstrip().endswith(message.strip())  # its subject, whole and last


# -- the rules ----------------------------------------------------------------------------------
def test_a_reply_is_cut_at_a_sentence_then_a_word_boundary() -> None:
    assert cut_reply("Short.", 200) == "Short."
    text = "One sentence here. " * 30
    cut = cut_reply(text, 200)
    assert len(cut) <= 200 and cut.endswith("here.")
    words = "word " * 100
    cut = cut_reply(words, 200)
    assert len(cut) <= 200 and cut.endswith("word …")
    assert len(cut_reply("x" * 500, 200)) == 200


def test_the_estimate_leans_high_and_a_middle_cut_keeps_both_ends() -> None:
    english = "The quick brown fox jumps over the lazy dog. " * 10
    assert estimate_tokens(english) >= len(english) / 4  # real tokenizers: about 4 chars/token
    assert estimate_tokens("日本語のテキスト") >= 8  # at least one token per CJK character
    cut = cut_middle("A" * 3000 + "B" * 3000, 200)
    assert estimate_tokens(cut) <= 200
    assert cut.startswith("A") and cut.endswith("B") and "characters left out" in cut


def test_the_embedded_model_caps_the_window_at_embedded_ctx(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = limited(monkeypatch, LIMITS__CONTEXT_TOKENS="8192", EMBEDDED_CTX="2048")
    assert context_window(settings, ["ollama"]) == 8192
    assert context_window(settings, ["ollama", "embedded"]) == 2048
    assert output_tokens("thinker", 2048) == 512  # never more than a quarter of the window
    assert output_tokens("judge_brevity", 4096) == 160  # a custom judge is a judge


def test_fair_shares_keep_small_parts_whole_and_split_the_rest() -> None:
    assert fair_shares([10, 1000, 20], 200) == [10, 170, 20]
    assert fair_shares([500, 500], 200) == [100, 100]
    assert fair_shares([5, 5], 200) == [5, 5]
