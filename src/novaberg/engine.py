"""The turn engine: one user message in, one checked reply out, everything recorded.

Independent of any user interface: the CLI (and later an HTTP server) call
:meth:`Engine.run_turn` with callbacks for streamed tokens and node progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from novaberg import otel
from novaberg.backends.base import TokenCallback
from novaberg.backends.chain import BackendChain
from novaberg.backends.select import build_chain
from novaberg.config import Settings
from novaberg.errors import NovabergError, UsageError, error_kind
from novaberg.events import EventQueue
from novaberg.graph.state import TurnState
from novaberg.memory.store import MemoryStore
from novaberg.nodes.context import ProgressCallback, TurnContext
from novaberg.prompts.templates import prompts_for
from novaberg.queue import ModelQueue
from novaberg.storage.db import Database
from novaberg.storage.sql import Connection
from novaberg.telemetry import Trace
from novaberg.validation import validate_message

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from novaberg.memory.jobs import JobOutcome

log = logging.getLogger("novaberg")
__all__ = ["Engine", "TurnResult", "compile_turn_graph", "validate_message"]


def compile_turn_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The turn graph: router → enricher → responder → thinker → tribunal ⇄ corrector →
    salience → memory write (the thinker and the tribunal decide themselves whether to run).

    Imported and compiled on demand: LangGraph takes about a second to import, which
    :meth:`Engine.open` overlaps with its first backend request.
    """
    from novaberg.graph.build import Stage, build_turn_graph
    from novaberg.nodes import corrector, router, salience, thinker
    from novaberg.nodes.enricher import enricher
    from novaberg.nodes.memory_write import memory_write
    from novaberg.nodes.responder import responder
    from novaberg.nodes.tribunal import route_after_tribunal, tribunal

    # Only the responder is essential; a stage with a fallback fails into it with a notice
    # (graph/failure.py), and each judge abstains on its own (nodes/tribunal.py).
    return build_turn_graph(
        [
            Stage("router", router.router, fallback=router.FALLBACK),
            Stage("enricher", enricher),
            Stage("responder", responder),
            Stage("thinker", thinker.thinker, fallback=thinker.FALLBACK),
            Stage("tribunal", tribunal, after=route_after_tribunal),
            Stage(
                "corrector",
                corrector.corrector,
                after=lambda _: "tribunal",
                detour=True,
                fallback=corrector.FALLBACK,
            ),
            Stage("salience", salience.salience, fallback=salience.FALLBACK),
            Stage("memory_write", memory_write),
        ]
    )


@dataclass
class TurnResult:
    reply: str
    turn_id: int
    conversation_id: int
    state: TurnState
    trace: Trace
    memory_id: int | None
    followups: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)

    def contract_json(self) -> dict[str, Any]:
        """The object ``novaberg ask --json`` prints (../shared/DESIGN.md, interface contract)."""
        scored = self.state.get("salience")
        return {
            "reply": self.reply,
            "turn_id": self.turn_id,
            "conversation_id": self.conversation_id,
            "followups": self.followups,
            "calls": [c.contract_view() for c in self.trace.calls],
            "thinker": self.state.get("thinker"),
            "tribunal": _tribunal_view(self.state),
            "salience": None
            if scored is None
            else {"score": scored.get("score"), "stored": self.memory_id is not None},
            "events": self.events,
        }


def _tribunal_view(state: TurnState) -> dict[str, Any] | None:
    """``tribunal`` of the contract: voting rounds and the last round's votes."""
    court = state.get("tribunal")
    if court is None:
        return None
    corrections = (state.get("corrector") or {}).get("rounds", 0)
    return {"rounds": court["rounds"], "votes": court["votes"], "corrections": corrections}


def _embedded_defaults(settings: Settings, notices: list[str]) -> Settings:
    """On the tiny embedded model, the tribunal and the thinker are off unless forced: it
    cannot judge or follow the tool protocol, and every structured call costs seconds."""
    adjusted = settings.model_copy(deep=True)
    if adjusted.tribunal.judges and not adjusted.tribunal.on_embedded:
        adjusted.tribunal.judges = []
        notices.append(
            "The tribunal is off on the embedded model (too small to judge, and each vote "
            "costs seconds); set tribunal.on_embedded = true to judge anyway."
        )
    if adjusted.memory.jobs and not adjusted.memory.on_embedded:
        adjusted.memory.jobs = False
        notices.append(
            "Memory jobs (consolidation, profile, timeline) are off on the embedded model: "
            "salient items are still kept and retrieved; set memory.on_embedded = true to "
            "run them anyway."
        )
    if adjusted.thinker.mode == "auto":
        adjusted.thinker.mode = "never"
        notices.append(
            "The thinker is off on the embedded model (it cannot follow the tool protocol); "
            "set thinker.mode = always to run it anyway."
        )
    return adjusted


def _report_background_failure(task: asyncio.Task[list[JobOutcome]]) -> None:
    """A job failure is recorded by the job; this catches what stopped the whole runner (an
    unusable database, say): its jobs stay pending and run next time."""
    if not task.cancelled() and task.exception() is not None:
        exc = task.exception()
        assert exc is not None
        log.error("memory jobs stopped (%s); they run again next time", error_kind(exc))


async def _warm_up(chain: BackendChain) -> None:
    """Read the primary's capabilities now, so the first call does not wait for them.

    A failure here is not an error yet: the first real call reports it (and may fall back).
    """
    capabilities = getattr(chain.primary, "capabilities", None)
    if capabilities is None:
        return
    try:
        await capabilities()
    except NovabergError:
        return


class Engine:
    """Runs turns for one user over one backend chain and one database."""

    def __init__(
        self,
        settings: Settings,
        chain: BackendChain,
        db: Database,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    ) -> None:
        self.notices: list[str] = []
        if chain.primary.name == "embedded":
            settings = _embedded_defaults(settings, self.notices)
        self.settings = settings
        self.chain = chain
        self.db = db
        self.events = EventQueue(db)
        self.queue = ModelQueue(chain, settings.concurrency.model_dump(), settings.retries)
        self.prompts = prompts_for(settings.language)
        self.graph = graph if graph is not None else compile_turn_graph()
        self._background: asyncio.Task[list[JobOutcome]] | None = None

    @classmethod
    async def open(cls, settings: Settings) -> Engine:
        """Open the database, choose the backends and compile the graph, the last in a thread
        while the first backend requests (auto-mode probe, capabilities) are in flight."""
        compiling = asyncio.create_task(asyncio.to_thread(compile_turn_graph))
        notices: list[str] = []
        try:
            chain = await build_chain(settings, notices)
        except BaseException:
            compiling.cancel()
            raise
        otel.configure(settings, notices)
        try:
            await _warm_up(chain)
            db = Database(settings.database, settings.timeouts.database_s)
        except BaseException:
            compiling.cancel()
            await chain.aclose()
            raise
        engine = cls(settings, chain, db, graph=await compiling)
        engine.notices[:0] = notices
        return engine

    async def aclose(self) -> None:
        if self._background is not None and not self._background.done():
            self._background.cancel()  # its event stays 'running' and is redone next time
            with contextlib.suppress(asyncio.CancelledError, NovabergError):
                await self._background
        await self.chain.aclose()
        self.db.close()
        otel.flush()

    def conversation_for(self, conversation_id: int | None) -> int:
        if conversation_id is None:
            return self.db.new_conversation(self.settings.user)
        owner = self.db.conversation_user(conversation_id)
        if owner is None:
            raise UsageError(f"There is no conversation {conversation_id}.")
        if owner != self.settings.user:
            raise UsageError(
                f"Conversation {conversation_id} belongs to another user; "
                "choose one of yours or start a new one."
            )
        return conversation_id

    async def run_turn(
        self,
        text: str,
        *,
        conversation_id: int | None = None,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
    ) -> TurnResult:
        """Run one turn, then any second pass it scheduled (its answer is a follow-up).

        A turn is stored whole, or marked failed/aborted with no messages stored.
        """
        message = validate_message(text, self.settings)
        conversation = self.conversation_for(conversation_id)
        result = await self._run(message, conversation, "user", on_token, on_progress)
        result.followups = await self._drain_self_triggers(result.turn_id, conversation)
        result.events = self.db.events_of_turn(result.turn_id)
        return result

    async def _drain_self_triggers(self, turn_id: int, conversation: int) -> list[dict[str, Any]]:
        """Run the second passes this turn scheduled, each claimed first (another process on
        this home never runs it too)."""
        followups = []
        while (event := self.events.claim(("self_trigger",), turn_id=turn_id)) is not None:
            try:
                second = await self._run(
                    event.payload["user_text"],
                    conversation,
                    "self_trigger",
                    None,
                    None,
                    parent_turn_id=turn_id,
                )
            except NovabergError as exc:
                self.events.mark(event.id, "failed", type(exc).__name__)
                log.error(
                    "self-trigger event %d failed (%s; the turn records why)",
                    event.id,
                    type(exc).__name__,
                )
                continue
            self.events.mark(event.id, "delivered", f"follow-up in turn {second.turn_id}")
            log.info(
                "self-trigger event %d delivered (follow-up stored in turn %d)",
                event.id,
                second.turn_id,
            )
            followups.append(
                {"reply": second.reply, "origin": "self_trigger", "turn_id": second.turn_id}
            )
        return followups

    async def _run(
        self,
        message: str,
        conversation: int,
        origin: str,
        on_token: TokenCallback | None,
        on_progress: ProgressCallback | None,
        parent_turn_id: int | None = None,
    ) -> TurnResult:
        turn_id = self.db.start_turn(conversation, message, origin, parent_turn_id)
        ctx = TurnContext(
            settings=self.settings,
            queue=self.queue,
            db=self.db,
            prompts=self.prompts,
            events=self.events,
            on_token=on_token,
            on_progress=on_progress,
        )
        state: TurnState = {
            "user_text": message,
            "user_id": self.settings.user,
            "conversation_id": conversation,
            "turn_id": turn_id,
            "origin": origin,
            "thinker": None,
            "tribunal": None,
            "corrector": None,
            "salience": None,
            "memory_item": None,
            "events": [],
        }
        try:
            output = await otel.turn(
                self.graph.ainvoke(state, config={"configurable": {"turn": ctx}}),
                turn_id=turn_id,
                conversation_id=conversation,
                origin=origin,
                text=message,
            )
            final = cast(TurnState, output)
        except (asyncio.CancelledError, KeyboardInterrupt):
            self.db.end_turn_unfinished(
                turn_id, "aborted", "interrupted by the user", ctx.trace.calls
            )
            log.info("turn %d aborted; nothing but its call records was stored", turn_id)
            raise
        except NovabergError as exc:
            self.db.end_turn_unfinished(turn_id, "failed", str(exc), ctx.trace.calls)
            raise
        except Exception as exc:
            self.db.end_turn_unfinished(
                turn_id, "failed", f"{type(exc).__name__}: {exc}", ctx.trace.calls
            )
            raise
        return self._store(final, ctx.trace, turn_id, conversation, message)

    def _store(
        self, final: TurnState, trace: Trace, turn_id: int, conversation: int, message: str
    ) -> TurnResult:
        item = final.get("memory_item")
        context = final.get("context") or {}
        trace_doc = {
            "nodes": trace.nodes,
            "router": final.get("router"),
            "retrieval": context.get("retrieval"),
            "salience": final.get("salience"),
            "thinker": final.get("thinker"),
            "tribunal": final.get("tribunal"),
            "corrector": final.get("corrector"),
            "draft": final.get("draft"),
            "answered_by": trace.answered_by(),
            "notices": trace.notices,
        }

        def remember(c: Connection, message_id: int | None) -> tuple[int, list[int]] | None:
            if item is None:
                return None
            return self._remember(c, item, turn_id, message_id, conversation)

        stored = self.db.finish_turn(
            turn_id,
            conversation_id=conversation,
            user_text=message,
            reply=final["reply"],
            trace=trace_doc,
            calls=trace.calls,
            user_message=final.get("origin") != "self_trigger",
            also=remember,
        )
        memory_id = None
        if stored is not None:
            memory_id, jobs = stored
            log.info("turn %d stored memory %d", turn_id, memory_id)
            for event_id in jobs:
                log.info("memory job enqueued (event %d)", event_id)
        return TurnResult(
            reply=final["reply"],
            turn_id=turn_id,
            conversation_id=conversation,
            state=final,
            trace=trace,
            memory_id=memory_id,
        )

    def _remember(
        self,
        c: Connection,
        item: dict[str, Any],
        turn_id: int,
        message_id: int | None,
        conversation: int,
    ) -> tuple[int, list[int]]:
        """The short-term item and its background jobs, inside the turn's transaction."""
        user = self.settings.user
        added = MemoryStore.add(
            c,
            user,
            "short_term",
            item["text"],
            item["score"],
            f"turn:{turn_id}:short_term",
            source_turn_id=turn_id,
            source_message_id=message_id,
        )
        if not self.settings.memory.jobs or not added.created:
            return added.id, []
        types = ["consolidate", "timeline", "profile_adaptive"]
        if MemoryStore.count(c, user, "short_term") % self.settings.memory.core_every == 0:
            types.append("profile_core")
        payload = {"memory_id": added.id, "turn_id": turn_id}
        jobs = [self.events.enqueue(conversation, turn_id, t, payload, c) for t in types]
        return added.id, jobs

    def job_context(self) -> TurnContext:
        return TurnContext(
            settings=self.settings,
            queue=self.queue,
            db=self.db,
            prompts=self.prompts,
            events=self.events,
        )

    def start_background(self) -> None:
        """Start running waiting memory jobs as a task of this event loop (if none runs)."""
        if not self.settings.memory.jobs:
            return
        if self._background is None or self._background.done():
            self._background = asyncio.create_task(self.run_background())
            self._background.add_done_callback(_report_background_failure)

    def background_pending(self) -> bool:
        from novaberg.memory.jobs import JOB_TYPES

        running = self._background is not None and not self._background.done()
        return self.settings.memory.jobs and (
            running or bool(self.events.unfinished(JOB_TYPES, limit=1))
        )

    async def finish_background(self) -> list[JobOutcome]:
        """Wait for the running jobs, then run whatever is still waiting."""
        done: list[JobOutcome] = []
        if self._background is not None:
            done += await self._background
            self._background = None
        return done + await self.run_background()

    async def run_background(self, limit: int = 100) -> list[JobOutcome]:
        """Run the memory jobs waiting in the event queue (background priority)."""
        from novaberg.memory.jobs import BackgroundJobs

        if not self.settings.memory.jobs:
            return []
        return await otel.background(BackgroundJobs(self.job_context).run_pending(limit))
