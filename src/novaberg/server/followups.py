"""A server turn and its self-triggered follow-ups, as one task that outlives the request.

The CLI waits for a turn's follow-ups (``Engine.run_turn`` drains them). The server answers
first: :func:`start` runs the turn, then its second passes (``Engine.drain_self_triggers``)
in one task kept in ``app.state.turns``, so a client that disconnects, or a response that
stops waiting, leaves both to finish and be stored. A response waits at most
``server.followup_wait_s`` after the answer (:func:`ready_followups`); what is ready then is
delivered in it and marked so (:mod:`novaberg.deliveries`); what is not arrives on
``GET /api/events`` and, for ``/v1``, at the start of the conversation's next response.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from novaberg import deliveries
from novaberg.engine import Engine, TurnResult
from novaberg.errors import error_kind
from novaberg.nodes.context import ProgressCallback

log = logging.getLogger("novaberg.server")


@dataclass
class RunningTurn:
    answer: asyncio.Future[TurnResult]
    """The stored turn (its follow-ups not waited for), or why it failed; await it through
    :func:`answer_of` (a cancelled request must not cancel it)."""
    whole: asyncio.Task[list[dict[str, Any]]]
    """The turn, then its follow-ups: their entries as in ``TurnResult.followups``."""


def start(
    engine: Engine,
    running: set[asyncio.Task[Any]],
    message: str,
    user: str,
    conversation: int,
    *,
    on_start: Callable[[int], None] | None = None,
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> RunningTurn:
    """Start the turn and, once it is stored, its follow-ups; the task stays in ``running``
    until both are done (the app cancels what is left when it stops). ``options``: more
    arguments of ``Engine.run_turn`` (``regenerate``)."""
    answer: asyncio.Future[TurnResult] = asyncio.get_running_loop().create_future()

    async def whole() -> list[dict[str, Any]]:
        try:
            result = await engine.run_turn(
                message,
                conversation_id=conversation,
                user=user,
                on_start=on_start,
                on_progress=on_progress,
                drain_followups=False,
                **options,
            )
        except asyncio.CancelledError:
            answer.cancel()
            raise
        except BaseException as exc:
            if not answer.done():
                answer.set_exception(exc)
            return []
        if not answer.done():
            answer.set_result(result)
        engine.start_background()  # the turn's memory jobs, in this process's loop
        return await engine.drain_self_triggers(result.turn_id, user, conversation)

    answer.add_done_callback(_retrieve)
    task = asyncio.create_task(whole())
    running.add(task)
    task.add_done_callback(running.discard)
    task.add_done_callback(_report)
    return RunningTurn(answer, task)


def _retrieve(answer: asyncio.Future[TurnResult]) -> None:
    """A failed turn whose request has gone: its failure is stored with the turn already."""
    if not answer.cancelled():
        answer.exception()


def _report(task: asyncio.Task[list[dict[str, Any]]]) -> None:
    """A follow-up failure is recorded on its event; this notes what stopped the whole
    drain (it stays pending and runs again when a process claims it)."""
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.error("follow-ups stopped (%s); they stay pending", error_kind(exc))


async def answer_of(turn: RunningTurn) -> TurnResult:
    """The stored turn; a request cancelled while it waits leaves the turn running."""
    return await asyncio.shield(turn.answer)


async def ready_followups(turn: RunningTurn, wait_s: float) -> list[dict[str, Any]]:
    """The follow-ups ready within ``wait_s`` (none when the drain failed)."""
    done, _ = await asyncio.wait({turn.whole}, timeout=wait_s)
    if not done or turn.whole.cancelled() or turn.whole.exception() is not None:
        return []
    return turn.whole.result()


async def deliver(
    engine: Engine, followups: list[dict[str, Any]], channel: deliveries.Channel
) -> list[dict[str, Any]]:
    """Those of ``followups`` this response delivers (claimed, so no response repeats one)."""
    db = engine.db
    ids = [int(f["turn_id"]) for f in followups]
    claimed = set(await db.run(deliveries.mark_delivered, db, ids, channel))
    return [f for f in followups if int(f["turn_id"]) in claimed]


async def waiting_for(
    engine: Engine, conversation: int, *, before_turn: int | None = None
) -> list[deliveries.Followup]:
    """The conversation's follow-ups that no response has delivered (they were not ready in
    time), claimed for a ``/v1`` response that shows them first; ``before_turn``: only
    follow-ups of turns before it (one of the response's own turn comes after its answer)."""
    db = engine.db
    return await db.run(
        deliveries.claim_waiting, db, conversation, "openai", before_turn=before_turn
    )
