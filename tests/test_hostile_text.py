"""No text becomes markup: hostile strings from a model, a server, a setting or the store are
printed as the text they are, by every command and in chat (in a real terminal).

Each string of the corpus is something Rich or a terminal would otherwise act on: markup that
crashes (``[/b]``), makes a hyperlink or styles, a type that loses its ``[int]``, an emoji code,
an ANSI colour, a bidi override, a zero-width joiner, a very long line.
"""

from __future__ import annotations

import json
import logging
import os
import pty
import select
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from novaberg.cli.common import VisibleFormatter
from novaberg.testing import OllamaTestServer, Reply
from novaberg.text import is_blank, json_visible, visible
from tests.test_cli import NOVABERG, run

CORPUS: list[tuple[str, str]] = [
    # (what a model/server/user sends, what must appear literally on the screen)
    ("close [/b] tag", "close [/b] tag"),
    ("[link=http://evil.example]click[/link]", "[link=http://evil.example]click[/link]"),
    ("install list[int] now", "install list[int] now"),
    ("[bold red]loud", "[bold red]loud"),
    ("say :smile: please", "say :smile: please"),
    ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
    ("abc\u202edef\u2066x\u2069", "abc\\u202edef\\u2066x\\u2069"),
    ("pay\u200dpal\u200bx", "pay\\u200dpal\\u200bx"),
]
HOSTILE = " | ".join(raw for raw, _ in CORPUS)
SHOWN = [shown for _, shown in CORPUS]
LONG = "w" * 3000
RAW_DANGER = ["\x1b]8;", "\x1b[31mred", "\u202e", "\u2066", "\u200d", "\u200b"]
"""What must never reach a terminal: an OSC 8 hyperlink, the model's ANSI colour, raw bidi
controls and zero-width characters."""


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide enough that no line of a message is wrapped where a test looks for it."""
    monkeypatch.setenv("COLUMNS", "2000")


def assert_literal(output: str, shown: list[str] = SHOWN) -> None:
    for text in shown:
        assert text in output, f"{text!r} not printed literally in:\n{output[-3000:]}"
    for danger in RAW_DANGER:
        assert danger not in output, f"raw {danger!r} reached the output"
    assert "Traceback" not in output


def strings(data: object) -> list[str]:
    """Every string inside parsed JSON."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [s for value in data.values() for s in strings(value)]
    if isinstance(data, list):
        return [s for value in data for s in strings(value)]
    return []


# -- the rule itself ---------------------------------------------------------------------------
def test_visible_escapes_hidden_characters_and_keeps_emoji_sequences() -> None:
    for raw, shown in CORPUS:
        assert visible(raw) == shown
    assert visible("a\tb\nc\r\nd\re") == "a\tb\nc\nd\\x0de"
    assert visible("👩\u200d💻 and ❤️\u200d🔥") == "👩\u200d💻 and ❤️\u200d🔥"  # emoji ZWJ sequences
    assert visible("\u2028\x9b\U000e0041") == "\\u2028\\x9b\\U000e0041"  # separator, CSI, tag


def test_json_output_escapes_hidden_characters_but_keeps_the_data() -> None:
    data = {"reply": HOSTILE + "\U000e0041\u2028"}
    encoded = json_visible(json.dumps(data, ensure_ascii=False))
    assert json.loads(encoded) == data
    assert "\\u202e" in encoded and "\\udb40\\udc41" in encoded
    assert not any(ch in encoded for ch in "\u202e\u200d\u2028\x1b")


def test_log_lines_show_hidden_characters_escaped() -> None:
    record = logging.LogRecord("novaberg", logging.INFO, __file__, 1, "got %s", (HOSTILE,), None)
    line = VisibleFormatter("%(message)s").format(record)
    assert_literal(line)


@pytest.mark.parametrize("text", ["\u200b\u200b", " \u200d\u2060 ", "\ufeff", "\u3164", ""])
def test_only_invisible_characters_is_blank(text: str) -> None:
    assert is_blank(text)
    assert not is_blank("\u200bx")


# -- ask -----------------------------------------------------------------------------------
def test_ask_prints_a_hostile_reply_and_follow_up_as_text(ollama_env: OllamaTestServer) -> None:
    ollama_env.standing(
        "router", Reply(content='{"intent": "q", "tone": "n", "needs_check": true}')
    )
    ollama_env.script(
        "responder", Reply(content=f"draft {HOSTILE} {LONG}"), Reply(content=f"later {HOSTILE}")
    )
    ollama_env.script("thinker", Reply.thinking_swallowed_answer("prose only"))
    ollama_env.script("thinker_nachfass", Reply(content="no"), Reply(content="none"))
    done = run("ask", "Wie hoch ist die Zugspitze?")
    assert done.returncode == 0, done.stderr
    assert_literal(done.stdout)
    assert LONG in done.stdout  # a very long line is printed whole, not wrapped
    assert done.stdout.index("draft") < done.stdout.index("later")  # the follow-up, after it


def test_ask_json_carries_hostile_text_exactly_with_nothing_hidden(
    ollama_env: OllamaTestServer,
) -> None:
    ollama_env.script("responder", Reply(content=HOSTILE))
    done = run("ask", "Hallo", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reply"] == HOSTILE
    assert not any(danger in done.stdout for danger in RAW_DANGER)


def test_ask_prints_a_hostile_server_error_body_as_text(ollama_env: OllamaTestServer) -> None:
    ollama_env.standing("responder", Reply.http_error(400, HOSTILE))
    done = run("ask", "Hallo")
    assert done.returncode == 1, done.stderr
    assert_literal(done.stderr)


@pytest.mark.parametrize("model", ["[/b]", "list[int]", "[link=http://evil.example]m[/link]"])
def test_ask_names_a_hostile_model_name_as_text(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", model)
    done = run("ask", "Hallo")
    assert done.returncode == 1
    assert_literal(done.stderr, [model, "qwen3:4b"])


# -- doctor --------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["list[int]", "[/b]", "[bold red]m"])
def test_doctor_advises_pulling_the_model_by_its_real_name(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", model)
    done = run("doctor")
    assert done.returncode == 1
    assert_literal(done.stdout + done.stderr, [f"ollama pull {model}"])


def test_doctor_shows_a_hostile_home_user_and_backend_error_as_text(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    home = tmp_path / "home [/b] [link=http://evil.example]x[/link]"
    monkeypatch.setenv("NOVABERG_HOME", str(home))
    monkeypatch.setenv("NOVABERG_USER", "[/b]eve")  # a hidden character is refused in a name
    monkeypatch.setenv("NOVABERG_MODEL", "[bold]\u202em")
    done = run("doctor")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout + done.stderr
    assert_literal(out, ["[/b]eve", "[bold]\\u202em", str(home)])
    assert "[/b]" in out.split("Database:", 1)[1]


# -- config --------------------------------------------------------------------------------
def test_config_shows_a_hostile_setting_value_as_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", "m [/b] [link=http://evil.example]x[/link]")
    monkeypatch.setenv("NOVABERG_SEARXNG_URL", "http://s/\x1b[31mred")
    done = run("config")
    assert done.returncode == 0, done.stderr
    assert_literal(done.stdout, ["m [/b] [link=http://evil.example]x[/link]", "\\x1b[31mred"])


@pytest.mark.parametrize("value", ["[/b]", "[link=http://evil.example]x[/link]", "[bold red]x"])
def test_a_hostile_bad_setting_is_a_usage_error_without_traceback(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("NOVABERG_LANGUAGE", value)
    done = run("config")
    assert done.returncode == 2, done.stderr
    assert "usage error" in done.stderr and "NOVABERG_LANGUAGE" in done.stderr
    assert_literal(done.stderr, [repr(value)[1:-1]])


@pytest.mark.parametrize("user", ["   ", "\u200b\u200b"])
def test_a_blank_novaberg_user_is_refused_like_the_option(
    monkeypatch: pytest.MonkeyPatch, user: str
) -> None:
    monkeypatch.setenv("NOVABERG_USER", user)
    done = run("config")
    assert done.returncode == 2 and "NOVABERG_USER" in done.stderr and "not empty" in done.stderr
    monkeypatch.delenv("NOVABERG_USER")
    option = run("memory", "list", "--user", user)
    assert option.returncode == 2 and "--user must not be empty" in option.stderr


def test_a_message_of_only_zero_width_characters_is_empty(ollama_env: OllamaTestServer) -> None:
    done = run("ask", "\u200b\u200d\u2060")
    assert done.returncode == 2 and "empty" in done.stderr
    assert ollama_env.requests("/api/chat") == []


# -- memory --------------------------------------------------------------------------------
def test_memory_commands_print_stored_hostile_text_as_text(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    summary = f"Summary {HOSTILE}"
    ollama_env.script("salience", Reply(content=json.dumps({"score": 0.9, "summary": summary})))
    ollama_env.script(
        "consolidate",
        Reply(content=json.dumps({"action": "new", "fact_id": None, "fact": f"Fact {HOSTILE}"})),
    )
    ollama_env.script(
        "profile_adaptive",
        Reply(content=json.dumps({"statements": [{"text": f"P {HOSTILE}", "sources": [2]}]})),
    )
    said = f"I said {HOSTILE}"
    done = run("ask", said)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(isolated_env / "novaberg.db") as db:
        db.execute("UPDATE events SET result = ? WHERE type = 'consolidate'", (f"J {HOSTILE}",))
    item = json.loads(run("memory", "list", "--kind", "short_term", "--json").stdout)[0]
    assert item["text"] == summary  # JSON keeps the data exactly
    for args in (
        ["list"],
        ["search", "Summary"],
        ["show", str(item["id"])],
        ["profile"],
        ["jobs"],
    ):
        shown = run("memory", *args)
        assert shown.returncode == 0, shown.stderr
        assert_literal(shown.stdout)
    assert "I said close [/b] tag" in run("memory", "show", str(item["id"])).stdout
    for args in (["list", "--json"], ["profile", "--json"], ["jobs", "--json"], ["export"]):
        out = run("memory", *args).stdout
        assert not any(danger in out for danger in RAW_DANGER), args
        assert any(HOSTILE in text for text in strings(json.loads(out))), args


# -- chat, in a real terminal ----------------------------------------------------------------
class Terminal:
    """``novaberg chat`` on a pseudo-terminal; everything it writes is kept as raw bytes."""

    def __init__(self) -> None:
        self.main, secondary = pty.openpty()
        env = dict(os.environ, TERM="xterm-256color", COLUMNS="4000", LINES="50")
        self.proc = subprocess.Popen(
            [*NOVABERG, "chat"],
            stdin=secondary,
            stdout=secondary,
            stderr=secondary,
            env=env,
            close_fds=True,
        )
        os.close(secondary)
        self.screen = b""

    def read_until(self, marker: bytes, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.screen:
            assert time.monotonic() < deadline, self.screen.decode(errors="replace")[-3000:]
            assert self.proc.poll() is None or select.select([self.main], [], [], 0)[0], (
                self.screen.decode(errors="replace")[-3000:]
            )
            ready, _, _ = select.select([self.main], [], [], 0.1)
            if ready:
                try:
                    self.screen += os.read(self.main, 65536)
                except OSError:
                    break

    def send(self, line: str) -> None:
        os.write(self.main, line.encode() + b"\r")

    def close(self) -> str:
        try:
            self.send("/exit")
            self.proc.wait(timeout=60)
            while select.select([self.main], [], [], 0.1)[0]:
                try:
                    chunk = os.read(self.main, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                self.screen += chunk
        finally:
            self.proc.kill()
            os.close(self.main)
        return self.screen.decode(errors="replace")


def test_chat_in_a_terminal_prints_hostile_replies_corrections_and_follow_ups_as_text(
    ollama_env: OllamaTestServer,
) -> None:
    check = '{"intent": "q", "tone": "n", "needs_check": true}'
    plain = '{"intent": "q", "tone": "n", "needs_check": false}'
    ollama_env.script("router", Reply(content=plain))
    ollama_env.standing("router", Reply(content=check))
    ollama_env.script(
        "responder",
        Reply(content=f"draft {HOSTILE}"),  # turn 1: the draft, revised by the corrector
        Reply(content=f"second {HOSTILE}"),  # turn 2: last resort …
        Reply(content=f"followup {HOSTILE} zz2end"),  # … and its second pass
    )
    ollama_env.script(
        "judge_psychology",
        Reply(content='{"vote": "revise", "reason": "cold"}'),
        Reply(content='{"vote": "ok", "reason": "fine"}'),
    )
    ollama_env.script("corrector", Reply(content=f"corrected {HOSTILE} zz1end"))
    ollama_env.script("thinker", Reply.thinking_swallowed_answer("prose only"))
    ollama_env.script("thinker_nachfass", Reply(content="no"), Reply(content="none"))
    term = Terminal()
    try:
        term.read_until(b"you")
        term.send("Hallo [/b] Nova")
        term.read_until(b"zz1end")
        term.read_until(b"you")
        term.send("Wie hoch ist die Zugspitze?")
        term.read_until(b"zz2end")
    finally:
        screen = term.close()
    assert term.proc.returncode == 0, screen[-3000:]
    for label in ("corrected", "followup"):
        line = next(line for line in screen.splitlines() if label in line and "pay" in line)
        assert_literal(line)
    assert_literal(screen)
    assert "(revised after review)" in screen and "let me go through that again" in screen
