"""A finished turn rebuilt from the database in the shape ``novaberg ask --json`` prints, for
``GET /api/turns/{id}``: the same :func:`~novaberg.engine.contract.turn_contract` builds it from
the stored rows (:mod:`novaberg.storage.turns`) as from a live turn.

What the database cannot give back exactly: ``events`` and ``salience.stored`` are as they are
now (a memory job since finished, a memory since forgotten), not as they were when the turn
ended; a call recorded before migration m015 reads ``backend_ms`` 0 and ``json_mode`` ``""``.
A turn whose words were forgotten has no trace left: ``thinker``, ``tribunal`` and ``salience``
read ``null``.

The functions here are sync and query the database: a route runs them through
``await db.run(...)`` (the database's worker threads), never on the event loop.
"""

from __future__ import annotations

from novaberg.engine.contract import FollowupView, TurnContract, turn_contract
from novaberg.memory.store import MemoryStore, turn_item_key
from novaberg.storage import turns
from novaberg.storage.db import Database
from novaberg.storage.events import states_of_turn
from novaberg.storage.turns import OwnedTurn, turn_owner
from novaberg.trace_document import TraceDocument

__all__ = ["stored_turn", "turn_owner"]


def stored_turn(db: Database, row: OwnedTurn) -> TurnContract:
    """The contract of the finished turn ``row`` (from :func:`turn_owner`)."""
    return turn_contract(
        reply=turns.reply_of(db, row.id),
        turn_id=row.id,
        conversation_id=row.conversation_id,
        followups=[
            FollowupView(reply=f.reply, origin="self_trigger", turn_id=f.turn_id)
            for f in turns.followups_of(db, row.id)
        ],
        calls=turns.calls_of(db, row.id),
        parts=TraceDocument.read(row.trace_json),
        stored=MemoryStore.key_id(db, row.user_id, turn_item_key(row.id)) is not None,
        events=states_of_turn(db, row.id),
    )
