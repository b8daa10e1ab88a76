"""What a background memory job gets: the model (:class:`~novaberg.context.CallContext`),
storage and the event queue whose event it runs. No prompts, tools or callbacks of a turn:
a job belongs to no turn, and ``memory/`` never imports ``nodes/``."""

from __future__ import annotations

from dataclasses import dataclass

from novaberg.context import CallContext
from novaberg.jobs.events import EventQueue
from novaberg.storage.db import Database


@dataclass(kw_only=True)
class JobContext(CallContext):
    db: Database
    events: EventQueue
