"""OpenTelemetry's cost per turn: ``python -m benchmarks.otel``.

Turns against the test server (its own process) at 0 ms per call, with export off and on,
alternating turn by turn in one run (machines here are noisy; alternating spreads the noise
over both). "On" is what a user gets: a TracerProvider with a BatchSpanProcessor whose exporter
encodes every span as OTLP protobuf (the OTLP/HTTP exporter's work, short of the network) and
drops it. Both wall time and this process's CPU time (the exporting thread's included; the
server runs elsewhere) are measured per turn: CPU time is what spans cost, and other load on
the machine disturbs it less than wall time. "Off" is the default, where every hook is one
``is None`` test. Since differences this small drown in the noise of whole turns, the hooks are
also timed alone, on a turn's shape (one turn, its nodes, its model calls, no model): off
against no hooks at all, and on against off.

Goals (issue 12): off adds nothing measurable; on ≤ 2 ms per turn.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExporter,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from benchmarks.__main__ import separate_server
from novaberg import otel
from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.telemetry import CallRecord


class EncodingExporter(SpanExporter):
    """Encodes spans as an OTLP request (as the OTLP/HTTP exporter does), then drops them."""

    def __init__(self) -> None:
        self.spans = 0
        self.bytes = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.bytes += len(encode_spans(spans).SerializeToString())
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        return None


async def _turns(turns: int, provider: TracerProvider) -> dict[str, Any]:
    engine = await Engine.open(load_settings().settings)
    walls: dict[str, list[float]] = {"off": [], "on": []}
    cpus: dict[str, list[float]] = {"off": [], "on": []}
    calls = nodes = 0
    try:
        for warm in range(3):  # imports, connections, the first spans
            otel.install(provider)
            await engine.run_turn(f"warm-up {warm}")
            otel.uninstall()
            await engine.run_turn(f"warm-up {warm}")
        for i in range(turns):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for mode in order:
                if mode == "on":
                    otel.install(provider)
                started, cpu = time.perf_counter(), time.process_time()
                result = await engine.run_turn(f"Hallo Nova, Nachricht {i}")
                walls[mode].append((time.perf_counter() - started) * 1000)
                cpus[mode].append((time.process_time() - cpu) * 1000)
                otel.uninstall()
                calls, nodes = len(result.trace.calls), len(result.trace.nodes)
    finally:
        otel.uninstall()
        await engine.aclose()
    return {"walls": walls, "cpus": cpus, "calls": calls, "nodes": nodes}


async def _shaped_turn(calls: int, nodes: int, record: CallRecord, hooks: bool) -> None:
    """A turn's hooks without the turn: ``nodes`` nodes, ``calls`` model calls among them."""
    per_node = [calls // nodes + (1 if n < calls % nodes else 0) for n in range(nodes)]

    async def node_work(n: int) -> None:
        for _ in range(per_node[n]):
            if hooks:
                otel.model_call(record, "m")

    async def turn_work() -> None:
        for n in range(nodes):
            if hooks:
                await otel.node(f"node{n}", node_work(n))
            else:
                await node_work(n)

    if hooks:
        await otel.turn(turn_work(), turn_id=1, conversation_id=1, origin="user", text="")
    else:
        await turn_work()


def hook_cost(calls: int, nodes: int, rounds: int = 100, repeats: int = 7) -> dict[str, float]:
    """Microseconds per turn of the hooks alone: off against no hooks, on against off (span
    making in the turn's path; the batch is exported outside the timing), and the exporter's
    encoding of one turn's spans (done by the batch processor's thread)."""
    record = CallRecord(caller="bench", backend="ollama", model="m", think=False, ms=1.0)
    exporter = EncodingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))  # a queue of 2,048 spans

    async def timed(hooks: bool) -> float:
        started = time.perf_counter()
        for _ in range(rounds):
            await _shaped_turn(calls, nodes, record, hooks)
        return (time.perf_counter() - started) / rounds * 1e6

    def best(hooks: bool) -> float:
        times = []
        for _ in range(repeats):
            times.append(asyncio.run(timed(hooks)))
            provider.force_flush()
        return min(times)

    otel.uninstall()
    bare, off = best(False), best(True)
    otel.install(provider)
    try:
        on = best(True)
    finally:
        otel.uninstall()
    caught = InMemorySpanExporter()
    one = TracerProvider()
    one.add_span_processor(SimpleSpanProcessor(caught))
    otel.install(one)
    try:
        asyncio.run(_shaped_turn(calls, nodes, record, True))
    finally:
        otel.uninstall()
    spans = caught.get_finished_spans()
    started = time.perf_counter()
    for _ in range(rounds * repeats):
        encode_spans(spans).SerializeToString()
    encode = (time.perf_counter() - started) / (rounds * repeats) * 1e6
    provider.shutdown()
    one.shutdown()
    return {
        "off_us": max(off - bare, 0.0),
        "on_us": on - off,
        "encode_us": encode,
        "spans": float(len(spans)),
    }


def measure(turns: int) -> dict[str, Any]:
    exporter = EncodingExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    with separate_server(0.0) as url, tempfile.TemporaryDirectory() as home:
        os.environ.update(OLLAMA_HOST=url, NOVABERG_HOME=home, NOVABERG_BACKEND="ollama")
        for key in otel.ENDPOINT_VARIABLES:
            os.environ.pop(key, None)
        run = asyncio.run(_turns(turns, provider))
    provider.shutdown()  # exports what is left
    hooks = hook_cost(run["calls"], run["nodes"])
    off, on = run["walls"]["off"], run["walls"]["on"]
    med = statistics.median
    pairs = [b - a for a, b in zip(off, on, strict=True)]
    cpu_off, cpu_on = run["cpus"]["off"], run["cpus"]["on"]
    spans = exporter.spans
    on_turns = turns + 3
    return {
        "turns_per_mode": turns,
        "calls_per_turn": run["calls"],
        "nodes_per_turn": run["nodes"],
        "spans_per_turn_on": round(spans / on_turns, 1),
        "otlp_bytes_per_turn_on": round(exporter.bytes / on_turns),
        "turn_ms_off_median": round(med(off), 2),
        "turn_ms_on_median": round(med(on), 2),
        "added_ms_per_turn_on_median": round(med(pairs), 3),
        "ratio_on_to_off": round(med(on) / med(off), 4),
        "cpu_ms_per_turn_off_mean": round(statistics.fmean(cpu_off), 3),
        "cpu_ms_per_turn_on_mean": round(statistics.fmean(cpu_on), 3),
        "added_cpu_ms_per_turn_on_mean": round(
            statistics.fmean(cpu_on) - statistics.fmean(cpu_off), 3
        ),
        "hooks_alone_off_us_per_turn": round(hooks["off_us"], 2),
        "hooks_alone_off_share_of_turn": round(hooks["off_us"] / 1000 / med(off), 6),
        "hooks_alone_on_us_per_turn": round(hooks["on_us"], 1),
        "hooks_alone_spans_per_turn": hooks["spans"],
        "export_encoding_us_per_turn": round(hooks["encode_us"], 1),
        "goal_on_ms_per_turn": 2.0,
        "goal_met_on": med(pairs) <= 2.0 and hooks["on_us"] <= 2000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=40, help="turns per mode")
    parser.add_argument("--out", type=Path, default=Path("bench-results/otel.json"))
    args = parser.parse_args()
    results = measure(args.turns)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
