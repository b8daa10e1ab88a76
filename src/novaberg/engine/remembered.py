"""A statement the user asks Nova to remember outside a conversation (MCP's ``remember``):
stored as their short-term item exactly as a salient turn's summary is, with the same memory
jobs (consolidation, timeline, profile) and the same forget.

The statement is recorded as a finished turn of origin ``remember`` in the user's latest
conversation (a new one when they have none), with no message: the timeline job reads the
words and their time from the turn, forget erases them there, and no conversation's history
shows it (history is made of messages). The turn's trace names where it came from
(``{"origin": "remember", "via": "MCP, <client>"}``). Salience is not asked: the user said
to remember it, so it is stored at importance :data:`IMPORTANCE`. The same statement again
(up to case and spacing) while its item is current is not stored twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from novaberg.config import Memory
from novaberg.engine.turn_store import remember as remember_item
from novaberg.errors import UsageError
from novaberg.graph.channels import MemoryPlan
from novaberg.jobs.events import EventQueue
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.text import MEMORY_TEXT_LIMIT
from novaberg.storage.turns import stored_done
from novaberg.text import is_blank
from novaberg.trace_document import TraceDocument

ORIGIN = "remember"
IMPORTANCE = 1.0
"""What the user asked to be remembered matters to them: the highest importance."""


@dataclass(frozen=True)
class Remembered:
    id: int
    """The short-term item (``memory show ID``)."""
    created: bool
    """False: a current item said this already, and ``id`` is that item."""
    turn_id: int | None = None
    """The turn that records the statement; ``None`` when nothing new was stored."""


def checked_statement(text: str) -> str:
    """The statement, stripped, or a :class:`UsageError` that says what is wrong."""
    stripped = text.strip()
    if is_blank(stripped):
        raise UsageError("There is nothing to remember: the text is empty.")
    if "\x00" in stripped:
        raise UsageError("The text contains a NUL byte; send plain text.")
    if len(stripped) > MEMORY_TEXT_LIMIT:
        raise UsageError(
            f"The text has {len(stripped)} characters; a memory holds {MEMORY_TEXT_LIMIT} at "
            "most. Remember it in shorter statements."
        )
    return stripped


def remember_statement(
    db: Database, events: EventQueue, memory: Memory, user: str, text: str, via: str
) -> Remembered:
    """Store ``text`` as ``user``'s own statement (sync: run it in the database's workers).
    ``via``: where it came from, for the trace (``MCP, Claude Desktop``)."""
    statement = checked_statement(text)
    kept = MemoryStore(db).current_saying(user, "short_term", statement)
    if kept is not None:
        return Remembered(kept, False)
    conversation = db.latest_conversation(user) or db.new_conversation(user)
    trace = TraceDocument(origin=ORIGIN, via=via).text()
    with db.transaction() as c:
        turn_id = stored_done(c, conversation, ORIGIN, statement, trace)
        item = MemoryPlan(text=statement, score=IMPORTANCE)
        memory_id, _ = remember_item(c, events, memory, user, item, turn_id, None, conversation)
    return Remembered(memory_id, True, turn_id)
