"""``GET /metrics`` of a real ``novaberg serve`` process: scripted turns with known faults go
through ``POST /api/turns``, then the Prometheus text (read with ``prometheus_client``'s own
parser) must hold exactly the scenario's figures, and every call count must equal what the
database's ``llm_calls`` stored."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova
from tests.test_stats import (
    CHAT,
    DRAFT,
    QUESTION,
    said,
    script_faults_of_turn_b,
    script_quiet_defaults,
)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    with running_nova(ollama_server, tmp_path_factory.mktemp("metrics") / "home") as started:
        yield started


def scrape(nova: Nova) -> Samples:
    """Every sample of ``/metrics`` (no key sent), parsed by prometheus_client's parser."""
    response = httpx.get(f"{nova.url}/metrics", timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """The sum over every sample of ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


def turn(nova: Nova, message: str) -> httpx.Response:
    return httpx.post(
        f"{nova.url}/api/turns", json={"message": message}, headers=nova.auth(), timeout=60
    )


def test_metrics_count_the_scenario_exactly_and_match_the_stored_calls(
    nova: Nova, server: OllamaTestServer
) -> None:
    attempts = 3  # retries.attempts, the default the server runs with
    script_quiet_defaults(server)
    # A: a plain turn
    server.script("router", CHAT)
    server.script("responder", Reply(content="Hallo!"))
    assert turn(nova, "Hallo Nova").status_code == 200
    # B: router JSON malformed once, responder 500 once, the thinker's tool call dropped then
    # prose in thinking (think-split prose) and one follow-up decides; the legal judge asks
    # for one revision (one correction); salient: three memory jobs
    script_faults_of_turn_b(server)
    b = turn(nova, QUESTION)
    assert b.status_code == 200, b.text
    assert b.json()["tribunal"]["rounds"] == 2
    # C: both follow-ups malformed: the last resort, and its second pass (C2) runs
    server.script("responder", Reply(content=DRAFT), Reply(content="A second look: 2,962 m."))
    server.script(
        "thinker",
        Reply.thinking_swallowed_answer("Hmm, prose only."),
        Reply(content="RESULT: OK"),
    )
    server.script("thinker_nachfass", Reply(content="still prose"), Reply(content="more prose"))
    c = turn(nova, QUESTION)
    assert c.json()["thinker"]["result"] == "last_resort" and len(c.json()["followups"]) == 1
    # D: the responder fails on every retry: the turn fails
    server.script("responder", *[Reply.http_error(500)] * attempts)
    assert turn(nova, "Are you there?").status_code == 502
    # B's memory jobs run in the server's background: wait until all three are counted
    server.standing("consolidate", Reply.http_error(500))
    server.script("profile_adaptive", said({"statements": []}))
    deadline = time.monotonic() + 30
    while total(samples := scrape(nova), "novaberg_background_jobs_total") < 3:
        assert time.monotonic() < deadline, "the memory jobs were never counted"
        time.sleep(0.1)

    # turns by status and origin; latency histogram per turn
    assert value(samples, "novaberg_turns_total", status="done", origin="user") == 3
    assert value(samples, "novaberg_turns_total", status="done", origin="self_trigger") == 1
    assert value(samples, "novaberg_turns_total", status="failed", origin="user") == 1
    assert total(samples, "novaberg_turn_seconds_count") == 5
    # the defences, each as scripted
    assert value(samples, "novaberg_last_resorts_total") == 1
    assert value(samples, "novaberg_dropped_tool_calls_total") == 1
    assert value(samples, "novaberg_think_split_total", kind="prose") == 2
    assert value(samples, "novaberg_think_split_total", kind="moved") == 0
    assert value(samples, "novaberg_followup_calls_total") == 3
    assert value(samples, "novaberg_malformed_outputs_total", caller="router") == 1
    assert value(samples, "novaberg_malformed_outputs_total", caller="thinker_nachfass") == 2
    assert value(samples, "novaberg_tribunal_corrections_total", judge="legal") == 1
    assert value(samples, "novaberg_tribunal_corrections_total", judge="persona") == 0
    assert value(samples, "novaberg_background_jobs_total", type="consolidate", status="failed")
    assert value(samples, "novaberg_background_jobs_total", type="timeline", status="done") == 1
    # every call by caller, backend and outcome: exactly what llm_calls stored
    db = nova.db()
    try:
        rows = db.query(
            "SELECT caller, backend, outcome, COUNT(*) AS n FROM llm_calls "
            "GROUP BY caller, backend, outcome"
        )
    finally:
        db.close()
    stored = Counter({(r["caller"], r["backend"], r["outcome"]): int(r["n"]) for r in rows})
    counted = Counter(
        {
            (dict(ls)["caller"], dict(ls)["backend"], dict(ls)["outcome"]): int(v)
            for (n, ls), v in samples.items()
            if n == "novaberg_llm_calls_total" and v
        }
    )
    assert counted == stored
    assert stored[("responder", "ollama", "error")] == 1 + attempts
    calls = sum(stored.values())
    assert total(samples, "novaberg_llm_call_seconds_count") == calls
    assert total(samples, "novaberg_queue_wait_seconds_count", backend="ollama") == calls
    # queue depth, read at the scrape: nothing waits now
    assert value(samples, "novaberg_queue_waiting", backend="ollama") == 0
    assert value(samples, "novaberg_queue_running", backend="ollama") == 0


def test_metrics_need_no_key_and_name_no_user_and_no_text(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Zebra-Kürbis"))
    assert turn(nova, "Quokka-Geheimnis").status_code == 200
    response = httpx.get(f"{nova.url}/metrics", timeout=10)
    assert response.status_code == 200
    text = response.text
    for private in ('"ada"', "user=", "conversation=", "Quokka", "Zebra", nova.keys["ada"]):
        assert private not in text
    assert "novaberg_turns_total" in text
    # no process-wide collectors: the app's own registry only
    assert "python_gc" not in text and "process_cpu" not in text
