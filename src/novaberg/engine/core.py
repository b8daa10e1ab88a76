"""The Engine: opens the parts a turn needs, runs a turn through the graph, marks a turn that
did not finish, and runs the second passes it scheduled (self-triggers).

What each step delegates: graph assembly (``assembly.py``), the embedded-mode policy
(``embedded_policy.py``), turn storage (``turn_store.py``), the memory-job policy
(``background.py``), the contract JSON (``result.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from novaberg import otel
from novaberg.backends.base import TokenCallback
from novaberg.backends.chain import BackendChain
from novaberg.backends.select import build_chain
from novaberg.config import Settings
from novaberg.engine.assembly import compile_turn_graph
from novaberg.engine.background import BackgroundJobRunner
from novaberg.engine.contract import FollowupView
from novaberg.engine.embedded_policy import embedded_defaults
from novaberg.engine.result import TurnResult
from novaberg.engine.turn_store import (
    begin_turn,
    open_conversation,
    store_turn,
    trace_document,
)
from novaberg.errors import NovabergError, error_kind
from novaberg.graph.state import TurnState
from novaberg.jobs.events import EventQueue
from novaberg.memory.embedding import choose as choose_embedder
from novaberg.memory.retrieval import Heed, catch_up, start_recall
from novaberg.nodes.context import AnswerCallback, ProgressCallback, Shown, TurnContext
from novaberg.nodes.enricher_reads import start_reads
from novaberg.proactive.due import Due
from novaberg.proactive.schedule import zone
from novaberg.prompts.templates import prompts_for
from novaberg.queue import BACKGROUND, CALL_OWNER, FOREGROUND, ModelQueue
from novaberg.storage import deliveries
from novaberg.storage import events as stored_events
from novaberg.storage.db import Database
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.mcp_servers import McpServers
from novaberg.trace_document import TraceDocument
from novaberg.validation import validate_message

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from novaberg.memory.jobs import JobOutcome

log = logging.getLogger("novaberg")


def _load_embedder(name: str) -> None:
    from novaberg.embedders import get_embedder

    get_embedder(name).load()


def _start_embedder(settings: Settings) -> asyncio.Task[None] | None:
    """Start loading the in-process memory embedder in a thread, first thing at open: a
    turn's enricher needs it after the router's one call, and loading it (onnxruntime's
    session, the vocabulary) takes longer than opening the rest."""
    choice = choose_embedder(settings)
    if choice.name is None or choice.backend:
        return None
    return asyncio.create_task(asyncio.to_thread(_load_embedder, choice.name))


async def _warm_in_threads(settings: Settings, embedder: asyncio.Task[None] | None) -> None:
    """Load, in threads and while the first turn's first calls are in flight, what a turn
    would otherwise wait for: the time zone of proactive messages and the in-process memory
    embedder (recall by meaning; started at open). dateparser's language data is the memory
    jobs' and loads beside their model calls (``BackgroundJobRunner.warm``). A failure here is
    reported where the part is used."""
    work: list[Awaitable[object]] = []
    if settings.proactive.enabled:  # the zone file is read once, here, off the loop
        work.append(asyncio.to_thread(zone, settings))
    if embedder is not None:
        work.append(embedder)
    for outcome in await asyncio.gather(*work, return_exceptions=True):
        if isinstance(outcome, BaseException):
            log.debug("a warm-up failed (%s); the part reports it when used", error_kind(outcome))


def _report_embedding_failure(task: asyncio.Task[list[str]]) -> None:
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("a new memory item got no vector yet (%s); retrieval adds it", error_kind(exc))


async def _warm_up(chain: BackendChain, within_s: float) -> None:
    """Read the primary's capabilities now, so the first call does not wait for them.

    A failure here is not an error yet: the first real call reports it (and may fall back).
    Neither is a backend that accepts the connection but does not answer within ``within_s``
    (``timeouts.connect_s``): opening waits no longer, so a process told to stop while it
    starts (``novaberg serve`` under SIGTERM) stops in seconds, not after the model call's
    timeout.
    """
    try:
        await asyncio.wait_for(chain.primary.capabilities(), within_s)
    except NovabergError:
        return
    except TimeoutError:
        log.debug("the backend did not answer within %.1f s at open; the first call asks", within_s)


class Engine:
    """Runs turns over one backend chain and one database.

    Shared by every turn: the chain, the model queue, the database, the event queue, the
    compiled graph and the prompts. Per user: the ``user`` argument of :meth:`run_turn`
    (default ``settings.user``), handed down explicitly (``_run``, ``turn_store``), so the
    server passes the user of each request. Background jobs run for the user whose
    conversation enqueued them.

    No database call runs on the event loop: each goes through ``await self.db.run(...)``
    (the database's worker threads, a connection each), and so does every node's, tool's and
    job's. The database is opened, and dateparser's slow first call warmed, in threads too.
    """

    def __init__(
        self,
        settings: Settings,
        chain: BackendChain,
        db: Database,
        graph: CompiledStateGraph[Any, Any, Any, Any] | None = None,
    ) -> None:
        self.notices: list[str] = []
        if chain.primary.name == "embedded":
            settings = embedded_defaults(settings, self.notices)
        self.settings = settings
        self.chain = chain
        self.db = db
        self.events = EventQueue(db)
        self.queue = ModelQueue(chain, settings.concurrency.model_dump(), settings.retries)
        self.prompts = prompts_for(settings.language)
        self.graph = graph if graph is not None else compile_turn_graph()
        self.background = BackgroundJobRunner(settings, self.queue, db, self.events)
        self._warming: asyncio.Task[None] | None = None
        self._embedding: set[asyncio.Task[list[str]]] = set()
        self.mcp = McpServers(settings.mcp)
        """The configured MCP servers, whose tools join the thinker's (none by default)."""

    @classmethod
    async def open(cls, settings: Settings) -> Engine:
        """Open the database, choose the backends and compile the graph, the last in a thread
        while the first backend requests (auto-mode probe, capabilities) are in flight."""
        embedder = _start_embedder(settings)
        compiling = asyncio.create_task(asyncio.to_thread(compile_turn_graph))
        notices: list[str] = []
        try:
            chain = await build_chain(settings, notices)
        except BaseException:
            compiling.cancel()
            _drop(embedder)
            raise
        otel.configure(settings, notices)
        db: Database | None = None
        try:
            await _warm_up(chain, settings.timeouts.connect_s)
            db = await asyncio.to_thread(Database, settings.database, settings.timeouts.database_s)
            graph = await compiling
        except BaseException:  # a failure, or cancelled (a stop while opening): close it all
            compiling.cancel()
            _drop(embedder)
            await chain.aclose()
            if db is not None:
                await asyncio.to_thread(db.close)
            raise
        engine = cls(settings, chain, db, graph=graph)
        engine.notices[:0] = notices
        engine._warming = asyncio.create_task(_warm_in_threads(engine.settings, embedder))
        engine.mcp.start()  # the MCP servers start beside the first turn's arrival
        return engine

    async def warmed(self) -> None:
        """Wait until the warm-ups started at open (the memory embedder, the time zone) ended,
        and load dateparser's language data (otherwise loaded after the first memory job);
        turns never need to call this: they wait only for what they use."""
        if self._warming is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self._warming)
        if self.settings.memory.jobs:
            await self.background.dates()

    async def vectors_written(self) -> None:
        """Wait for the vectors of the items the turns so far stored (:meth:`embed_later`)."""
        await asyncio.gather(*self._embedding, return_exceptions=True)

    async def aclose(self) -> None:
        await self.background.cancel()  # a cancelled job's event is redone next time
        try:  # by another process at once: this one holds it no longer
            await self.db.run(self.events.release_mine)
        except Exception as exc:  # the database went first; the claim goes stale instead
            log.info("could not release this process's events at close: %s", type(exc).__name__)
        await self.mcp.aclose()
        await self.chain.aclose()
        if self._embedding:  # a new item's vector: quick, and the next process needs none
            await asyncio.gather(*self._embedding, return_exceptions=True)
        if self._warming is not None:
            with contextlib.suppress(Exception):
                await self._warming  # a thread cannot be stopped; let it end first
        await self.background.warmed()
        await asyncio.to_thread(self.db.close)  # waits for the work already handed over
        otel.flush()

    async def ping_database(self) -> None:
        """One round trip to the database, in a database worker (readiness); a
        :class:`~novaberg.errors.NovabergError` when it does not answer."""
        await self.db.run(self.db.ping)

    def conversation_for(self, conversation_id: int | None) -> int:
        """Sync: for code that is not on the event loop (a thread, a CLI command)."""
        return open_conversation(self.db, self.settings.user, conversation_id)

    async def run_turn(
        self,
        text: str,
        *,
        conversation_id: int | None = None,
        on_token: TokenCallback | None = None,
        on_progress: ProgressCallback | None = None,
        user: str | None = None,
        on_start: Callable[[int], None] | None = None,
        regenerate: int | None = None,
        drain_followups: bool = True,
        on_answer: AnswerCallback | None = None,
        shown: Shown | None = None,
        notices: Sequence[str] = (),
        aside: str = "",
        proactive: Due | None = None,
    ) -> TurnResult:
        """Run one turn, then any second pass it scheduled (its answer is a follow-up).

        ``regenerate``: the turn (of this conversation, with this message) whose reply is asked
        for again: this turn runs with origin ``regenerate`` and stores only its reply, which
        replaces the old one (``turn_store.store_turn``); no second user message, no memory.

        ``user``: whose conversation and memory (default ``settings.user``; the server passes
        the user of the request's key). ``on_start(turn_id)`` runs once the turn is recorded
        as running. A turn is stored whole, or marked failed/aborted with no messages stored.
        ``drain_followups=False``: return once the turn is stored; the caller runs
        :meth:`drain_self_triggers` (the server, which answers before its follow-ups). With
        the default, the follow-ups returned count as delivered (``novaberg.storage.deliveries``).
        ``on_answer(reply)``: the answer as soon as it is final, before salience and the memory
        write (the turn is stored after it, or marked failed). ``shown``: what a front-end
        shows (its resent chat: the responder's recent history). ``notices``: for the trace,
        from whoever admitted the turn. ``aside``: a sentence of Nova's own after the answer
        (fixed text, not judged), stored and handed out with it. ``proactive``: the turn is a
        message Nova writes first (origin ``proactive``, ``text`` its task, not stored as a
        user message; :mod:`novaberg.proactive`).
        """
        user = self.settings.user if user is None else user
        message = validate_message(text, self.settings)
        origin = "user" if regenerate is None else "regenerate"
        parent = regenerate
        if proactive is not None:
            origin, parent = "proactive", proactive.asked_in
        result = await self._run(
            message,
            user,
            conversation_id,  # opened with the turn's start
            origin,
            on_token,
            on_progress,
            parent_turn_id=parent,
            on_start=on_start,
            on_answer=on_answer,
            shown=shown,
            notices=notices,
            aside=aside,
            proactive=proactive,
        )
        # a second pass is claimed only where this turn scheduled one (the thinker's event)
        if drain_followups and any(e.type == "self_trigger" for e in result.state["events"]):
            result.followups = await self.drain_self_triggers(
                result.turn_id, user, result.conversation_id
            )
            inline = [f.turn_id for f in result.followups]
            if inline:
                await self.db.run(deliveries.mark_delivered, self.db, inline, "inline")
            # read with the store; read again once the second passes changed them
            result.events = await self.db.run(stored_events.states_of_turn, self.db, result.turn_id)
        return result

    async def drain_self_triggers(
        self, turn_id: int, user: str, conversation: int
    ) -> list[FollowupView]:
        """Run the second passes this turn scheduled, each claimed first (another process on
        this home never runs it too)."""
        followups = []
        claim = self.events.claim
        while (event := await self.db.run(claim, ("self_trigger",), turn_id=turn_id)) is not None:
            try:
                second = await self._run(
                    event.payload["user_text"],
                    user,
                    conversation,
                    "self_trigger",
                    None,
                    None,
                    parent_turn_id=turn_id,
                )
            except NovabergError as exc:
                await self.db.run(self.events.mark, event.id, "failed", type(exc).__name__)
                log.error(
                    "self-trigger event %d failed (%s; the turn records why)",
                    event.id,
                    type(exc).__name__,
                )
                continue
            await self.db.run(
                self.events.mark, event.id, "delivered", f"follow-up in turn {second.turn_id}"
            )
            log.info(
                "self-trigger event %d delivered (follow-up stored in turn %d)",
                event.id,
                second.turn_id,
            )
            followups.append(
                FollowupView(reply=second.reply, origin="self_trigger", turn_id=second.turn_id)
            )
        return followups

    async def resume_self_triggers(self, settled_s: float, limit: int = 100) -> list[int]:
        """Run the second passes no turn will drain any more: those of turns that ended more
        than ``settled_s`` ago (their process stopped or died before the follow-up ran). Each
        is claimed first, so it runs once across processes; its follow-up is stored in its
        conversation for the event stream and the next response. Returns the new turns' ids."""
        before = (datetime.now(UTC) - timedelta(seconds=settled_s)).isoformat(
            timespec="milliseconds"
        )
        ran: list[int] = []
        for _ in range(limit):
            event = await self.db.run(self.events.claim, ("self_trigger",), None, before)
            if event is None:
                break
            user = await self.db.run(self.db.conversation_user, event.conversation_id)
            if user is None:
                await self.db.run(self.events.mark, event.id, "failed", "conversation is gone")
                continue
            try:
                second = await self._run(
                    event.payload["user_text"],
                    user,
                    event.conversation_id,
                    "self_trigger",
                    None,
                    None,
                    parent_turn_id=event.turn_id,
                )
            except NovabergError as exc:
                await self.db.run(self.events.mark, event.id, "failed", type(exc).__name__)
                log.error("self-trigger event %d failed (%s)", event.id, type(exc).__name__)
                continue
            result = f"follow-up in turn {second.turn_id}"
            await self.db.run(self.events.mark, event.id, "delivered", result)
            log.info("self-trigger event %d delivered late (turn %d)", event.id, second.turn_id)
            ran.append(second.turn_id)
        return ran

    async def _run(
        self,
        message: str,
        user: str,
        conversation_id: int | None,
        origin: str,
        on_token: TokenCallback | None,
        on_progress: ProgressCallback | None,
        parent_turn_id: int | None = None,
        on_start: Callable[[int], None] | None = None,
        on_answer: AnswerCallback | None = None,
        shown: Shown | None = None,
        notices: Sequence[str] = (),
        aside: str = "",
        proactive: Due | None = None,
    ) -> TurnResult:
        began = time.perf_counter()
        # every tool, declared in each tool-bearing request; the MCP servers' once started
        # (the first turn waits for their start, bounded): before the turn is recorded
        tools = builtin_registry(await self.mcp.tools())
        CALL_OWNER.set(user)  # the model queue takes different users' calls in turn
        # ``conversation_id``: the user's own (checked here) or ``None`` for a new one
        starting = asyncio.ensure_future(
            self.db.run(begin_turn, self.db, user, conversation_id, message, origin, parent_turn_id)
        )
        try:
            conversation, turn_id = await asyncio.shield(starting)
        except asyncio.CancelledError as exc:  # the row is written all the same: mark it
            _, turn_id = await starting
            why = why_cancelled(exc)
            await self.db.run(self.db.end_turn_unfinished, turn_id, "aborted", why, [])
            raise
        if on_start is not None:
            on_start(turn_id)
        # what memory holds for the message: searched now, while the router's call is out,
        # not after it (the enricher awaits it)
        recalled = start_recall(
            self.db,
            self.settings,
            user,
            message,
            what="enricher",
            messages=Heed.for_turn(self.settings, conversation),
        )
        ctx = TurnContext(
            settings=self.settings,
            queue=self.queue,
            db=self.db,
            prompts=self.prompts,
            events=self.events,
            tools=tools,
            on_token=on_token,
            on_progress=on_progress,
            on_answer=on_answer,
            shown=shown,
            aside=aside,
            proactive=proactive,
            yields_to=FOREGROUND if proactive is None else BACKGROUND,
            recalled=recalled,
            # the enricher's reads, beside the router's call too
            read=start_reads(
                self.db,
                user,
                conversation,
                shown.history if shown is not None else None,
                self.settings.history_turns,
            ),
        )
        ctx.trace.notices.extend([*notices, *self.mcp.notices()])
        self.background.prepare()  # the memory jobs' code, beside the router's call
        state: TurnState = {
            "user_text": message,
            "user_id": user,
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
            _raise_if_cancelled()
        except (asyncio.CancelledError, KeyboardInterrupt) as exc:
            # a cancel may say why (TurnService: the client left before the answer)
            why = why_cancelled(exc)
            await self.db.run(self.db.end_turn_unfinished, turn_id, "aborted", why, ctx.trace.calls)
            log.info("turn %d aborted; nothing but its call records was stored", turn_id)
            self._ended("aborted", origin, began, ctx)
            raise
        except NovabergError as exc:
            await self.db.run(
                self.db.end_turn_unfinished, turn_id, "failed", str(exc), ctx.trace.calls
            )
            self._ended("failed", origin, began, ctx)
            raise
        except Exception as exc:
            await self.db.run(
                self.db.end_turn_unfinished,
                turn_id,
                "failed",
                f"{type(exc).__name__}: {exc}",
                ctx.trace.calls,
            )
            self._ended("failed", origin, began, ctx)
            raise
        finally:
            _settle(ctx.recalled)
            _settle(ctx.read)
        ctx.answered(final["reply"])  # a graph that ended before the salience stage
        final = cast(TurnState, {**final, "reply": ctx.with_aside(final["reply"])})
        # Shielded: a cancel now (the client left after the answer) must not leave the turn
        # half-told; the store is one transaction in a database thread that ends anyway.
        result = await asyncio.shield(self._store(user, final, ctx, turn_id, conversation, message))
        self._ended("done", origin, began, ctx, trace_document(final, ctx.trace))
        if result.memory_id is not None:
            self.embed_later(user)
        return result

    async def _store(
        self,
        user: str,
        final: TurnState,
        ctx: TurnContext,
        turn_id: int,
        conversation: int,
        message: str,
    ) -> TurnResult:
        return await self.db.run(
            store_turn,
            self.db,
            self.events,
            self.settings.memory,
            user,
            final,
            ctx.trace,
            turn_id,
            conversation,
            message,
            ctx.proactive,
        )

    def embed_later(self, user: str) -> None:
        """Give the item this turn stored its vector now, beside the turn rather than in the
        next turn's retrieval (which catches up whatever this misses)."""
        choice = choose_embedder(self.settings)
        if choice.name is None or choice.backend:
            return  # a backend embedder's calls go through the queue at retrieval
        task = asyncio.create_task(catch_up(self.db, user, self.settings, what="memory write"))
        self._embedding.add(task)
        task.add_done_callback(self._embedding.discard)
        task.add_done_callback(_report_embedding_failure)

    def _ended(
        self,
        status: str,
        origin: str,
        began: float,
        ctx: TurnContext,
        trace: TraceDocument | None = None,
    ) -> None:
        """Tell the queue's observers (the server's metrics) what the turn stored."""
        seconds = time.perf_counter() - began
        self.queue.observers.turn_ended(status, origin, seconds, ctx.trace.calls, trace)

    # -- memory jobs (background.py) ---------------------------------------------------------
    def start_background(self) -> None:
        """Start running waiting memory jobs as a task of this event loop (if none runs)."""
        self.background.start()

    def background_pending(self) -> bool:
        return self.background.pending()

    async def finish_background(self) -> list[JobOutcome]:
        """Wait for the running jobs, then run whatever is still waiting."""
        return await self.background.finish()

    async def run_background(self, limit: int = 100) -> list[JobOutcome]:
        """Run the memory jobs waiting in the event queue (background priority)."""
        return await self.background.run(limit)


SWALLOWED = "cancelled while the turn ran"
"""Why a turn is aborted whose cancel a part of the pipeline caught and dropped, or whose
reason a library re-raised in its own words."""
ANYIO_CANCEL = "Cancelled via cancel scope"
"""How anyio words a cancel it re-raises from one of its cancel scopes (httpx connecting to a
backend runs in one): the canceller's reason is lost, its own text names tasks and files."""


def why_cancelled(exc: BaseException) -> str:
    """Why a cancel or an interrupt aborted a turn, as stored with it: the reason its
    canceller gave, :data:`SWALLOWED` when a library replaced it (never the library's text)."""
    why = str(exc.args[0]) if exc.args else "interrupted by the user"
    return SWALLOWED if why.startswith(ANYIO_CANCEL) else why


def _raise_if_cancelled() -> None:
    """The graph returned, but this turn's task was cancelled on the way: a part of the
    pipeline caught the cancel and dropped it (seen about one time in sixty for a cancel that
    lands during the router's call; the task still counts it, ``Task.cancelling``). The turn is
    aborted all the same: a client that left must never get a stored turn it did not see."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError(SWALLOWED)


def _drop(task: asyncio.Task[Any] | None) -> None:
    """An open that failed: the embedder's load is not waited for (its thread ends alone)."""
    if task is not None:
        task.cancel()


def _settle(task: asyncio.Task[Any] | None) -> None:
    """A turn that ended before its enricher awaited the search or the reads started with
    it: cancel it, or collect its error, so that nothing is left pending or unreported."""
    if task is None:
        return
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()
