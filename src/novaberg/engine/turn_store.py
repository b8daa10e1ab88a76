"""Turn storage: whose conversation a turn goes into, and what a finished turn stores in one
transaction (its messages, trace, call records, the short-term memory item and its jobs).

Every function takes the user explicitly: nothing here reads ``settings.user``.
"""

from __future__ import annotations

import logging

from novaberg.config import Memory
from novaberg.engine.contract import live_parts
from novaberg.engine.result import TurnResult
from novaberg.errors import UsageError
from novaberg.graph.channels import Context, MemoryPlan, ReminderPlan
from novaberg.graph.state import TurnState
from novaberg.jobs import user_events
from novaberg.jobs.events import EventQueue
from novaberg.memory import corrections
from novaberg.memory.job_policy import enqueue_memory_jobs
from novaberg.memory.store import MemoryStore, turn_item_key
from novaberg.proactive import reminders
from novaberg.proactive.due import Due, record, withheld
from novaberg.proactive.schedule import schedule
from novaberg.storage.db import Database
from novaberg.storage.events import states_of_turn
from novaberg.storage.sql import Connection
from novaberg.storage.turns import replace_replies
from novaberg.telemetry import Trace
from novaberg.trace_document import TraceDocument

log = logging.getLogger("novaberg")


def open_conversation(db: Database, user: str, conversation_id: int | None) -> int:
    """A new conversation of ``user``, or ``conversation_id`` when it is theirs."""
    if conversation_id is None:
        return db.new_conversation(user)
    owner = db.conversation_user(conversation_id)
    if owner is None:
        raise UsageError(f"There is no conversation {conversation_id}.")
    if owner != user:
        raise UsageError(
            f"Conversation {conversation_id} belongs to another user; "
            "choose one of yours or start a new one."
        )
    return conversation_id


def begin_turn(
    db: Database,
    user: str,
    conversation_id: int | None,
    message: str,
    origin: str,
    parent_turn_id: int | None,
) -> tuple[int, int]:
    """The conversation a turn is in (:func:`open_conversation`) and the turn's row, recorded
    as running: (conversation, turn). One hand-over to a database thread, not two; a new
    conversation and its first turn in one transaction."""
    if conversation_id is None:
        return db.start_turn_in_new_conversation(user, message, origin, parent_turn_id)
    conversation = open_conversation(db, user, conversation_id)
    return conversation, db.start_turn(conversation, message, origin, parent_turn_id)


def trace_document(final: TurnState, trace: Trace) -> TraceDocument:
    """The turn's stored trace: what each stage decided, and who answered. Every part is set,
    ``None`` or empty when its stage did not run."""
    context = final.get("context") or Context()
    parts = live_parts(final)
    return TraceDocument(
        nodes=trace.nodes,
        router=route.view() if (route := final.get("router")) is not None else None,
        retrieval=[chosen.view() for chosen in context.retrieval],
        # what a correction the user made was about (ids only: the texts may be forgotten)
        correction=found.trace() if (found := context.correction) is not None else None,
        # a reminder asked for: when, and the scheduled message's id (no words of the user's)
        reminder=reminders.trace(asked) if (asked := context.reminder) is not None else None,
        salience=parts.salience,  # as the contract reads them
        thinker=parts.thinker,
        tribunal=parts.tribunal,
        corrector=parts.corrector,
        # the responder's draft when the answer is another (revised, corrected, with a
        # gesture); ``None`` when the reply is the draft, which is stored once, as the reply
        draft=draft if (draft := final.get("draft")) != final.get("reply") else None,
        answered_by=trace.answered_by(),
        notices=trace.notices,
        # when each call (in the order of ``calls``) was sent, ms after the turn's first node:
        # the time axis of the web page's waterfall (numbers only, no text)
        call_sent_ms=[
            round((c.started - trace.node_started[0]) * 1000, 1) if trace.node_started else None
            for c in trace.calls
        ],
    )


def store_turn(
    db: Database,
    events: EventQueue,
    memory: Memory,
    user: str,
    final: TurnState,
    trace: Trace,
    turn_id: int,
    conversation: int,
    message: str,
    proactive: Due | None = None,
) -> TurnResult:
    """Store a finished turn whole: messages, trace, calls, and (when salience kept it) the
    memory item with its jobs, in one transaction. A proactive turn (``proactive``) stores
    only Nova's message, and none when it is withheld; its event is marked sent or dropped
    in the same transaction, so that a message is sent once or not at all."""
    item = final.get("memory_item")
    context = final.get("context") or Context()
    correction = context.correction
    regenerate = final.get("origin") == "regenerate"
    followup = final.get("origin") == "self_trigger"
    why_not = None if proactive is None else withheld(final)
    if why_not is not None:
        trace.notices.append(f"proactive: not sent, {why_not}")
    asked = context.reminder
    document = trace_document(final, trace)

    def also(c: Connection, message_id: int | None) -> tuple[int, list[int]] | None:
        if proactive is not None:  # sent once, with the message, or dropped with the reason
            status, result = ("dropped", why_not) if why_not else ("sent", f"turn {turn_id}")
            record(c, proactive, status, result)
            if why_not is None:
                user_events.record(c, user, "followup", turn_id)
            return None
        if followup:  # for GET /api/events, committed with the follow-up it reports
            user_events.record(c, user, "followup", turn_id)
        if regenerate:  # the message and its memory are stored already, with the old turn
            replace_replies(c, turn_id)
            return None
        if correction is not None:  # before Nova's next answer, with this turn or not at all
            corrections.apply(c, user, correction, turn_id, message_id)
        if asked is not None and asked.at is not None:  # scheduled with the turn, once
            assert document.reminder is not None  # written with the plan
            document.reminder.event_id = schedule_asked(c, user, asked, turn_id, conversation)
        if item is None:
            return None
        return remember(c, events, memory, user, item, turn_id, message_id, conversation)

    stored = db.finish_turn(
        turn_id,
        conversation_id=conversation,
        user_text=message,
        reply=final["reply"],
        trace=document,
        calls=trace.calls,
        user_message=final.get("origin") not in ("self_trigger", "regenerate", "proactive"),
        assistant_message=why_not is None,
        also=also,
    )
    if followup or (proactive is not None and why_not is None):
        user_events.notify(user)
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
        events=states_of_turn(db, turn_id),  # in the same hand-over as the store
    )


def schedule_asked(
    c: Connection, user: str, asked: ReminderPlan, turn_id: int, conversation: int
) -> int:
    """The reminder the turn's message asked for (planned with its time), inside the turn's
    transaction ``c``."""
    assert asked.at is not None, "planned as scheduled"
    return schedule(
        c,
        user,
        asked.what,
        asked.at,
        cause=f"asked in turn {turn_id}",
        cause_key=f"reminder:turn:{turn_id}",
        turn_id=turn_id,
        conversation=conversation,
    )


def remember(
    c: Connection,
    events: EventQueue,
    memory: Memory,
    user: str,
    item: MemoryPlan,
    turn_id: int,
    message_id: int | None,
    conversation: int,
) -> tuple[int, list[int]]:
    """The short-term item and its background jobs, inside the turn's transaction ``c``; an
    item that was already stored (the same turn again) gets no second set of jobs."""
    added = MemoryStore.add(
        c,
        user,
        "short_term",
        item.text,
        item.score,
        turn_item_key(turn_id),
        source_turn_id=turn_id,
        source_message_id=message_id,
    )
    if not added.created:
        return added.id, []
    return added.id, enqueue_memory_jobs(c, events, memory, user, added.id, turn_id, conversation)
