"""One Ollama backend over several servers (``ollama_hosts``): each call goes to the least busy
healthy server.

Each server has ``concurrency.ollama`` slots of its own (the model queue gives the backend as
many slots as all its servers together) and a breaker of its own: a server whose request failed
for a reason of its own (unreachable, a timeout, an HTTP error, a cut stream) rests for
``breaker_cooldown_s`` while the others answer; when every server rests, the least busy is
tried anyway. A failure that is the request's (a context overflow, a capability the model lacks,
a model not installed) does not rest the server. The retry is the model queue's, as for one
server: it comes back here and goes to another server. The backend keeps the name ``ollama``
(the contracts rely on it); the server that answered, or failed, is on the response and the
error (``host``), and so in the call record (``llm_calls.host``): named by its place in the
setting, ``ollama_hosts[0]``, ``ollama_hosts[1]``, …, never by its address, since the records
reach every API user; the operator's ``novaberg doctor`` shows the addresses (without
userinfo) in the same order.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from novaberg.backends.base import BackendStatus, ChatRequest, ChatResponse, TokenCallback
from novaberg.backends.chain import Breaker
from novaberg.backends.ollama import OllamaBackend
from novaberg.config import Timeouts
from novaberg.errors import (
    BackendError,
    CapabilityError,
    ContextOverflow,
    FormatRefused,
    ModelNotFound,
)
from novaberg.redaction import safe_url
from novaberg.telemetry import JsonMode

NOT_THE_SERVERS_FAULT = (ContextOverflow, CapabilityError, ModelNotFound, FormatRefused)


def host_label(index: int) -> str:
    """How records name the ``index``-th server of ``ollama_hosts``."""
    return f"ollama_hosts[{index}]"


class _Server:
    def __init__(self, backend: OllamaBackend, cooldown_s: float, index: int) -> None:
        self.backend = backend
        self.address = safe_url(backend.host)
        """The server's address as the operator sees it: without userinfo."""
        self.label = host_label(index)
        """The server as call records name it (they reach API users: no address)."""
        self.breaker = Breaker(cooldown_s)
        self.busy = 0


class OllamaPool(OllamaBackend):
    """:class:`OllamaBackend` over several servers, one model."""

    def __init__(
        self,
        hosts: list[str],
        model: str,
        timeouts: Timeouts,
        *,
        limit: int,
        cooldown_s: float,
        num_ctx: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if len(hosts) < 2:
            raise ValueError("a pool needs at least two servers")
        super().__init__(hosts[0], model, timeouts, num_ctx=num_ctx)
        self.host = ", ".join(safe_url(h) for h in hosts)
        self.limit = limit
        self.servers = len(hosts)
        """How many servers: the model queue gives this backend ``limit`` slots per server."""
        self._members = [
            _Server(OllamaBackend(h, model, timeouts, num_ctx=num_ctx), cooldown_s, i)
            for i, h in enumerate(hosts)
        ]
        self._clock = clock
        self._freed = asyncio.Condition()

    def busy(self) -> dict[str, int]:
        """Requests running on each server now."""
        return {m.label: m.busy for m in self._members}

    def _pick(self) -> _Server | None:
        """The least busy server with a free slot, healthy ones first (in the listed order
        among equals); None when every one is full."""
        now = self._clock()
        free = [m for m in self._members if m.busy < self.limit]
        healthy = [m for m in free if not m.breaker.resting(now)]
        chosen = healthy or free
        return min(chosen, key=lambda m: m.busy) if chosen else None

    async def _take(self) -> _Server:
        async with self._freed:
            while (member := self._pick()) is None:
                await self._freed.wait()
            member.busy += 1
            return member

    async def _give(self, member: _Server) -> None:
        async with self._freed:
            member.busy -= 1
            self._freed.notify()

    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse:
        member = await self._take()
        try:
            response = await member.backend.chat(request, on_token)
        except BackendError as exc:
            exc.host = member.label
            if not isinstance(exc, NOT_THE_SERVERS_FAULT):
                member.breaker.failed(self._clock())
            raise
        finally:
            await asyncio.shield(self._give(member))
        member.breaker.succeeded()
        response.host = member.label
        return response

    async def embed(self, texts: list[str], model: str, caller: str) -> list[list[float]]:
        member = await self._take()
        try:
            return await member.backend.embed(texts, model, caller)
        except BackendError as exc:
            exc.host = member.label
            if not isinstance(exc, NOT_THE_SERVERS_FAULT):
                member.breaker.failed(self._clock())
            raise
        finally:
            await asyncio.shield(self._give(member))

    async def capabilities(self) -> tuple[str, ...]:
        """The model's capabilities, from the first server that tells them (one model)."""
        error: BackendError | None = None
        for member in self._members:
            try:
                caps = await member.backend.capabilities()
            except ModelNotFound:
                raise
            except BackendError as exc:
                error = error or exc
                continue
            for other in self._members:  # the same model everywhere: no second /api/show
                other.backend._capabilities.setdefault(self.model, caps)
            self._capabilities[self.model] = caps
            return caps
        assert error is not None
        raise error

    def sent_think(self, request: ChatRequest) -> bool:
        return self._members[0].backend.sent_think(request)

    def json_mode(self, request: ChatRequest) -> JsonMode:
        return self._members[0].backend.json_mode(request)

    async def context_claims(self, caller: str) -> tuple[int | None, int | None]:
        return await self._members[0].backend.context_claims(caller)

    async def status(self) -> BackendStatus:
        """Reachable when any server is; the detail names each server's state."""
        states = [await m.backend.status() for m in self._members]
        up = [s for s in states if s.reachable]
        parts = "; ".join(
            f"{m.address}: {'ok' if s.reachable else 'unreachable'}"
            for m, s in zip(self._members, states, strict=True)
        )
        if not up:
            first = states[0]
            return BackendStatus(self.name, self.model, False, parts, fix=first.fix)
        best = up[0]
        return BackendStatus(
            self.name,
            self.model,
            True,
            f"{len(up)} of {len(states)} Ollama servers answer ({parts})",
            capabilities=best.capabilities,
            installed_models=best.installed_models,
        )

    async def reachable(self, timeout_s: float = 1.0) -> bool:
        for member in self._members:
            if await member.backend.reachable(timeout_s):
                return True
        return False

    async def aclose(self) -> None:
        for member in self._members:
            await member.backend.aclose()
        await super().aclose()
