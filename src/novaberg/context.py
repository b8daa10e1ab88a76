"""What every caller of the model needs: settings, the model queue and a trace of its calls.

Both kinds of work that call the model extend it: a turn's nodes get a
:class:`~novaberg.nodes.context.TurnContext`, a background memory job a
:class:`~novaberg.memory.job_context.JobContext`. Neither package imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from novaberg.backends.base import ChatRequest, TokenCallback
from novaberg.config import Settings
from novaberg.prompts.budget import context_window, fit_request
from novaberg.queue import FOREGROUND, LLMResult, ModelQueue
from novaberg.telemetry import Trace


@dataclass(kw_only=True)
class CallContext:
    settings: Settings
    queue: ModelQueue
    trace: Trace = field(default_factory=Trace)
    yields_to: int = FOREGROUND
    """The highest priority this context's calls get, whatever they ask for: a message Nova
    writes first calls at background priority, behind the turns of people typing."""

    @property
    def window(self) -> int:
        """The context window every prompt of this caller is sized to (over the chain's
        backends: :func:`~novaberg.prompts.budget.context_window`)."""
        return context_window(self.settings, (b.name for b in self.queue.chain.backends))

    async def llm(
        self,
        request: ChatRequest,
        *,
        priority: int = FOREGROUND,
        on_token: TokenCallback | None = None,
    ) -> LLMResult:
        # Every request carries its output limit and fits the window (prompts/budget.py).
        request = fit_request(request, self.window, self.trace)
        return await self.queue.submit(
            request, trace=self.trace, priority=max(priority, self.yields_to), on_token=on_token
        )
