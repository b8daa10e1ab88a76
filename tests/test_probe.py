"""``novaberg probe`` against the shipped test server, each fault scripted at an exact rate.

In-process runs (``run_probe`` with the experiments under test) keep the counts' tests fast;
the command's own behaviour (exit codes, ``--json``, safe printing) runs as a user runs it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.config import Settings, load_settings
from novaberg.probe import (
    EXPERIMENTS,
    ProbeReport,
    run_probe,
    structured,
    think_flag,
    think_split,
    tools,
    truncation,
)
from novaberg.probe.context import Experiment
from novaberg.storage.db import Database
from novaberg.testing import Match, OllamaTestServer, Reply

NOVABERG = [sys.executable, "-m", "novaberg"]
PROBE_CALLERS = {
    "probe_think_split",
    "probe_tools",
    "probe_json",
    "probe_truncation",
    "probe_think_flag",
    "probe_latency",
}
CASE1 = Reply.thinking_swallowed_answer("The year is wrong; it was 1889.", "RESULT: OK")
CASE2 = Reply.thinking_swallowed_answer("The draft says 1899, but I believe it was 1889.")
CLEAN = Reply(content="RESULT: OK", thinking="Checked the year.")


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*NOVABERG, *args], capture_output=True, text=True, timeout=timeout, env=dict(os.environ)
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "probe.db")
    try:
        yield database
    finally:
        database.close()


async def probe(
    settings: Settings, db: Database, *experiments: Experiment, trials: int
) -> ProbeReport:
    return await run_probe(settings, db, trials=trials, experiments=experiments)


def chat_callers(server: OllamaTestServer, path: str = "/api/chat") -> list[str]:
    return [r.headers.get("x-novaberg-caller", "") for r in server.requests(path)]


# -- the faults, counted exactly ---------------------------------------------------------------
async def test_think_split_counts_case1_and_case2_exactly_as_scripted(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    server.script_mix("probe_think_split", [(CASE2, 7), (CASE1, 3), (CLEAN, 10)])
    report = await probe(settings, store, think_split.EXPERIMENT, trials=20)
    result = report.experiments[0]
    assert result.counts == {"clean": 10, "case1": 3, "case2": 7}
    assert not result.skipped and result.errors == 0
    assert chat_callers(server) == ["probe_think_split"] * 20  # the header, seen by the server
    bodies = [r.body for r in server.requests("/api/chat")]
    assert all(b["think"] is True and b["tools"] for b in bodies)  # the thinker's protocol
    texts = {v.fault: v.text for v in result.verdicts}
    assert texts["case 2 (prose only in thinking)"].startswith(
        "seen in 7 of 20: Novaberg's ThinkSplitNormalizer will handle it"
    )
    assert texts["case 1 (decision at the end of thinking)"].startswith("seen in 3 of 20")
    assert server.pending() == {}


async def test_undeclared_tool_is_dropped_exactly_as_often_as_scripted(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    call = Reply.dropped_tool_call("lookup_order", {"order_id": "4711"})
    server.script_rate(
        "probe_tools",
        call,
        14,
        20,
        otherwise=Reply(content="I cannot look that up."),
        match=Match(lacks="lookup_order"),
    )
    # declared: the same call comes through, except one empty answer with tokens generated
    server.script_mix(
        "probe_tools",
        [(call, 19), (Reply(content="", eval_count=25), 1)],
        match=Match(declares="lookup_order"),
    )
    report = await probe(settings, store, tools.EXPERIMENT, trials=20)
    result = report.experiments[0]
    assert result.counts == {"declared_dropped": 1, "undeclared_dropped": 14}
    assert result.detail["declared"]["called"] == 19
    assert result.detail["undeclared"]["answered_in_text"] == 6
    assert chat_callers(server) == ["probe_tools"] * 40
    assert server.pending() == {}


async def test_structured_output_counts_valid_json_per_prompt_with_and_without_format(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    router_json = Reply(content='{"intent": "sharing", "tone": "warm", "needs_check": false}')
    # without format, the router's prompt gets valid JSON in 3 of 5; the others get the
    # server's echo (not JSON); with format the server answers valid JSON for every schema
    server.script_rate(
        "probe_json",
        router_json,
        3,
        5,
        otherwise=Reply(content="Sure! Here you go."),
        match=Match(format=False, contains="Classify the user's message"),
    )
    report = await probe(settings, store, structured.EXPERIMENT, trials=5)
    result = report.experiments[0]
    assert result.counts == {"valid": 15 + 3, "invalid": 2 + 10}
    per_prompt = result.detail["per_prompt"]
    assert per_prompt["router"]["prompt"] == {"valid": 3, "invalid": 2, "errors": 0}
    assert per_prompt["router"]["format"] == {"valid": 5, "invalid": 0, "errors": 0}
    assert per_prompt["judge_legal"]["prompt"]["invalid"] == 5
    assert set(chat_callers(server)) == {"probe_json"}
    with_format = [r.body for r in server.requests("/api/chat") if r.body.get("format")]
    assert len(with_format) == 15 and all(r["think"] is False for r in with_format)


async def test_a_prompt_cut_silently_is_measured_with_the_context_the_server_claims(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    report = await probe(settings, store, truncation.EXPERIMENT, trials=2)
    result = report.experiments[0]
    assert result.counts == {"refused": 0, "cut": 2, "marker_kept": 0, "marker_lost": 2}
    assert result.detail["effective_context"] == 4096  # what the server read of the prompt
    assert result.detail["claimed_context"] == 40960  # /api/show: what the model could take
    assert result.detail["loaded_context"] == 4096  # /api/ps
    cuts = server.truncations()
    assert len(cuts) == 2 and all(c.caller == "probe_truncation" for c in cuts)
    assert all(c.prompt > 4096 for c in cuts)


async def test_a_server_without_api_ps_is_probed_with_its_loaded_context_unknown(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    """Some Ollama-compatible proxies have no /api/ps: its 404 is not a missing model."""
    server.state.no_ps = True
    report = await probe(settings, store, truncation.EXPERIMENT, trials=1)
    result = report.experiments[0]
    assert result.counts["cut"] == 1 and result.detail["claimed_context"] == 40960
    assert result.detail["loaded_context"] is None
    assert "not installed" not in json.dumps(report.__dict__, default=str)


async def test_a_server_that_caps_the_context_below_num_ctx_gets_a_smaller_setting_advised(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    server.standing("probe_truncation", Reply.context_cut("I do not know.", context=2048))
    report = await probe(settings, store, truncation.EXPERIMENT, trials=1)
    result = report.experiments[0]
    assert result.counts["cut"] == 1 and result.detail["effective_context"] == 2048
    advice = result.verdicts[-1]
    assert advice.fault == "effective context below limits.context_tokens"
    assert "set limits.context_tokens to 2048 or less" in advice.text


async def test_a_server_that_refuses_an_oversized_prompt_is_reported_as_refusing(
    monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer, store: Database
) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "openai")
    monkeypatch.setenv("NOVABERG_OPENAI_URL", f"{server.url}/v1")
    monkeypatch.setenv("NOVABERG_OPENAI_MODEL", "qwen3:4b")
    server.state.v1_overflow = "refuse"
    report = await probe(load_settings().settings, store, truncation.EXPERIMENT, trials=2)
    result = report.experiments[0]
    assert report.backend == "openai"
    assert result.counts["refused"] == 2 and result.counts["cut"] == 0
    assert result.verdicts[0].text.startswith("seen in 2 of 2")
    assert chat_callers(server, "/v1/chat/completions") == ["probe_truncation"] * 2


async def test_think_flag_counts_thinking_when_omitted_and_despite_think_false(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    server.script_rate(
        "probe_think_flag",
        Reply(content="Rayleigh scattering.", thinking="Light scatters.", thinks=True),
        4,
        10,
        match=Match(think=False),
    )
    report = await probe(settings, store, think_flag.EXPERIMENT, trials=10)
    result = report.experiments[0]
    assert result.counts == {"thinks_when_omitted": 10, "thinks_when_false": 4}
    bodies = [r.body for r in server.requests("/api/chat")]
    assert sum(1 for b in bodies if "think" not in b) == 10  # omitted, really
    assert sum(1 for b in bodies if b.get("think") is False) == 10
    assert result.detail["capabilities"] == ["completion", "tools", "thinking"]


async def test_a_model_without_tools_or_thinking_gets_those_experiments_skipped(
    monkeypatch: pytest.MonkeyPatch, ollama_env: OllamaTestServer, store: Database
) -> None:
    monkeypatch.setenv("NOVABERG_MODEL", "gemma3:270m")  # completion only
    report = await probe(load_settings().settings, store, *EXPERIMENTS, trials=2)
    by_name = {e.name: e for e in report.experiments}
    for name in ("think_split", "dropped_tool_call", "think_flag"):
        assert by_name[name].skipped, name
        assert by_name[name].counts == {} and by_name[name].trials == 0  # never "passed"
        assert "capability" in by_name[name].reason
    assert not by_name["structured_output"].skipped
    assert not by_name["latency"].skipped
    sent = set(chat_callers(ollama_env))
    assert sent == {"probe_json", "probe_truncation", "probe_latency"}


async def test_an_experiment_whose_every_request_fails_is_skipped_not_passed(
    settings: Settings, server: OllamaTestServer, store: Database
) -> None:
    server.standing("probe_tools", Reply.http_error(500))
    report = await probe(settings, store, tools.EXPERIMENT, think_split.EXPERIMENT, trials=2)
    dropped, split = report.experiments
    assert dropped.skipped and dropped.counts == {} and dropped.errors == 4
    assert dropped.reason == "every request failed (HTTP 500 ×4)"
    assert not split.skipped  # the probe went on


async def test_trials_run_concurrently_within_the_backends_concurrency(
    monkeypatch: pytest.MonkeyPatch, ollama_env: OllamaTestServer, store: Database
) -> None:
    monkeypatch.setenv("NOVABERG_CONCURRENCY__OLLAMA", "3")
    ollama_env.set_delay(0.2)
    started = time.perf_counter()
    await probe(load_settings().settings, store, think_split.EXPERIMENT, trials=12)
    wall = time.perf_counter() - started
    # 12 calls of 200 ms, 3 at a time: never faster than 4 rounds, far faster than 12
    assert 0.8 <= wall < 2.0


async def test_each_run_is_stored_with_one_call_record_per_request(
    settings: Settings, server: OllamaTestServer, db: Database
) -> None:
    server.script_mix("probe_think_split", [(CASE2, 1), (CLEAN, 1)])
    report = await probe(settings, db, think_split.EXPERIMENT, tools.EXPERIMENT, trials=2)
    row = db.one("SELECT * FROM probe_runs WHERE id = ?", (report.run_id,))
    assert row is not None
    assert (row["backend"], row["model"], row["trials"]) == ("ollama", "qwen3:4b", 2)
    assert json.loads(row["report_json"]) == report.contract_view()
    calls = db.query(
        "SELECT caller, outcome, turn_id FROM llm_calls WHERE probe_run_id = ? ORDER BY seq",
        (report.run_id,),
    )
    assert sorted(c["caller"] for c in calls) == sorted(chat_callers(server))
    assert len(calls) == 6 and all(c["turn_id"] is None for c in calls)
    outcomes = [c["outcome"] for c in calls if c["caller"] == "probe_think_split"]
    assert sorted(outcomes) == ["ok", "think_split_prose"]


# -- the command -------------------------------------------------------------------------------
def test_json_prints_exactly_the_contract_and_every_request_names_its_probe(
    ollama_env: OllamaTestServer,
) -> None:
    done = run("probe", "--trials", "2", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)  # the progress bar went to stderr
    assert set(out) == {"backend", "model", "experiments"}
    assert (out["backend"], out["model"]) == ("ollama", "qwen3:4b")
    experiments = {e["name"]: e for e in out["experiments"]}
    assert {"name", "trials", "counts", "skipped"} <= set(experiments["think_split"])
    assert set(experiments["think_split"]["counts"]) == {"clean", "case1", "case2"}
    assert set(experiments["dropped_tool_call"]["counts"]) == {
        "declared_dropped",
        "undeclared_dropped",
    }
    assert set(experiments["structured_output"]["counts"]) == {"valid", "invalid"}
    assert all(e["trials"] == 2 and e["skipped"] is False for e in out["experiments"])
    assert set(chat_callers(ollama_env)) == PROBE_CALLERS
    assert all(r.caller for r in ollama_env.requests())  # /api/show too


def test_the_table_prints_a_verdict_per_fault(ollama_env: OllamaTestServer) -> None:
    ollama_env.script_mix("probe_think_split", [(CASE2, 2), (CLEAN, 1)])
    done = run("probe", "--trials", "3")
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stdout.split())
    assert "case 2 (prose only in thinking): seen in 2 of 3: Novaberg's" in flat
    assert "ThinkSplitNormalizer will handle it" in flat
    assert "Context: measured 4096 tokens" in flat


def test_an_unreachable_server_exits_1_and_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    done = run("probe", "--trials", "1")
    assert done.returncode == 1
    assert "not reachable" in done.stderr and "OLLAMA_HOST" in done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_an_unknown_model_exits_1_and_is_printed_as_text(ollama_env: OllamaTestServer) -> None:
    done = run("probe", "--model", "[/b][link=http://x]evil", "--json")
    assert done.returncode == 1
    assert "[/b][link=http://x]evil" in done.stderr  # literally, no markup
    assert "ollama pull" in done.stderr and "qwen3:4b" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_bad_backend_name_is_a_usage_error() -> None:
    done = run("probe", "--backend", "embedded")
    assert done.returncode == 2 and "ollama, openai" in done.stderr


# -- the test server's exact rates -------------------------------------------------------------
def test_the_test_server_scripts_a_fault_at_an_exact_rate_for_one_condition_over_http(
    server: OllamaTestServer,
) -> None:
    fault = Reply.dropped_tool_call("lookup_order").model_dump()
    httpx.post(
        f"{server.url}/_novaberg/script",
        json={
            "caller": "c",
            "mix": [{"reply": fault, "times": 3}, {"reply": None, "times": 2}],
            "match": {"lacks": "lookup_order"},
        },
    ).raise_for_status()
    declared: dict[str, Any] = {"type": "function", "function": {"name": "lookup_order"}}
    other: dict[str, Any] = {"type": "function", "function": {"name": "get_time"}}

    def ask(tools: list[dict[str, Any]]) -> dict[str, Any]:
        body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "order?"}]}
        response = httpx.post(
            f"{server.url}/api/chat",
            json={**body, "tools": tools, "stream": False, "think": False},
            headers={"X-Novaberg-Caller": "c"},
        )
        message: dict[str, Any] = response.json()["message"]
        return message

    assert not ask([declared, other]).get("tool_calls")  # not picked by the match: default
    empty = [ask([other])["content"] == "" for _ in range(5)]
    assert empty.count(True) == 3 and server.pending() == {}
