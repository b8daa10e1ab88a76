"""What a node gets besides the state: settings, the model queue, storage, the trace."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from novaberg.backends.base import ChatRequest, TokenCallback
from novaberg.config import Settings
from novaberg.events import EventQueue
from novaberg.prompts.budget import fit_request, window_of
from novaberg.prompts.templates import Prompts
from novaberg.queue import FOREGROUND, LLMResult, ModelQueue
from novaberg.storage.db import Database
from novaberg.telemetry import Trace
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.registry import ToolRegistry

ProgressCallback = Callable[[str], None]


@dataclass
class TurnContext:
    settings: Settings
    queue: ModelQueue
    db: Database
    prompts: Prompts
    events: EventQueue
    tools: ToolRegistry = field(default_factory=builtin_registry)
    trace: Trace = field(default_factory=Trace)
    on_token: TokenCallback | None = None
    on_progress: ProgressCallback | None = None

    def entered(self, node: str) -> None:
        self.trace.enter(node)
        if self.on_progress is not None:
            self.on_progress(node)

    async def llm(
        self,
        request: ChatRequest,
        *,
        priority: int = FOREGROUND,
        on_token: TokenCallback | None = None,
    ) -> LLMResult:
        # Every request carries its output limit and fits the window (prompts/budget.py).
        request = fit_request(request, window_of(self), self.trace)
        return await self.queue.submit(
            request, trace=self.trace, priority=priority, on_token=on_token
        )
