"""One door into a turn for every caller that is not a terminal: the server's two routes
today (``/api/turns`` and ``/v1/chat/completions``), MCP's ``talk`` and the proactive scheduler
(:mod:`novaberg.proactive.sender`).

:meth:`TurnService.admit` admits a turn or refuses it with nothing started: the message is
validated (:class:`~novaberg.errors.UsageError`), the model queue must have room
(:class:`~novaberg.errors.QueueFull`, ``server.max_queue``) and the conversation must have no
turn running in this process (:class:`~novaberg.errors.ConversationBusy`; one at a time).
Which conversation a request continues, and whether it is a regenerate, the caller has
chosen (:mod:`novaberg.engine.conversations`).

An admitted turn runs as a task of its own, then its self-triggered follow-ups
(``Engine.drain_self_triggers``), kept in :attr:`TurnService.running` until both are done.
Its caller reads :meth:`AdmittedTurn.events` — :class:`Started` once the turn is recorded,
:class:`Progress` per node that works, :class:`Answer` as soon as the answer is final (the
tribunal passed it; salience and the memory write come after), then :class:`Stored` or
:class:`Failed` — and encodes them for its client. A caller whose client went away before
the answer reached it calls :meth:`AdmittedTurn.leave`: the turn is cancelled and stored as
aborted (the user's message is not stored, no reply is kept, nothing unseen becomes history)
and the conversation is free for the next message. After :meth:`AdmittedTurn.delivered` a
client that leaves no longer stops anything: the turn is stored, and its follow-ups reach
``GET /api/events`` and the conversation's next response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from novaberg.engine.contract import FollowupView, TurnContract
from novaberg.engine.core import Engine
from novaberg.engine.memories import MAX_ID
from novaberg.engine.result import TurnResult
from novaberg.errors import ConversationBusy, QueueFull, error_kind
from novaberg.nodes.context import Shown
from novaberg.proactive.due import Due
from novaberg.storage import deliveries, turns
from novaberg.storage import events as stored_events
from novaberg.storage.deliveries import Followup
from novaberg.storage.events import EventState
from novaberg.storage.turns import OwnedTurn
from novaberg.validation import validate_message

if TYPE_CHECKING:
    from novaberg.engine.why import TurnWhy

__all__ = [
    "LEFT",
    "AdmittedTurn",
    "Answer",
    "Failed",
    "Followup",
    "Progress",
    "Shown",
    "Started",
    "Stored",
    "TurnAsk",
    "TurnEvent",
    "TurnService",
]
"""``Shown`` (what a front-end resent with the message) and ``Followup`` (a self-triggered
follow-up waiting for its delivery) are part of this door's vocabulary: its callers need no
import from the layers below."""

log = logging.getLogger("novaberg")

LEFT = "the client went away before the answer reached it"
"""Why a turn whose client left (:meth:`AdmittedTurn.leave`) is aborted: stored as its error."""


@dataclass(frozen=True)
class Started:
    turn_id: int
    conversation_id: int


@dataclass(frozen=True)
class Progress:
    node: str


@dataclass(frozen=True)
class Answer:
    """The answer, final: what the tribunal passed (a draft it sent back never comes)."""

    text: str


@dataclass(frozen=True)
class Stored:
    result: TurnResult


@dataclass(frozen=True)
class Failed:
    """The turn failed or was cancelled (the server stops); it is marked so in the database.
    ``answered``: its answer had been handed out before (salience or the store failed)."""

    error: BaseException
    answered: bool


TurnEvent = Started | Progress | Answer | Stored | Failed


@dataclass(frozen=True)
class TurnAsk:
    """A turn to admit: ``user``'s ``message`` in ``conversation`` (one of theirs), a
    regenerate of turn ``regenerate`` or a new turn, with what the front-end shows (``shown``)
    and the notices its admission made (for the trace)."""

    user: str
    message: str
    conversation: int
    regenerate: int | None = None
    shown: Shown | None = None
    notices: tuple[str, ...] = ()
    aside: str = ""
    """A sentence of Nova's own after the answer (what she did not read), stored with it."""
    proactive: Due | None = None
    """A message Nova writes first (the scheduler's): ``message`` is its task."""


@dataclass
class AdmittedTurn:
    """A turn that runs: read its events once, tell it when its answer was delivered, or
    that its client left."""

    conversation: int
    _events: asyncio.Queue[TurnEvent] = field(default_factory=asyncio.Queue)
    _task: asyncio.Task[list[FollowupView]] | None = None
    _ended: asyncio.Future[TurnResult] | None = None
    _answered: bool = False
    _delivered: bool = False
    left: bool = False
    """The client went away before the answer reached it; the turn was aborted."""

    async def events(self) -> AsyncIterator[TurnEvent]:
        """The turn's events, up to and including :class:`Stored` or :class:`Failed`."""
        while True:
            event = await self._events.get()
            yield event
            if isinstance(event, Stored | Failed):
                return

    def delivered(self) -> None:
        """The answer reached the client: a client that leaves now stops nothing."""
        self._delivered = True

    def leave(self) -> None:
        """The client went away: abort the turn unless its answer was delivered."""
        if self._delivered or self._task is None or self._task.done():
            return
        if self._ended is not None and self._ended.done():
            return  # stored already; only its follow-ups run
        self.left = True
        self._task.cancel(LEFT)

    async def followups(
        self, engine: Engine, wait_s: float | None, channel: deliveries.Channel
    ) -> list[FollowupView]:
        """The follow-ups ready within ``wait_s`` of now (``None``: all of them, however long
        they take), claimed for this response (none when their drain failed): entries as in
        ``TurnResult.followups``."""
        assert self._task is not None
        task = self._task
        done, _ = await asyncio.wait({task}, timeout=wait_s)
        if not done or task.cancelled() or task.exception() is not None:
            return []
        ready = task.result()
        ids = [f.turn_id for f in ready]
        claimed = set(await engine.db.run(deliveries.mark_delivered, engine.db, ids, channel))
        return [f for f in ready if f.turn_id in claimed]


class TurnService:
    """Admits turns over one engine and runs them (see the module text)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.running: set[asyncio.Task[Any]] = set()
        """Turns (with their follow-ups) still running: the server's shutdown waits for
        them within its grace, then cancels them (stored as aborted)."""
        self._busy: set[int] = set()

    async def events_of(self, turn_id: int) -> list[EventState]:
        """The events the stored turn ``turn_id`` scheduled, oldest first (its contract's
        ``events``)."""
        db = self.engine.db
        return await db.run(stored_events.states_of_turn, db, turn_id)

    async def owned(self, user: str, turn_id: int) -> OwnedTurn | None:
        """The stored turn ``turn_id`` with its status, when it is ``user``'s; ``None`` for
        another user's turn, or none (an id out of range included)."""
        if not 1 <= turn_id <= MAX_ID:
            return None
        db = self.engine.db
        row = await db.run(turns.turn_owner, db, turn_id)
        return row if row is not None and row.user_id == user else None

    async def contract_of(self, row: OwnedTurn) -> TurnContract:
        """The contract of the finished turn ``row`` (from :meth:`owned`), rebuilt from what
        was stored (:mod:`novaberg.engine.stored_turns`)."""
        from novaberg.engine.stored_turns import stored_turn

        return await self.engine.db.run(stored_turn, self.engine.db, row)

    async def why(self, user: str, turn_id: int) -> TurnWhy | None:
        """The Why details of ``user``'s turn ``turn_id`` (the page's Why panel)."""
        from novaberg.engine.why import turn_why

        if not 1 <= turn_id <= MAX_ID:
            return None
        return await self.engine.db.run(turn_why, self.engine.db, turn_id, user)

    async def tokens_of(self, turn_ids: Iterable[int]) -> tuple[int, int]:
        """The prompt and completion tokens of every call the stored turns made."""
        db = self.engine.db

        def read() -> tuple[int, int]:  # in a worker
            calls = [c for turn_id in turn_ids for c in turns.calls_of(db, turn_id)]
            return sum(c.prompt_eval_count for c in calls), sum(c.eval_count for c in calls)

        return await db.run(read)

    def refuse_when_queue_full(self) -> None:
        """:class:`QueueFull` when ``server.max_queue`` model calls already wait."""
        limit = self.engine.settings.server.max_queue
        waiting = sum(waiting for waiting, _ in self.engine.queue.depth().values())
        if waiting >= limit:
            raise QueueFull(waiting, limit)

    def admit(self, ask: TurnAsk) -> AdmittedTurn:
        """Start ``ask``'s turn, or refuse it with nothing started."""
        engine = self.engine
        message = validate_message(ask.message, engine.settings)
        self.refuse_when_queue_full()
        if ask.conversation in self._busy:
            raise ConversationBusy(ask.conversation)
        self._busy.add(ask.conversation)
        turn = AdmittedTurn(ask.conversation)
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[TurnResult] = loop.create_future()
        turn._ended = ended

        def on_progress(node: str) -> None:
            if not turn._answered:  # after the answer only books are kept: not shown
                turn._events.put_nowait(Progress(node))

        def on_answer(text: str) -> None:
            turn._answered = True
            turn._events.put_nowait(Answer(text))

        async def whole() -> list[FollowupView]:
            try:
                result = await engine.run_turn(
                    message,
                    conversation_id=ask.conversation,
                    user=ask.user,
                    on_start=lambda turn_id: turn._events.put_nowait(
                        Started(turn_id, ask.conversation)
                    ),
                    on_progress=on_progress,
                    on_answer=on_answer,
                    regenerate=ask.regenerate,
                    drain_followups=False,
                    shown=ask.shown,
                    notices=ask.notices,
                    aside=ask.aside,
                    proactive=ask.proactive,
                )
            except BaseException as exc:
                self._busy.discard(ask.conversation)
                turn._events.put_nowait(Failed(exc, turn._answered))
                ended.cancel()
                if isinstance(exc, asyncio.CancelledError):
                    raise
                return []
            self._busy.discard(ask.conversation)
            ended.set_result(result)
            turn._events.put_nowait(Stored(result))
            engine.start_background()  # the turn's memory jobs, in this process's loop
            return await engine.drain_self_triggers(result.turn_id, ask.user, ask.conversation)

        task = asyncio.create_task(whole())
        turn._task = task
        self.running.add(task)
        task.add_done_callback(self.running.discard)
        task.add_done_callback(_report)
        return turn

    async def waiting_followups(
        self, conversation: int, channel: deliveries.Channel, *, before_turn: int | None = None
    ) -> list[Followup]:
        """The conversation's follow-ups no response has delivered (they were not ready in
        time), claimed for a response that shows them first; ``before_turn``: only those of
        turns before it (a response's own turn's follow-up comes after its answer)."""
        db = self.engine.db
        return await db.run(
            deliveries.claim_waiting, db, conversation, channel, before_turn=before_turn
        )

    async def finish(self, grace_s: float) -> None:
        """Let the running turns finish within ``grace_s``; cancel the rest (stored as
        aborted)."""
        running = list(self.running)
        if running and grace_s > 0:
            log.info("waiting up to %.1f s for %d running turn(s)", grace_s, len(running))
            await asyncio.wait(running, timeout=grace_s)
        late = [t for t in self.running if not t.done()]
        for task in late:
            task.cancel()
        if late:
            log.warning("%d turn(s) still running after the shutdown grace: aborted", len(late))
        await asyncio.gather(*running, *late, return_exceptions=True)


def _report(task: asyncio.Task[list[FollowupView]]) -> None:
    """A follow-up failure is recorded on its event; this notes what stopped the whole drain
    (it stays pending and runs again when a process claims it)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("follow-ups stopped (%s); they stay pending", error_kind(exc))
