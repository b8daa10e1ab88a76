"""What a node gets besides the state: the model (:class:`~novaberg.context.CallContext`),
storage, the event queue, prompts, tools, and the caller's streaming callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from novaberg.backends.base import TokenCallback
from novaberg.context import CallContext
from novaberg.jobs.events import EventQueue
from novaberg.memory.retrieval import Recall
from novaberg.nodes.enricher_reads import EnricherReads
from novaberg.proactive.due import Due
from novaberg.prompts.templates import Prompts
from novaberg.storage.db import Database, Message
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.registry import ToolRegistry

ProgressCallback = Callable[[str], None]
AnswerCallback = Callable[[str], None]
"""Called once with the turn's answer when it is final: the tribunal passed it (or there is
no tribunal), before salience and the memory write (:func:`~novaberg.graph.build.strict`)."""


@dataclass(frozen=True)
class Shown:
    """What a front-end shows its user and sent with the message (``/v1``): the chat as it
    resent it, which becomes the responder's recent history instead of Nova's stored one,
    and, when ``server.frontend_system_prompt`` is ``situation``, its system prompt, handed
    to the responder as part of the situation (never as instructions, never to a judge)."""

    history: tuple[Message, ...] | None
    """``None``: Nova's stored history (the front-end resent none)."""
    system: str | None = None
    attached: str = ""
    """The sources the front-end attached to the message (Open WebUI's RAG context: a file,
    a web search, a tool's result), handed to the responder as such: data, never the
    user's words, never a judge's."""


@dataclass(kw_only=True)
class TurnContext(CallContext):
    db: Database
    prompts: Prompts
    events: EventQueue
    tools: ToolRegistry = field(default_factory=builtin_registry)
    on_token: TokenCallback | None = None
    on_progress: ProgressCallback | None = None
    on_answer: AnswerCallback | None = None
    shown: Shown | None = None
    aside: str = ""
    """A sentence of Nova's own after the answer (fixed text, never judged): what she could
    not read of the message. Handed out and stored with the answer."""
    proactive: Due | None = None
    """The message Nova writes first that this turn is (origin ``proactive``)."""
    recalled: asyncio.Task[Recall] | None = None
    """What memory holds for the message, searched from the turn's start, beside the
    router's call (:func:`~novaberg.memory.retrieval.start_recall`), for the enricher."""
    read: asyncio.Task[EnricherReads] | None = None
    """The enricher's reads, from the turn's start too
    (:func:`~novaberg.nodes.enricher_reads.start_reads`); ``None``: it reads them itself."""

    def entered(self, node: str, *, announce: bool = True) -> None:
        """``node`` starts: traced, and announced as progress unless it will do nothing."""
        self.trace.enter(node)
        if announce and self.on_progress is not None:
            self.on_progress(node)

    def with_aside(self, reply: str) -> str:
        return f"{reply}\n\n{self.aside}" if self.aside else reply

    def answered(self, reply: str) -> None:
        """The answer is final: hand it (with the aside) to the caller now, once per turn."""
        if self.on_answer is not None:
            callback, self.on_answer = self.on_answer, None
            callback(self.with_aside(reply))
