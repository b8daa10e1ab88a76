"""The floors the benchmarks measure beside Novaberg's own figures (issues 21 and 25): the
libraries under a turn send what a real turn sends, and the SDK's own MCP server answers
with the result it was given."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
from benchmarks.floor import floor_ms, turn_requests
from benchmarks.mcp_floor import floor_server
from benchmarks.mcp_speed import missed

from novaberg.testing import OllamaTestServer


def test_the_turn_floor_sends_a_real_turns_requests_again_unchanged(
    server: OllamaTestServer,
) -> None:
    recorded = turn_requests()
    callers = [caller for caller, _ in recorded]
    assert callers[:2] == ["router", "responder"] and callers[-1] == "salience"
    assert sorted(callers[2:-1]) == ["judge_legal", "judge_persona", "judge_psychology"]
    rows = floor_ms(server.url, recorded, 2)
    assert len(rows) == 2 and all(ms > 0 for ms in rows)
    sent = [r.body for r in server.requests() if r.path == "/api/chat"]
    assert len(sent) == 6 * (3 + 2)  # three warm-up turns, then the two measured
    by_prompt = {json.dumps(body["messages"]): body for _, body in recorded}
    for body in sent:  # each one of the turn's own requests: the same messages and format
        original = by_prompt[json.dumps(body["messages"])]
        assert body.get("format") == original.get("format")
        assert body.get("think") == original.get("think")
        assert body.get("options") == original.get("options")


async def _call(url: str) -> dict[str, object]:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "recall", "arguments": {"query": "anything", "k": 5}}
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(f"{url}/mcp", json=call, headers=headers)
    assert response.status_code == 200, response.text
    result: dict[str, object] = response.json()["result"]
    return result


def test_the_mcp_floor_answers_recall_with_the_result_it_was_given(tmp_path: Path) -> None:
    given = {"items": [{"id": 7, "text": "Ada lives in Lisbon."}], "messages": []}
    with floor_server(given, tmp_path) as url:
        result = asyncio.run(_call(url))
    assert result["structuredContent"] == given
    assert result["content"] == [{"type": "text", "text": json.dumps(given, separators=(",", ":"))}]


def test_the_mcp_benchmark_names_each_goal_it_missed_with_the_floor_beside_http() -> None:
    def door(ratio: float) -> dict[str, float]:
        return {"p95_over_in_process_p95": ratio}

    figures = {
        "stdio": door(1.4) | {"start_to_first_answer_s": 0.8},
        "stdio_raw": door(1.2),
        "http": door(2.3),
        "http_raw": door(1.5),
        "http_floor": {"best_p95_over_in_process_p95": 1.46},
    }
    out = {"recall_k5": figures, "turns": {"talk_over_api_turns": 1.07}}
    assert missed(out, (5,)) == [
        "recall k=5 http p95 / in-process p95 = 2.3 (goal <= 1.5; the SDK's own server "
        "leaves at best 1.46)",
        "talk / POST /api/turns p50 = 1.07 (goal <= 1.05)",
    ]
    figures["stdio"]["start_to_first_answer_s"] = 1.2
    figures["http"] = door(1.49)
    out["turns"]["talk_over_api_turns"] = 1.0
    assert missed(out, (5,)) == ["novaberg mcp start to first answer = 1.2 s (goal <= 1.0)"]
