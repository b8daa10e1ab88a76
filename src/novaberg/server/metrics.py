"""``GET /metrics``: the server's figures in Prometheus' text format (``prometheus_client``).

Counted in this process, from what the code stored: each turn and each background job tells
the model queue's observers (:class:`~novaberg.telemetry.Observers`) its status and its call
records as written to ``llm_calls`` (so an outcome a node set after the call came back, such
as ``malformed`` or ``think_split_moved``, is counted as stored); a finished turn also hands
its stored trace (the thinker's result, the tribunal's votes). Each app has its own
:class:`~prometheus_client.CollectorRegistry`: two apps in one process never mix figures, and
nothing else of the process (no Python GC or process collector) is exported.

No key is needed, like ``/healthz``: the figures are counts and times labelled with status,
caller, backend, outcome, job type and judge names — never a user, a conversation, a key or a
word of text. Counters start at zero with each process; several processes are several
scrape targets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from novaberg.engine.stats_page import (
    FOLLOW_UP_CALLER,
    corrections_by_judge,
    is_follow_up,
    is_last_resort,
)
from novaberg.telemetry import CallRecord
from novaberg.trace_document import TraceDocument

Depth = Callable[[], Mapping[str, tuple[int, int]]]
"""Per backend, right now: (calls waiting for a slot, calls running): the model queue's
:meth:`~novaberg.queue.ModelQueue.depth`."""

router = APIRouter()

SECONDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Histogram buckets for call and turn latency (a model call takes 0.05 s to minutes)."""
WAIT_SECONDS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
"""Histogram buckets for the wait for a backend slot (usually none)."""


class _QueueDepth(Collector):
    """Per backend, right now: calls waiting for a slot and calls running (read at scrape)."""

    def __init__(self, depth: Depth) -> None:
        self.depth = depth

    def collect(self) -> Iterator[Metric]:
        waiting = GaugeMetricFamily(
            "novaberg_queue_waiting",
            "Model calls waiting for a backend slot now (queue depth).",
            labels=["backend"],
        )
        running = GaugeMetricFamily(
            "novaberg_queue_running", "Model calls running on a backend now.", labels=["backend"]
        )
        for backend, (queued, busy) in self.depth().items():
            waiting.add_metric([backend], queued)
            running.add_metric([backend], busy)
        yield waiting
        yield running


class Metrics:
    """The figures of one app; an :class:`~novaberg.telemetry.Observer` of its model queue."""

    def __init__(self, depth: Depth) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter(
            "novaberg_turns",
            "Turns ended, by stored status (done, failed, aborted) and origin (user, "
            "self_trigger).",
            ["status", "origin"],
            registry=r,
        )
        self.turn_seconds = Histogram(
            "novaberg_turn_seconds",
            "Wall time of a turn, from its start to its stored end, by status.",
            ["status"],
            buckets=SECONDS,
            registry=r,
        )
        self.calls = Counter(
            "novaberg_llm_calls",
            "Model requests sent (retries and fallbacks included), by caller, backend and "
            "stored outcome.",
            ["caller", "backend", "outcome"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "novaberg_llm_call_seconds",
            "Duration of a model request, by backend and caller.",
            ["backend", "caller"],
            buckets=SECONDS,
            registry=r,
        )
        self.queue_wait = Histogram(
            "novaberg_queue_wait_seconds",
            "Time a model request waited for a backend slot, by backend.",
            ["backend"],
            buckets=WAIT_SECONDS,
            registry=r,
        )
        self.think_split = Counter(
            "novaberg_think_split",
            "Answers whose thinking came back in the content: moved (split off by tags) or "
            "prose (untagged reasoning).",
            ["kind"],
            registry=r,
        )
        self.dropped_tool_calls = Counter(
            "novaberg_dropped_tool_calls",
            "Requests whose tool call the server dropped (each was retried).",
            registry=r,
        )
        self.followup_calls = Counter(
            "novaberg_followup_calls",
            f"The thinker's follow-up calls (caller {FOLLOW_UP_CALLER}, first attempts).",
            registry=r,
        )
        self.last_resorts = Counter(
            "novaberg_last_resorts",
            "Turns whose thinker ended in the last resort (a second pass was scheduled).",
            registry=r,
        )
        self.malformed = Counter(
            "novaberg_malformed_outputs",
            "Requests whose answer was not usable structured output, by caller.",
            ["caller"],
            registry=r,
        )
        self.corrections = Counter(
            "novaberg_tribunal_corrections",
            "Revise votes that sent the answer to the corrector, by judge.",
            ["judge"],
            registry=r,
        )
        self.jobs = Counter(
            "novaberg_background_jobs",
            "Background memory jobs ended, by type and status (done, failed).",
            ["type", "status"],
            registry=r,
        )
        self.tasks = Counter(
            "novaberg_frontend_tasks",
            "A front-end's own requests answered by one plain call, never a turn (a title, "
            "tags, Continue), by kind and status (done, failed).",
            ["kind", "status"],
            registry=r,
        )
        r.register(_QueueDepth(depth))

    # -- Observer ----------------------------------------------------------------------
    def turn_ended(
        self,
        status: str,
        origin: str,
        seconds: float,
        calls: Sequence[CallRecord],
        trace: TraceDocument | None,
    ) -> None:
        self.turns.labels(status, origin).inc()
        self.turn_seconds.labels(status).observe(seconds)
        self._count_calls(calls)
        if trace is None:
            return
        if is_last_resort(trace):
            self.last_resorts.inc()
        for judge, corrections in corrections_by_judge(trace).items():
            self.corrections.labels(judge).inc(corrections)

    def job_ended(self, job_type: str, status: str, calls: Sequence[CallRecord]) -> None:
        self.jobs.labels(job_type, status).inc()
        self._count_calls(calls)

    def task_ended(self, kind: str, status: str, calls: Sequence[CallRecord]) -> None:
        self.tasks.labels(kind, status).inc()
        self._count_calls(calls)

    def _count_calls(self, calls: Sequence[CallRecord]) -> None:
        for c in calls:
            self.calls.labels(c.caller, c.backend, c.outcome).inc()
            self.call_seconds.labels(c.backend, c.caller).observe(c.ms / 1000)
            self.queue_wait.labels(c.backend).observe(c.queue_wait_ms / 1000)
            if c.outcome == "think_split_moved":
                self.think_split.labels("moved").inc()
            elif c.outcome == "think_split_prose":
                self.think_split.labels("prose").inc()
            elif c.outcome == "dropped_tool_call":
                self.dropped_tool_calls.inc()
            elif c.outcome == "malformed":
                self.malformed.labels(c.caller).inc()
            if is_follow_up(c):
                self.followup_calls.inc()

    def text(self) -> bytes:
        return generate_latest(self.registry)


@router.get("/metrics", response_class=Response, include_in_schema=True)
async def metrics(request: Request) -> Response:
    """Prometheus text format (no key needed: counts and times, no user, id or text)."""
    figures: Metrics = request.app.state.metrics
    return Response(figures.text(), media_type=CONTENT_TYPE_LATEST)
