"""The ``novaberg`` command as a user runs it: real processes against the test server."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import CONTRACT_KEYS

NOVABERG = [sys.executable, "-m", "novaberg"]


def run(
    *args: str, input: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOVABERG, *args],
        capture_output=True,
        text=True,
        input=input,
        timeout=timeout,
        env=dict(os.environ),
    )


def test_ask_json_prints_the_contract_with_one_record_per_call(
    ollama_env: OllamaTestServer,
) -> None:
    ollama_env.script("responder", Reply(content="Hallo! Wie geht es dir?"))
    done = run("ask", "Hallo Nova", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == CONTRACT_KEYS
    assert out["reply"] == "Hallo! Wie geht es dir?"
    sent = [r.caller for r in ollama_env.requests("/api/chat")]
    recorded = [c["caller"] for c in out["calls"]]
    # one record per request; the judges run concurrently, so their order may differ
    assert sorted(recorded) == sorted(sent)
    assert recorded[:2] == ["router", "responder"] and recorded[-1] == "salience"
    assert sorted(recorded[2:5]) == ["judge_legal", "judge_persona", "judge_psychology"]


def test_ask_prints_just_the_reply_without_json(ollama_env: OllamaTestServer) -> None:
    ollama_env.script("responder", Reply(content="Just this."))
    done = run("ask", "Hallo")
    assert done.returncode == 0 and done.stdout == "Just this.\n"


def test_unreachable_ollama_in_ollama_mode_names_ollama_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    done = run("ask", "Hallo")
    assert done.returncode == 1
    assert "OLLAMA_HOST" in done.stderr and "not reachable" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_model_lists_the_installed_ones(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", "mistral:7b")
    done = run("ask", "Hallo")
    assert done.returncode == 1
    assert (
        "mistral:7b" in done.stderr and "qwen3:4b" in done.stderr and "gemma3:270m" in done.stderr
    )


@pytest.mark.parametrize("text", ["", "  ", "y" * 9000])
def test_empty_or_oversized_message_is_a_usage_error(
    ollama_env: OllamaTestServer, text: str
) -> None:
    done = run("ask", text)
    assert done.returncode == 2 and "usage error" in done.stderr
    assert ollama_env.requests("/api/chat") == []


def test_invalid_setting_is_a_usage_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVABERG_LANGUAGE", "fr")
    done = run("config")
    assert done.returncode == 2
    assert "NOVABERG_LANGUAGE='fr'" in done.stderr


def test_config_shows_values_and_origins(ollama_env: OllamaTestServer) -> None:
    done = run("config", "--json")
    shown = json.loads(done.stdout)
    assert shown["backend"]["value"] == "ollama"
    assert shown["backend"]["origin"] == "env NOVABERG_BACKEND"
    assert shown["backend"]["description"].startswith("the primary backend")
    assert shown["model"]["origin"] == "default"
    assert shown["timeouts.total_s"]["value"] == 600.0


def test_doctor_reports_the_answering_backend_and_capabilities(
    ollama_env: OllamaTestServer,
) -> None:
    done = run("doctor", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["would_answer"] == "ollama/qwen3:4b"
    assert report["backends"][0]["capabilities"] == ["completion", "tools", "thinking"]
    assert report["fixes"] == []


def test_doctor_says_what_runs_the_embedder_and_how_to_get_onnxruntime_back(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = run("doctor", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    vectors = json.loads(done.stdout)["vectors"]
    assert (vectors["embedder"], vectors["runtime"]) == ("minilm-l6-v2", "onnxruntime")
    # an onnxruntime that cannot be imported (shadowed here by a package that fails to)
    shadow = tmp_path / "shadow" / "onnxruntime"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no onnxruntime here')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    done = run("doctor", "--json")
    report = json.loads(done.stdout)
    assert report["vectors"]["runtime"] == "numpy"
    [fix] = [f for f in report["fixes"] if "onnxruntime" in f]
    assert "minilm-l6-v2 runs in numpy" in fix and "pip install 'onnxruntime==" in fix
    shown = run("doctor").stdout
    assert "embedder minilm-l6-v2 (numpy)" in shown


def test_doctor_says_what_to_fix_for_a_missing_model(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", "mistral:7b")
    done = run("doctor")
    assert done.returncode == 1
    assert "ollama pull mistral:7b" in done.stdout


def test_chat_answers_each_line_in_one_conversation(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    ollama_env.script("responder", Reply(content="First answer."), Reply(content="Second answer."))
    done = run("chat", input="Hallo\nNoch was\n/exit\n")
    assert done.returncode == 0, done.stderr
    assert "First answer." in done.stdout and "Second answer." in done.stdout
    with sqlite3.connect(isolated_env / "novaberg.db") as db:
        conversations = db.execute("SELECT DISTINCT conversation_id FROM turns").fetchall()
    assert len(conversations) == 1


def test_chat_runs_the_memory_jobs_during_the_next_turn_and_before_it_leaves(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    fact = "The user's sister is called Lena."
    said = '{"score": 0.9, "summary": "%s"}'
    ollama_env.script("salience", Reply(content=said % fact), Reply(content=said % "Lena sings."))
    ollama_env.standing("consolidate", Reply(content='{"action": "new", "fact": "A fact."}'))
    ollama_env.standing("profile_adaptive", Reply(content='{"statements": []}'))
    done = run("chat", input="My sister is Lena.\nShe sings.\n/exit\n")
    assert done.returncode == 0, done.stderr
    assert "sorting her memories" in done.stdout
    with sqlite3.connect(isolated_env / "novaberg.db") as db:
        jobs = db.execute("SELECT type, status FROM events ORDER BY id").fetchall()
        facts = db.execute("SELECT COUNT(*) FROM memories WHERE kind = 'long_term'").fetchone()
    assert [j for j in jobs if j[1] in ("pending", "running")] == []
    assert [j[0] for j in jobs].count("consolidate") == 2 and facts == (2,)


def test_ctrl_c_mid_turn_aborts_that_turn_and_the_next_one_works(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    ollama_env.script(
        "responder", Reply(content="never shown", delay_s=30), Reply(content="Second turn works.")
    )
    proc = subprocess.Popen(
        [*NOVABERG, "chat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write("Erzähl mir eine lange Geschichte\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while not ollama_env.requests("/api/chat", caller="responder"):
            assert time.monotonic() < deadline, "the turn never reached the responder"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)
        proc.stdin.write("Bist du noch da?\n/exit\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Turn aborted" in out and "Second turn works." in out
    assert "never shown" not in out
    with sqlite3.connect(isolated_env / "novaberg.db") as db:
        statuses = [r[0] for r in db.execute("SELECT status FROM turns ORDER BY id")]
        messages = db.execute("SELECT role, content FROM messages ORDER BY id").fetchall()
    assert statuses == ["aborted", "done"]
    assert messages == [("user", "Bist du noch da?"), ("assistant", "Second turn works.")]


class Screen:
    """What a program wrote to its pseudo-terminal, read as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.data = b""

    def read_until(self, marker: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.data:
            assert time.monotonic() < deadline, self.data.decode(errors="replace")[-2000:]
            if select.select([self.fd], [], [], 0.1)[0]:
                try:
                    self.data += os.read(self.fd, 4096)
                except OSError:
                    break


def test_chat_in_a_terminal_shows_the_running_node_then_streams_the_reply(
    ollama_env: OllamaTestServer,
) -> None:
    ollama_env.script(
        "router", Reply(content='{"intent": "x", "tone": "y", "needs_check": false}', delay_s=0.5)
    )
    ollama_env.script("responder", Reply(content="Streamed to a real terminal.", delay_s=0.3))
    main, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="100")
    proc = subprocess.Popen(
        [*NOVABERG, "chat"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    screen = Screen(main)

    try:
        screen.read_until(b"you")
        os.write(main, b"Hallo Nova\r")
        screen.read_until(b"Streamed to a real terminal.")
        os.write(main, b"/exit\r")
        proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(main)
    text = screen.data.decode(errors="replace")
    assert "Nova · router" in text  # the live line named the running node
    assert "Nova · responder" in text or "Nova ›" in text
    assert proc.returncode == 0


def test_chat_keeps_what_is_typed_while_a_reply_streams_out_of_the_reply(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    """Typed while Nova's reply streams: not echoed into it, and sent as the next message."""
    reply = "A reply that streams slowly, word by word, to the end."
    ollama_env.script("responder", Reply(content=reply, chunk_delay_s=0.15))
    ollama_env.script("responder", Reply(content="Answer to what you typed ahead."))
    main, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="200")
    proc = subprocess.Popen(
        [*NOVABERG, "chat"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
    )
    os.close(secondary)
    screen = Screen(main)

    try:
        screen.read_until(b"you")
        os.write(main, b"Hallo Nova\r")
        screen.read_until(b"word by")  # the reply is streaming
        os.write(main, b"typed aheaX\x7fd\r")  # with a backspace
        screen.read_until(b"Answer to what you typed ahead.")
        streamed = screen.data[: screen.data.index(b"Answer to what you typed ahead.")]
        os.write(main, b"/exit\r")
        proc.wait(timeout=30)
    finally:
        proc.kill()
        os.close(main)
    before_end = streamed[: streamed.index(b"to the end.")]
    assert b"typed" not in before_end  # nothing echoed into the streaming reply
    assert b"typed ahead" in streamed[streamed.index(b"to the end.") :]  # shown at the prompt
    with sqlite3.connect(isolated_env / "novaberg.db") as db:
        said = [r[0] for r in db.execute("SELECT content FROM messages WHERE role = 'user'")]
    assert said == ["Hallo Nova", "typed ahead"]
    assert proc.returncode == 0


def test_chat_shows_a_revised_answer_below_the_streamed_draft(ollama_env: OllamaTestServer) -> None:
    ollama_env.script("responder", Reply(content="A cold draft."))
    ollama_env.script(
        "judge_psychology",
        Reply(content='{"vote": "revise", "reason": "cold"}'),
        Reply(content='{"vote": "ok", "reason": "fine"}'),
    )
    ollama_env.script("corrector", Reply(content="A warmer answer."))
    done = run("chat", input="Mir geht's schlecht.\n/exit\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.index("A cold draft.") < done.stdout.index("(revised after review)")
    assert done.stdout.index("(revised after review)") < done.stdout.index("A warmer answer.")


def test_chat_says_a_streamed_reply_was_cut_not_revised(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_LIMITS__REPLY_CHARS", "200")
    ollama_env.script("responder", Reply(content="A sentence that goes on and on. " * 40))
    done = run("chat", input="Erzähl mir was.\n/exit\n")
    assert done.returncode == 0, done.stderr
    assert "(revised after review)" not in done.stdout
    assert "(too long: Nova keeps the first" in done.stdout


def test_eval_reports_every_seed_scenario_on_the_configured_backend(
    ollama_env: OllamaTestServer,
) -> None:
    done = run("eval", "--json", timeout=120)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["scenario"] for r in rows] == [
        "appointment",
        "knowledge",
        "personal_data",
        "overwhelmed",
        "drift",
    ]
    for row in rows:
        assert row["rounds"] == 1 and row["calls"] == 6
        assert set(row["votes"]) == {"legal", "psychology", "persona"}
        assert row["seed_before"] and row["seed_after"]
    assert rows[-1]["drift"] is False and rows[0]["drift"] is None
    appointment_judge = next(
        r for r in ollama_env.requests("/api/chat") if r.caller == "judge_legal"
    )
    prompt = appointment_judge.body["messages"][-1]["content"]
    situation = prompt[: prompt.index("=== SUBJECT")]
    assert "TÜV" in situation and "Peter's birthday" in situation  # the scenario was seeded


def test_eval_rejects_an_unknown_scenario(ollama_env: OllamaTestServer) -> None:
    done = run("eval", "--scenario", "nope")
    assert done.returncode == 2 and "appointment" in done.stderr


def test_chat_prints_a_self_triggered_follow_up_after_the_reply(
    ollama_env: OllamaTestServer,
) -> None:
    check = '{"intent": "question", "tone": "neutral", "needs_check": true}'
    ollama_env.standing("router", Reply(content=check))
    ollama_env.script(
        "responder",
        Reply(content="A shaky draft."),
        Reply(content="Having looked again: here is the clear answer."),
    )
    ollama_env.script("thinker", Reply.thinking_swallowed_answer("prose only"))
    ollama_env.script("thinker_nachfass", Reply(content="no decision"), Reply(content="none"))
    done = run("chat", input="Wie hoch ist die Zugspitze?\n/exit\n")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.index("A shaky draft.") < out.index("let me go through that again")
    assert out.index("let me go through that again") < out.index("here is the clear answer")
    assert out.count("A shaky draft.") == 1  # the gesture is appended, the draft not repeated
    assert "(revised after review)" not in out
