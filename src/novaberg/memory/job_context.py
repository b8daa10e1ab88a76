"""What a background memory job gets: the model (:class:`~novaberg.context.CallContext`),
storage and the event queue whose event it runs. No prompts, tools or callbacks of a turn:
a job belongs to no turn, and ``memory/`` never imports ``nodes/``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from novaberg.context import CallContext
from novaberg.jobs.events import EventQueue
from novaberg.storage.db import Database


@dataclass(kw_only=True)
class JobContext(CallContext):
    db: Database
    events: EventQueue
    dates_ready: Callable[[], Awaitable[None]] | None = None
    """Awaited before dateparser's first use (the timeline job): starts its warm-up, which
    loads the language data once, if it has not started, and waits for it
    (``engine/background.py``)."""
