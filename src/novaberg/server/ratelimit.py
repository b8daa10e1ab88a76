"""The per-user rate limit: a token bucket per user holding a minute's worth of requests
(``server.rate_limit_per_minute``), refilled continuously. A request finding it empty is
refused with 429 and ``Retry-After`` (whole seconds until one request's worth is back).

The buckets live in this process (several ``novaberg serve`` processes each grant the
limit). A front-end key's end users (``NAME/ID``) each have their own bucket.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_BUCKETS = 10_000
"""Full buckets are dropped beyond this many users (a full bucket is what a new one is)."""


@dataclass
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.capacity = float(per_minute)
        self.per_second = per_minute / 60.0
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    @property
    def enabled(self) -> bool:
        return self.capacity > 0

    def take(self, who: str) -> float | None:
        """Take one request from ``who``'s bucket: ``None`` when allowed, else the seconds
        until one request's worth is back."""
        if not self.enabled:
            return None
        now = self._clock()
        bucket = self._buckets.get(who)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._drop_full(now)
            bucket = self._buckets[who] = _Bucket(self.capacity, now)
        else:
            bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.at) * self.per_second)
            bucket.at = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return None
        return (1.0 - bucket.tokens) / self.per_second

    def _drop_full(self, now: float) -> None:
        for who, bucket in list(self._buckets.items()):
            if bucket.tokens + (now - bucket.at) * self.per_second >= self.capacity:
                del self._buckets[who]


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))
