"""The backend chain: a primary and ordered fallbacks, each behind a circuit breaker.

A backend whose call failed (after its retries) rests for ``cooldown_s``; while it rests the
next backend answers. When every backend rests, all are tried in order anyway: a rest is a
preference, not a refusal to try.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from novaberg.backends.base import Backend


@dataclass
class Breaker:
    cooldown_s: float
    failures: int = 0
    open_until: float = 0.0

    def resting(self, now: float) -> bool:
        return now < self.open_until

    def failed(self, now: float) -> None:
        self.failures += 1
        self.open_until = now + self.cooldown_s

    def succeeded(self) -> None:
        self.failures = 0
        self.open_until = 0.0


class BackendChain:
    """Backends in the order they should answer."""

    def __init__(
        self,
        backends: list[Backend],
        cooldown_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not backends:
            raise ValueError("a backend chain needs at least one backend")
        self.backends = backends
        self._clock = clock
        self._breakers = {id(b): Breaker(cooldown_s) for b in backends}

    @property
    def primary(self) -> Backend:
        return self.backends[0]

    def candidates(self) -> list[Backend]:
        now = self._clock()
        awake = [b for b in self.backends if not self._breakers[id(b)].resting(now)]
        return awake or list(self.backends)

    def failed(self, backend: Backend) -> None:
        self._breakers[id(backend)].failed(self._clock())

    def succeeded(self, backend: Backend) -> None:
        self._breakers[id(backend)].succeeded()

    def resting(self, backend: Backend) -> bool:
        return self._breakers[id(backend)].resting(self._clock())

    async def aclose(self) -> None:
        for backend in self.backends:
            await backend.aclose()
