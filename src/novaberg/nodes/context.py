"""What a node gets besides the state: the model (:class:`~novaberg.context.CallContext`),
storage, the event queue, prompts, tools, and the caller's streaming callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from novaberg.backends.base import TokenCallback
from novaberg.context import CallContext
from novaberg.events import EventQueue
from novaberg.memory.embedding import Vectors
from novaberg.prompts.templates import Prompts
from novaberg.storage.db import Database
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.registry import ToolRegistry

ProgressCallback = Callable[[str], None]


@dataclass(kw_only=True)
class TurnContext(CallContext):
    db: Database
    prompts: Prompts
    events: EventQueue
    tools: ToolRegistry = field(default_factory=builtin_registry)
    on_token: TokenCallback | None = None
    on_progress: ProgressCallback | None = None
    message_vector: asyncio.Task[Vectors] | None = None
    """The user message's vector, computed from the turn's start
    (:func:`~novaberg.memory.retrieval.start_message_vector`), for the enricher."""

    def entered(self, node: str, *, announce: bool = True) -> None:
        """``node`` starts: traced, and announced as progress unless it will do nothing."""
        self.trace.enter(node)
        if announce and self.on_progress is not None:
            self.on_progress(node)
