"""The server and model under probe: every request goes out through the backend object.

The backend is the single choke point to the wire, so each probe request carries its caller
(``X-Novaberg-Caller: probe_<name>``) like every other request, and becomes one
:class:`~novaberg.telemetry.CallRecord` classified by the same guard as a turn's calls
(``backends/guards.py``). Unlike the model queue, the probe never retries: a retry would hide
the very faults it counts (a dropped tool call is retried once by the queue). The one
exception is a structured-output shape the server refused and the backend has stepped down
from: that request is sent again at once in the simpler shape, as the queue does.

At most ``concurrency`` requests are in flight (the backend's ``concurrency`` setting), so a
probe keeps the server as busy as Novaberg would, and no busier.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from novaberg.backends.base import Backend, ChatRequest, ChatResponse
from novaberg.errors import BackendError, BackendTimeout, BackendUnreachable, FormatRefused
from novaberg.queue import fill_answered
from novaberg.telemetry import CallRecord, JsonMode

MAX_FORMAT_STEPS = 2
"""json_schema → json_object → prompt, as in the model queue."""


@dataclass
class Sent:
    """One probe request: what came back (or the error), its record, and when the first
    content piece arrived (streamed requests only)."""

    request: ChatRequest
    record: CallRecord
    response: ChatResponse | None = None
    error: BackendError | None = None
    first_token_s: float | None = None


class ProbeTarget:
    """One backend and model; requests through it, recorded, ``concurrency`` at a time."""

    def __init__(
        self,
        backend: Backend,
        concurrency: int,
        capabilities: tuple[str, ...] | None,
        on_trial: Callable[[], None] | None = None,
    ) -> None:
        self.backend = backend
        self.capabilities = capabilities
        """As the server reports them; ``None`` when its protocol does not say."""
        self.concurrency = concurrency
        self.calls: list[CallRecord] = []
        self.on_trial = on_trial
        self.reached = 0
        """Requests the server answered in any way (a refusal too; not a timeout or a failed
        connection)."""
        self._slots = asyncio.Semaphore(concurrency)

    def can(self, capability: str) -> bool | None:
        """Whether the model reports ``capability``; ``None`` when unknown."""
        return None if self.capabilities is None else capability in self.capabilities

    @property
    def answered(self) -> int:
        return sum(1 for c in self.calls if c.outcome not in ("error", "timeout"))

    async def send(self, request: ChatRequest, *, stream: bool = False) -> Sent:
        """One trial's request (and the re-send of a refused structured-output shape)."""
        try:
            for _ in range(MAX_FORMAT_STEPS):
                sent = await self._once(request, stream)
                if not (isinstance(sent.error, FormatRefused) and sent.error.stepped_down):
                    return sent
            return await self._once(request, stream)
        finally:
            if self.on_trial is not None:
                self.on_trial()

    async def _once(self, request: ChatRequest, stream: bool) -> Sent:
        first: list[float] = []

        async def on_token(piece: str) -> None:
            if not first:
                first.append(time.perf_counter())

        async with self._slots:
            started = time.perf_counter()
            record = CallRecord(
                caller=request.caller,
                backend=self.backend.name,
                model=self.backend.model,
                think=self.backend.sent_think(request),
                started=started,
                json_mode=self.backend.json_mode(request),
            )
            self.calls.append(record)
            try:
                response = await self.backend.chat(request, on_token if stream else None)
            except BackendError as exc:
                if not isinstance(exc, BackendUnreachable | BackendTimeout):
                    self.reached += 1
                record.ms = (time.perf_counter() - started) * 1000
                record.outcome = "timeout" if exc.outcome == "timeout" else "error"
                record.error = str(exc)
                if isinstance(exc, FormatRefused):
                    record.json_mode = _as_mode(exc.refused)
                return Sent(request, record, error=exc)
        self.reached += 1
        fill_answered(record, self.backend, request, response, started)
        first_token_s = first[0] - started if first else None
        return Sent(request, record, response=response, first_token_s=first_token_s)


def _as_mode(name: str) -> JsonMode:
    modes: tuple[JsonMode, ...] = ("json_schema", "json_object", "prompt")
    return next((m for m in modes if m == name), "")
