"""``make bench``: the foundation's figures, measured in one run (ratios, since machines are noisy).

1. Orchestration overhead: turns against the test server with 200 ms per call; turn wall time
   divided by the backend time on the critical path (the calls run one after another). At 0 ms:
   the median overhead per turn, and beside it the libraries' floor (benchmarks/floor.py: the
   same requests through the bare ollama client from a bare LangGraph pipeline).
2. Tribunal: three judges at 300 ms per call with 3 parallel slots, against one judge's
   latency (and against 1 slot, i.e. sequential); calls per fact-free turn.
3. Cold start: ``novaberg ask`` from process start to its first backend request (median).
4. Embedded generation speed through Novaberg against raw llama-cpp-python, same prompt.
5. Memory (benchmarks/memory.py): retrieval latency at 10k/100k items, retrieval quality
   without an LLM, database growth per 1,000 turns, each on SQLite and PostgreSQL.
6. Meaning (benchmarks/meaning.py): recall@5 of questions that share no word with their fact,
   and of lexical ones, by full text, vectors and hybrid retrieval, per in-process embedder, at
   2k and 20k items, on SQLite (sqlite-vec) and PostgreSQL (pgvector).
7. Vectors (benchmarks/vectors.py): nearest-neighbour search at 100k items on SQLite (sqlite-vec,
   the in-memory copy, the exact scan), the question's vector apart, write cost and growth.
8. LoCoMo (benchmarks/locomo.py): recall of the dialogue turns that answer LoCoMo's questions,
   Nova's retrieval against BM25, vectors and their RRF, from ``../shared/data/locomo-dev``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from benchmarks.floor import floor_ms, turn_requests
from benchmarks.locomo import DATA as LOCOMO_DATA
from benchmarks.locomo import LocomoDataError
from benchmarks.locomo import run as locomo_run
from benchmarks.meaning import run as meaning_suite
from benchmarks.memory import KINDS, memory_growth, memory_quality, retrieval_latency
from benchmarks.recall import recall_latency
from benchmarks.vectors import vectors as vector_index
from novaberg.backends.base import ChatRequest
from novaberg.backends.embedded import EmbeddedBackend, default_model_path
from novaberg.config import Timeouts, load_settings
from novaberg.embedders import NAMES as EMBEDDER_NAMES
from novaberg.engine import Engine
from novaberg.telemetry import CallRecord
from novaberg.testing import OllamaTestServer, Reply


@contextlib.contextmanager
def separate_server(delay_ms: float) -> Iterator[str]:
    """``novaberg test-server`` in its own process, so it does not share our interpreter."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "novaberg",
            "test-server",
            "--port",
            str(port),
            "--delay-ms",
            str(delay_ms),
        ],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _injected(calls: list[CallRecord], delay_s: float) -> float:
    """The injected delay on the critical path: one delay per sequential group of calls."""
    fake = [CallRecord(**{**c.__dict__, "backend_ms": delay_s * 1000}) for c in calls]
    return critical_backend_ms(fake)


def critical_backend_ms(calls: list[CallRecord], client_side: bool = False) -> float:
    """Time on the critical path: calls that overlap in time (the judges of a round) count
    once, with the longest of them; the rest add up. The server's own account of each call
    (``backend_ms``), or with ``client_side`` the time the client waited (``ms``)."""
    total, group_end, group_max = 0.0, -1.0, 0.0
    for call in sorted(calls, key=lambda c: c.started):
        end = call.started + call.ms / 1000
        length = call.ms if client_side else call.backend_ms
        if call.started < group_end:  # overlaps the running group
            group_max = max(group_max, length)
            group_end = max(group_end, end)
            continue
        total += group_max
        group_end, group_max = end, length
    return total + group_max


async def _turns(delay_s: float, turns: int) -> list[dict[str, float]]:
    engine = await Engine.open(load_settings().settings)
    rows = []
    try:
        await engine.run_turn("warm-up")
        for i in range(turns):
            started = time.perf_counter()
            result = await engine.run_turn(f"Hallo Nova, Nachricht {i}")
            wall = (time.perf_counter() - started) * 1000
            calls = result.trace.calls
            rows.append(
                {
                    "wall_ms": wall,
                    "calls": len(calls),
                    "recorded_ms": critical_backend_ms(calls, client_side=True),
                    "server_ms": critical_backend_ms(calls),
                    "injected_ms": _injected(calls, delay_s),
                }
            )
    finally:
        await engine.aclose()
    return rows


def orchestration(turns: int) -> dict[str, Any]:
    results = {}
    recorded = turn_requests()
    floor: list[float] = []
    for delay_ms in (200.0, 0.0):
        with separate_server(delay_ms) as url, tempfile.TemporaryDirectory() as home:
            if delay_ms == 0.0:  # the libraries alone, before and after Novaberg's turns
                floor += floor_ms(url, recorded, turns // 2)
            os.environ.update(OLLAMA_HOST=url, NOVABERG_HOME=home, NOVABERG_BACKEND="ollama")
            results[delay_ms] = asyncio.run(_turns(delay_ms / 1000, turns))
            if delay_ms == 0.0:
                floor += floor_ms(url, recorded, turns - turns // 2)
    slow, fast = results[200.0], results[0.0]
    ratios = [r["wall_ms"] / r["server_ms"] for r in slow]
    injected = [r["wall_ms"] / r["injected_ms"] for r in slow]
    overhead = statistics.median(r["wall_ms"] - r["server_ms"] for r in fast)
    floored = statistics.median(floor)
    goals = {
        "ratio_wall_to_backend_at_200ms_median": (statistics.median(ratios), 1.05),
        "overhead_ms_per_turn_at_0ms_median": (overhead, 15.0),
    }
    beside = {  # what no change inside Novaberg can remove, measured in the same run
        "overhead_ms_per_turn_at_0ms_median": f"; the libraries' floor {floored:.1f} ms",
    }
    missed = [
        f"{k} = {v:.3f} (goal <= {g}{beside.get(k, '')})" for k, (v, g) in goals.items() if v > g
    ]
    for line in missed:
        print(f"GOAL MISSED: {line}", file=sys.stderr)
    return {
        "goals_missed": missed,
        "turns": turns,
        "calls_per_turn": slow[0]["calls"],
        "ratio_wall_to_backend_at_200ms_median": round(statistics.median(ratios), 4),
        "ratio_wall_to_backend_at_200ms_max": round(max(ratios), 4),
        "ratio_wall_to_injected_delay_at_200ms_median": round(statistics.median(injected), 4),
        "turn_wall_ms_at_200ms_median": round(statistics.median(r["wall_ms"] for r in slow), 1),
        "overhead_ms_per_turn_at_0ms_median": round(overhead, 1),
        "overhead_outside_calls_ms_at_0ms_median": round(
            statistics.median(r["wall_ms"] - r["recorded_ms"] for r in fast), 1
        ),
        # benchmarks/floor.py: the same requests through the bare ollama client from a bare
        # LangGraph pipeline of the same stages, against the same server, in this run
        "floor_ms_per_turn_at_0ms_median": round(floored, 1),
        "overhead_above_floor_ms_at_0ms": round(overhead - floored, 1),
        "overhead_over_floor_at_0ms": round(overhead / floored, 2),
    }


async def _tribunal_turns(turns: int) -> list[dict[str, float]]:
    engine = await Engine.open(load_settings().settings)
    rows = []
    try:
        await engine.run_turn("warm-up")
        for i in range(turns):
            result = await engine.run_turn(f"Wie geht es dir heute? ({i})")
            judges = [c.ms for c in result.trace.calls if c.caller.startswith("judge_")]
            rows.append(
                {
                    "calls": len(result.trace.calls),
                    "tribunal_ms": result.trace.node_ms("tribunal"),
                    "one_judge_ms": statistics.median(judges),
                }
            )
    finally:
        await engine.aclose()
    return rows


def tribunal(turns: int) -> dict[str, Any]:
    """Three judges at 300 ms per call: in parallel (3 slots) against one slot (sequential)."""
    out: dict[str, Any] = {}
    for slots in (3, 1):
        with separate_server(300.0) as url, tempfile.TemporaryDirectory() as home:
            os.environ.update(
                OLLAMA_HOST=url,
                NOVABERG_HOME=home,
                NOVABERG_BACKEND="ollama",
                NOVABERG_CONCURRENCY__OLLAMA=str(slots),
            )
            rows = asyncio.run(_tribunal_turns(turns))
        ratio = statistics.median(r["tribunal_ms"] / r["one_judge_ms"] for r in rows)
        out[f"ratio_tribunal_to_one_judge_{slots}_slots_median"] = round(ratio, 3)
        out[f"tribunal_ms_{slots}_slots_median"] = round(
            statistics.median(r["tribunal_ms"] for r in rows), 1
        )
        out["calls_per_fact_free_turn"] = rows[0]["calls"]
    os.environ.pop("NOVABERG_CONCURRENCY__OLLAMA", None)
    return {"turns": turns, **out}


async def _thinker_turns(script: str, turns: int) -> list[dict[str, float]]:
    """Turns against the shared test server scripted as ``script``; thinker figures."""
    engine = await Engine.open(load_settings().settings)
    rows = []
    try:
        for i in range(turns):
            await _script_thinker(script)
            started = time.perf_counter()
            result = await engine.run_turn(f"How high is the Zugspitze? ({i})")
            wall = (time.perf_counter() - started) * 1000
            thinker = [c for c in result.trace.calls if c.caller.startswith("thinker")]
            run = result.state.get("thinker")  # a ThinkerRun, or None when it did not run
            rows.append(
                {
                    "turn_ms": wall,
                    "thinker_ms": result.trace.node_ms("thinker"),
                    "thinker_calls": len(thinker),
                    "iterations": run.iterations if run is not None else 0,
                    "revised": float(result.reply.startswith("FIXED")),
                }
            )
    finally:
        await engine.aclose()
    return rows


_THINK_SERVER: list[str] = []


def _thinker_script(script: str) -> dict[str, list[dict[str, Any]]]:
    route = {"intent": "question", "tone": "neutral", "needs_check": True}
    replies: dict[str, list[dict[str, Any]]] = {
        "router": [{"content": json.dumps(route)}],
        "responder": [{"content": "HALLUCINATED: 3,100 m."}],
    }
    if script == "clean":
        replies["thinker"] = [{"content": "RESULT: REVISED\nFIXED: 2,962 m.", "thinking": "..."}]
    else:  # case 2 on every thinking call; the follow-up recovers
        replies["thinker"] = [{"content": "", "thinking": "3,100 m is wrong, it is 2,962 m."}] * 5
        replies["thinker_nachfass"] = [{"content": "RESULT: REVISED\nFIXED: 2,962 m."}]
    return replies


async def _script_thinker(script: str) -> None:
    async with httpx.AsyncClient(base_url=_THINK_SERVER[0]) as client:
        await client.post("/_novaberg/reset")
        for caller, replies in _thinker_script(script).items():
            await client.post("/_novaberg/script", json={"caller": caller, "replies": replies})


async def _naive_loop(turns: int, max_iterations: int = 5) -> list[dict[str, float]]:
    """The seed's content-only loop: reads ``content`` alone, iterates until a control line."""
    from novaberg.backends.base import ChatRequest
    from novaberg.telemetry import Trace
    from novaberg.thinking import parse_control

    engine = await Engine.open(load_settings().settings)
    rows = []
    try:
        for _ in range(turns):
            await _script_thinker("case2")
            trace = Trace()
            started = time.perf_counter()
            wasted, decided = 0, False
            for _ in range(max_iterations):
                result = await engine.queue.submit(
                    ChatRequest(
                        caller="thinker",
                        think=True,
                        messages=[{"role": "user", "content": "check the draft"}],
                    ),
                    trace=trace,
                )
                if parse_control(result.response.content) is not None:
                    decided = True
                    break
                wasted += 1
            rows.append(
                {
                    "thinker_ms": (time.perf_counter() - started) * 1000,
                    "wasted": wasted,
                    "revised": float(decided),
                }
            )
    finally:
        await engine.aclose()
    return rows


def thinker(turns: int) -> dict[str, Any]:
    """The seed's failure replayed at 250 ms per call: case 2 on every thinking call."""
    with separate_server(250.0) as url, tempfile.TemporaryDirectory() as home:
        os.environ.update(OLLAMA_HOST=url, NOVABERG_HOME=home, NOVABERG_BACKEND="ollama")
        _THINK_SERVER[:] = [url]
        naive = asyncio.run(_naive_loop(turns))
        clean = asyncio.run(_thinker_turns("clean", turns))
        recovered = asyncio.run(_thinker_turns("case2", turns))
    med = statistics.median
    return {
        "turns": turns,
        "naive_wasted_calls_median": med(r["wasted"] for r in naive),
        "naive_thinker_ms_median": round(med(r["thinker_ms"] for r in naive), 1),
        "naive_kept_hallucinated_draft_share": 1 - med(r["revised"] for r in naive),
        "thinker_iterations_median": med(r["iterations"] for r in recovered),
        "thinker_wasted_iterations": med(r["iterations"] for r in recovered) - 1,
        "thinker_calls_median": med(r["thinker_calls"] for r in recovered),
        "thinker_ms_recovered_median": round(med(r["thinker_ms"] for r in recovered), 1),
        "thinker_ms_clean_median": round(med(r["thinker_ms"] for r in clean), 1),
        "ratio_naive_to_thinker_ms": round(
            med(r["thinker_ms"] for r in naive) / med(r["thinker_ms"] for r in recovered), 2
        ),
        "ratio_recovered_to_clean_turn": round(
            med(r["turn_ms"] for r in recovered) / med(r["turn_ms"] for r in clean), 3
        ),
        "ratio_recovered_to_clean_thinker_node": round(
            med(r["thinker_ms"] for r in recovered) / med(r["thinker_ms"] for r in clean), 3
        ),
        "recovered_share": med(r["revised"] for r in recovered),
    }


def cold_start(runs: int) -> dict[str, Any]:
    firsts, totals = [], []
    with OllamaTestServer() as server, tempfile.TemporaryDirectory() as home:
        env = dict(
            os.environ, OLLAMA_HOST=server.url, NOVABERG_HOME=home, NOVABERG_BACKEND="ollama"
        )
        for _ in range(runs):
            server.state.requests.clear()
            started = time.time()
            subprocess.run(
                [sys.executable, "-m", "novaberg", "ask", "Hallo", "--json"],
                env=env,
                capture_output=True,
                check=True,
            )
            totals.append(time.time() - started)
            firsts.append(min(r.at for r in server.requests()) - started)
    return {
        "runs": runs,
        "to_first_backend_request_s_median": round(statistics.median(firsts), 3),
        "to_first_backend_request_s_max": round(max(firsts), 3),
        "whole_ask_s_median": round(statistics.median(totals), 3),
    }


def _busy_s(spans: list[tuple[float, float]]) -> float:
    """How long at least one of ``spans`` (start, end) was open: their union's length."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


def outside(runs: int) -> dict[str, Any]:
    """What a user of ``novaberg ask`` feels, from outside: ``runs`` fresh processes on one home
    (from the second on, the user has memories, so the enricher needs the embedder), against
    the scripted server answering every call after 200 ms, then at once. Per process, from the
    server's own records (when each request came, and when its answer had gone out): the span
    of its model requests against the time a request was in flight (1.0: no gap between
    calls), the responder's request after the router's answer, and, from the process's start,
    the responder's request and its answer (the reply's first token, not streamed)."""
    figures: dict[str, Any] = {"runs": runs}
    for delay_ms in (200, 0):
        ratios, gaps, to_responder, to_reply = [], [], [], []
        with OllamaTestServer() as server, tempfile.TemporaryDirectory() as home:
            server.set_delay(delay_ms / 1000)
            env = dict(
                os.environ, OLLAMA_HOST=server.url, NOVABERG_HOME=home, NOVABERG_BACKEND="ollama"
            )
            for n in range(runs):
                server.state.requests.clear()
                server.standing(
                    "salience",
                    Reply(content=json.dumps({"score": 0.9, "summary": f"The user sails {n}."})),
                )
                started = time.time()
                subprocess.run(
                    [sys.executable, "-m", "novaberg", "ask", f"I sail boat {n}", "--json"],
                    env=env,
                    capture_output=True,
                    check=True,
                )
                chat = [r for r in server.requests() if r.path == "/api/chat"]
                spans = [(r.at, r.answered_at or r.at) for r in chat]
                span = max(e for _, e in spans) - min(a for a, _ in spans)
                ratios.append(span / _busy_s(spans))
                router = next(r for r in chat if r.caller == "router")
                responder = next(r for r in chat if r.caller == "responder")
                gaps.append(responder.at - (router.answered_at or router.at))
                to_responder.append(responder.at - started)
                to_reply.append((responder.answered_at or responder.at) - started)
        med = statistics.median
        figures[f"span_to_busy_at_{delay_ms}ms_median"] = round(med(ratios), 3)
        figures[f"span_to_busy_at_{delay_ms}ms_max"] = round(max(ratios), 3)
        figures[f"responder_after_router_at_{delay_ms}ms_s_median"] = round(med(gaps), 3)
        figures[f"responder_after_router_at_{delay_ms}ms_s_max"] = round(max(gaps), 3)
        figures[f"to_responder_request_at_{delay_ms}ms_s_median"] = round(med(to_responder), 3)
        figures[f"to_reply_at_{delay_ms}ms_s_median"] = round(med(to_reply), 3)
    goals = {
        "span_to_busy_at_200ms_median": (figures["span_to_busy_at_200ms_median"], 1.05),
        "responder_after_router_at_0ms_s_median": (
            figures["responder_after_router_at_0ms_s_median"],
            0.3,
        ),
    }
    missed = [f"{k} = {v} (goal <= {g})" for k, (v, g) in goals.items() if v > g]
    figures["goals_missed"] = missed
    for line in missed:
        print(f"GOAL MISSED: {line}", file=sys.stderr)
    return figures


def embedded_speed(rounds: int, tokens: int) -> dict[str, Any]:
    """Both paths drive the SAME loaded llama.cpp model with the same prompt and sampling, so
    the ratio isolates what Novaberg adds (thread hand-over, asyncio, records)."""
    with tempfile.TemporaryDirectory() as home:
        path = default_model_path(Path(home))
        ours = EmbeddedBackend(Path(home), Timeouts(), model_path=path, n_ctx=2048)
        messages = [{"role": "user", "content": "Tell me about the sea, in detail."}]
        request = ChatRequest(
            caller="bench", messages=messages, max_tokens=tokens, temperature=0.7, seed=7
        )
        raw_params: dict[str, Any] = {**ours._kwargs(request), "stream": True}

        async def through_novaberg(stream: bool = False) -> tuple[int, float]:
            started = time.perf_counter()
            pieces: list[str] = []
            response = await ours.chat(request, pieces.append if stream else None)
            return response.eval_count, time.perf_counter() - started

        def raw_call() -> tuple[int, float]:
            started = time.perf_counter()
            chunks = ours._llama.create_chat_completion(**raw_params)
            count = sum(1 for c in chunks if c["choices"][0]["delta"].get("content"))
            return count, time.perf_counter() - started

        def through_raw() -> tuple[int, float]:
            # on the backend's own thread: llama.cpp's OpenMP team belongs to the calling
            # thread, and a second team (this thread's) would spin against the first on two
            # cores, halving whichever runs (the old figure of 0.36 came from that)
            return ours._worker.submit(raw_call).result()

        asyncio.run(through_novaberg())  # loads the model
        through_raw()
        speeds: dict[str, list[float]] = {"raw": [], "ours": [], "streamed": []}
        for i in range(rounds):  # rotate the order, so load changes hit all alike
            order = ["raw", "ours", "streamed"]
            for path in order[i % 3 :] + order[: i % 3]:
                if path == "raw":
                    n, s = through_raw()
                else:
                    n, s = asyncio.run(through_novaberg(stream=path == "streamed"))
                speeds[path].append(n / s)
        raw_tps, ours_tps = speeds["raw"], speeds["ours"]
    ratios = {
        "ratio_novaberg_to_raw": statistics.median(ours_tps) / statistics.median(raw_tps),
        "ratio_streamed_to_raw": statistics.median(speeds["streamed"]) / statistics.median(raw_tps),
    }
    missed = [f"{k} = {v:.3f} (goal >= 0.95)" for k, v in ratios.items() if v < 0.95]
    for line in missed:
        print(f"GOAL MISSED: {line}", file=sys.stderr)
    return {
        "goals_missed": missed,
        "rounds": rounds,
        "max_tokens": tokens,
        "threads": ours.n_threads,
        "novaberg_tokens_per_s_median": round(statistics.median(ours_tps), 1),
        "raw_llama_cpp_tokens_per_s_median": round(statistics.median(raw_tps), 1),
        "ratio_novaberg_to_raw": round(statistics.median(ours_tps) / statistics.median(raw_tps), 3),
        "streamed_tokens_per_s_median": round(statistics.median(speeds["streamed"]), 1),
        "ratio_streamed_to_raw": round(
            statistics.median(speeds["streamed"]) / statistics.median(raw_tps), 3
        ),
    }


def _locomo() -> dict[str, Any]:
    """The LoCoMo part; without the data folder, a result that says so (the rest still runs)."""
    try:
        return locomo_run(Path(os.environ.get("NOVABERG_LOCOMO_DIR", LOCOMO_DATA)))
    except LocomoDataError as exc:
        print(f"locomo: skipped: {exc}", file=sys.stderr)
        return {"skipped": str(exc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--tribunal-turns", type=int, default=10)
    parser.add_argument("--thinker-turns", type=int, default=5)
    parser.add_argument("--cold-runs", type=int, default=7)
    parser.add_argument("--outside-runs", type=int, default=5)
    parser.add_argument("--embedded-rounds", type=int, default=8)
    parser.add_argument("--embedded-tokens", type=int, default=128)
    parser.add_argument("--memory-sizes", default="10000,100000")
    parser.add_argument("--memory-queries", type=int, default=300)
    parser.add_argument("--growth-turns", type=int, default=1000)
    parser.add_argument("--meaning-sizes", default="2000,20000")
    parser.add_argument("--vector-items", type=int, default=100_000)
    parser.add_argument(
        "--only",
        default="orchestration,tribunal,thinker,cold_start,outside,embedded,"
        "memory_latency,memory_quality,memory_growth,meaning,vectors,recall,locomo",
        help="comma-separated parts",
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/latest.json"))
    args = parser.parse_args()
    parts = {
        "orchestration": lambda: orchestration(args.turns),
        "tribunal": lambda: tribunal(args.tribunal_turns),
        "thinker": lambda: thinker(args.thinker_turns),
        "cold_start": lambda: cold_start(args.cold_runs),
        "outside": lambda: outside(args.outside_runs),
        "embedded": lambda: embedded_speed(args.embedded_rounds, args.embedded_tokens),
        "memory_latency": lambda: retrieval_latency(
            tuple(int(n) for n in args.memory_sizes.split(",")), args.memory_queries, KINDS
        ),
        "memory_quality": memory_quality,
        "memory_growth": lambda: memory_growth(args.growth_turns),
        "vectors": lambda: vector_index(args.vector_items, exact=True),
        "recall": lambda: recall_latency(
            [int(n) for n in args.memory_sizes.split(",")],
            args.memory_queries,
            ["sqlite", "pgvector"],
        ),
        "locomo": lambda: _locomo(),
        "meaning": lambda: meaning_suite(
            [int(n) for n in args.meaning_sizes.split(",")], list(EMBEDDER_NAMES), list(KINDS)
        ),
    }
    results = {name: run() for name, run in parts.items() if name in args.only.split(",")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
