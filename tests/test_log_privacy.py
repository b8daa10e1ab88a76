"""Logs at WARNING and above carry no text of the user, a model or a server.

Real servers quote the request in their error bodies (a validation error echoes the prompt), and
models choose tool names: a turn where the router, a judge and salience fail with such bodies
and the thinker calls a tool named after the user's word must leave that word out of every log
line at WARNING or above (``errors.error_kind`` names the kind of a failure instead)."""

from __future__ import annotations

import json
import logging

import pytest

from novaberg.engine import Engine
from novaberg.testing import OllamaTestServer, Reply

WORD = "Zanzibarquux"
ECHOING_500 = Reply.http_error(500, f"invalid input near '{WORD} is my cat'")


async def test_failures_are_logged_without_the_text_they_quote(
    engine: Engine, server: OllamaTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.standing("router", ECHOING_500)
    server.script("responder", Reply(content=f"{WORD} sounds lovely."))
    server.standing("judge_legal", ECHOING_500)
    server.standing("salience", ECHOING_500)
    engine.settings.thinker.mode = "always"
    server.script(
        "thinker",
        Reply(content=f"TOOL: {WORD}_lookup({{}})"),
        Reply(content="RESULT: OK"),
    )
    with caplog.at_level(logging.DEBUG, logger="novaberg"):
        result = await engine.run_turn(f"{WORD} is my cat.")
    assert WORD in result.reply
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING]
    # the failures were logged (so the test looks at real lines), each without the word
    assert any("router" in r.getMessage() for r in loud)
    assert any("unknown tool" in r.getMessage() for r in loud)
    assert [r.getMessage() for r in loud if WORD in r.getMessage()] == []
    # the call records keep what the server said, as data (forget scrubs it with the turn)
    errors = [c.error for c in result.trace.calls if c.caller == "router"]
    assert errors and all(WORD in e for e in errors)
    assert json.dumps(result.contract_json())  # the turn itself is whole
