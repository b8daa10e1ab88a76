"""The model queue: every LLM call of every node goes through here.

A call is a job with a caller and a priority (:data:`FOREGROUND` before :data:`BACKGROUND`).
Each backend serves at most ``limit`` jobs at once; waiting jobs are served by priority, then
in arrival order. For each job the queue walks the backend chain, retries retryable failures
with exponential backoff (never after a content token was passed on), and writes one
:class:`~novaberg.telemetry.CallRecord` per request sent, with queue wait and run time.

A refusal that will not change is never retried as it was: a context overflow is not retried
at all, and a refused structured-output shape only in the simpler shape the backend has learned
(:class:`~novaberg.errors.FormatRefused`), at once and without using up a retry.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, cast

from novaberg import otel
from novaberg.backends.base import Backend, ChatRequest, ChatResponse, TokenCallback, emit
from novaberg.backends.chain import BackendChain
from novaberg.backends.guards import classify
from novaberg.config import Retries
from novaberg.errors import (
    BackendError,
    ContextOverflow,
    FormatRefused,
    NoBackendAvailable,
    error_kind,
)
from novaberg.telemetry import CallRecord, JsonMode, Observers, Trace

log = logging.getLogger("novaberg")

FOREGROUND = 0
BACKGROUND = 10
MAX_FORMAT_STEPS = 2
"""json_schema → json_object → prompt: at most two step-downs for one call."""


CALL_OWNER: ContextVar[str] = ContextVar("novaberg_call_owner", default="")
"""Whose work the model calls of the current task are (the user of a turn or memory job).

Set once per turn and per job; tasks started inside inherit it. Waiting calls of different
owners are taken in turn (:class:`PrioritySlots`), so one user's burst cannot starve another."""


class PrioritySlots:
    """A semaphore whose waiters are woken lowest priority number first; within a priority,
    owners (:data:`CALL_OWNER`) take turns — round robin — and each owner's calls keep their
    arrival order.

    Every waiting call gets a round: its owner's next unused round, but never one that has
    already been served. A burst of ten calls from one owner takes rounds 0–9; a single call
    that another owner sends afterwards takes round 0 too and is served second, not eleventh.
    """

    def __init__(self, limit: int, aging_s: float | None = None) -> None:
        self.limit = limit
        self.aging_s = aging_s
        """A waiter of lower priority that has waited this long is served next, before
        waiters of higher priority (in arrival order among such): none starves."""
        self.busy = 0
        self._waiters: list[tuple[int, int, int, asyncio.Future[None]]] = []
        self._since: dict[int, float] = {}
        """When each waiter of lower than the highest priority began to wait (by seq)."""
        self._seq = itertools.count()
        self._round = 0
        """The round of the call woken last."""
        self._next_round: dict[str, int] = {}

    def _round_for(self, owner: str) -> int:
        if len(self._next_round) > 1024:  # forget owners with nothing ahead of the others
            self._next_round = {o: r for o, r in self._next_round.items() if r > self._round}
        turn = max(self._next_round.get(owner, 0), self._round)
        self._next_round[owner] = turn + 1
        return turn

    async def acquire(self, priority: int) -> None:
        if self.busy < self.limit and not self._waiters:
            self.busy += 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (priority, self._round_for(CALL_OWNER.get()), next(self._seq), future)
        heapq.heappush(self._waiters, entry)
        if priority > FOREGROUND:
            self._since[entry[2]] = time.monotonic()
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed to us just as we were cancelled
            else:
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
            raise
        finally:
            self._since.pop(entry[2], None)

    def release(self) -> None:
        while self._waiters:
            _, turn, _, future = self._next()
            if not future.done():
                self._round = turn
                future.set_result(None)  # the slot passes straight to the waiter
                return
        self.busy -= 1

    def _next(self) -> tuple[int, int, int, asyncio.Future[None]]:
        """The waiter to serve: the longest-waiting one of lower priority once it has waited
        :attr:`aging_s`, else the first by priority, round and arrival."""
        if self.aging_s is not None and self._since:
            oldest = min(self._since, key=self._since.__getitem__)
            if time.monotonic() - self._since[oldest] >= self.aging_s:
                entry = next(e for e in self._waiters if e[2] == oldest)
                self._waiters.remove(entry)
                heapq.heapify(self._waiters)
                del self._since[oldest]
                return entry
        return heapq.heappop(self._waiters)


@dataclass
class LLMResult:
    """A response together with the record of the request that produced it."""

    response: ChatResponse
    record: CallRecord


class ModelQueue:
    """Serves LLM jobs over a backend chain with per-backend concurrency limits."""

    def __init__(
        self,
        chain: BackendChain,
        limits: dict[str, Any],
        retries: Retries,
    ) -> None:
        self.chain = chain
        self.retries = retries
        aging = limits.get("background_wait_s")
        self._slots = {
            b.name: PrioritySlots(int(limits.get(b.name, 1)) * b.servers, aging)
            for b in chain.backends
        }
        self.observers = Observers()
        """Told of every stored turn and job with its call records (the server's metrics)."""

    def depth(self) -> dict[str, tuple[int, int]]:
        """Per backend: (calls waiting for a slot, calls running) right now."""
        return {name: (len(s._waiters), s.busy) for name, s in self._slots.items()}

    async def submit(
        self,
        request: ChatRequest,
        *,
        trace: Trace,
        priority: int = FOREGROUND,
        on_token: TokenCallback | None = None,
    ) -> LLMResult:
        """Run one call; raise a :class:`BackendError` when no backend could answer.

        A dropped tool call (empty content, no tool calls, ``eval_count > 0`` on a request that
        carried tools — ollama#19187) is retried once with the same, full tool list; if thinking
        was on and it is dropped again, once more with ``think: false``. Every request is
        recorded, the dropped ones with outcome ``dropped_tool_call``.
        """
        result = await self._submit(request, trace, priority, on_token)
        if result.record.outcome != "dropped_tool_call":
            return result
        log.warning(
            "%s: a tool call was dropped by the server; retrying with all tools", request.caller
        )
        result = await self._submit(request, trace, priority, on_token)
        if result.record.outcome == "dropped_tool_call" and request.think:
            log.warning("%s: dropped again; retrying with think: false", request.caller)
            result = await self._submit(replace(request, think=False), trace, priority, on_token)
        return result

    async def embed(
        self,
        texts: list[str],
        model: str,
        *,
        caller: str,
        trace: Trace,
        priority: int = BACKGROUND,
    ) -> list[list[float]] | None:
        """Embeddings from the PRIMARY backend only (vectors of different models are not
        comparable), or ``None`` when it has no embed endpoint. One record per request;
        a failure raises :class:`BackendError` like a chat call."""
        backend = self.chain.primary
        if not backend.embeds:
            return None
        slots = self._slots[backend.name]
        queued = time.perf_counter()
        await slots.acquire(priority)
        started = time.perf_counter()
        record = CallRecord(
            caller=caller,
            backend=backend.name,
            model=model,
            think=False,
            queue_wait_ms=(started - queued) * 1000,
            started=started,
        )
        try:
            vectors = await backend.embed(texts, model, caller)
        except BackendError as exc:
            _fill_failure(record, exc, started)
            otel.model_call(record, model, error=exc, operation="embeddings")
            raise
        finally:
            slots.release()
            record.ms = (time.perf_counter() - started) * 1000
            trace.add_call(record)
        if len(vectors) != len(texts):
            record.outcome = "malformed"
            otel.model_call(record, model, operation="embeddings")
            raise BackendError(
                f"{backend.name} returned {len(vectors)} embeddings for {len(texts)} texts",
                backend=backend.name,
            )
        record.content_len = sum(len(v) for v in vectors)
        otel.model_call(record, model, operation="embeddings")
        return vectors

    async def _submit(
        self,
        request: ChatRequest,
        trace: Trace,
        priority: int,
        on_token: TokenCallback | None,
    ) -> LLMResult:
        causes: list[BackendError] = []
        streamed = _StreamWatch(on_token)
        for backend in self.chain.candidates():
            try:
                result = await self._on_backend(backend, request, trace, priority, streamed)
            except BackendError as exc:
                causes.append(exc)
                if not isinstance(exc, ContextOverflow | FormatRefused):
                    self.chain.failed(backend)  # the request's fault is not the backend's
                log.warning("%s failed for %s (%s)", backend.name, request.caller, error_kind(exc))
                if streamed.passed_on:
                    raise  # the user saw part of this answer: no silent second answer
                continue
            self.chain.succeeded(backend)
            return result
        if len(causes) == 1:
            raise causes[0]
        detail = " | ".join(f"{c.backend}: {c}" for c in causes)
        raise NoBackendAvailable(f"No backend could answer ({detail})", causes=causes)

    async def _on_backend(
        self,
        backend: Backend,
        request: ChatRequest,
        trace: Trace,
        priority: int,
        streamed: _StreamWatch,
    ) -> LLMResult:
        slots = self._slots[backend.name]
        attempt = 0  # requests sent for this call on this backend
        failures = 0  # retryable failures among them (bounded by retries.attempts)
        steps = 0  # structured-output step-downs (bounded by MAX_FORMAT_STEPS)
        while True:
            attempt += 1
            queued = time.perf_counter()
            await slots.acquire(priority)
            started = time.perf_counter()
            record = CallRecord(
                caller=request.caller,
                backend=backend.name,
                model=backend.model,
                think=backend.sent_think(request),
                queue_wait_ms=(started - queued) * 1000,
                attempt=attempt,
                started=started,
                json_mode=backend.json_mode(request),
            )
            try:
                response = await backend.chat(request, streamed.callback)
            except FormatRefused as exc:
                _fill_failure(record, exc, started)
                record.json_mode = cast(JsonMode, exc.refused)  # what this request asked for
                trace.add_call(record)
                otel.model_call(record, backend.model, request=request, error=exc)
                steps += 1
                if not exc.stepped_down or steps > MAX_FORMAT_STEPS or streamed.passed_on:
                    raise
                log.info("%s: %s", request.caller, exc)
                continue
            except BackendError as exc:
                _fill_failure(record, exc, started)
                trace.add_call(record)
                otel.model_call(record, backend.model, request=request, error=exc)
                failures += 1
                if not exc.retryable or failures >= self.retries.attempts or streamed.passed_on:
                    raise
                delay = self.retries.backoff_s * (2 ** (failures - 1))
                log.info("retrying %s on %s in %.2fs: %s", request.caller, backend.name, delay, exc)
                await asyncio.sleep(delay)
                continue
            except asyncio.CancelledError as cancelled:
                record.outcome = "error"
                record.error = "cancelled: the turn was aborted"
                record.ms = (time.perf_counter() - started) * 1000
                trace.add_call(record)
                otel.model_call(record, backend.model, request=request, error=cancelled)
                raise
            finally:
                slots.release()
            fill_answered(record, backend, request, response, started)
            trace.add_call(record)
            otel.model_call(record, backend.model, request=request, response=response)
            if response.prompt_cut:
                log.warning(
                    "%s: %s read %d prompt tokens of about %d sent: the prompt was cut to the "
                    "server's context window (outcome truncated)",
                    request.caller,
                    backend.name,
                    response.prompt_eval_count,
                    response.prompt_estimate,
                )
            elif record.outcome == "truncated":
                log.info(
                    "%s: the answer stopped at its output limit (%d tokens)",
                    request.caller,
                    response.eval_count,
                )
            return LLMResult(response, record)


def fill_answered(
    record: CallRecord,
    backend: Backend,
    request: ChatRequest,
    response: ChatResponse,
    started: float,
) -> None:
    """Complete the record of a request that was answered: what came back, as it came."""
    record.ms = (time.perf_counter() - started) * 1000
    record.model = response.model or backend.model
    record.think = backend.sent_think(request)
    record.json_mode = response.json_mode or record.json_mode
    record.content_len = len(response.content)
    record.thinking_len = len(response.thinking)
    record.eval_count = response.eval_count
    record.prompt_eval_count = response.prompt_eval_count
    record.backend_ms = response.total_duration / 1e6
    record.tool_calls = len(response.tool_calls)
    record.outcome = classify(request, response)
    record.host = response.host


def _fill_failure(record: CallRecord, exc: BackendError, started: float) -> None:
    record.ms = (time.perf_counter() - started) * 1000
    record.outcome = "timeout" if exc.outcome == "timeout" else "error"
    record.error = str(exc)
    record.host = exc.host


class _StreamWatch:
    """Wraps a token callback and remembers whether any token was passed on."""

    def __init__(self, on_token: TokenCallback | None) -> None:
        self._on_token = on_token
        self.passed_on = False
        self.callback: TokenCallback | None = self._forward if on_token else None

    async def _forward(self, piece: str) -> None:
        self.passed_on = True
        await emit(self._on_token, piece)
