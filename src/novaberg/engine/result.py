"""A finished turn, and the contract JSON ``novaberg ask --json`` prints from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from novaberg.engine.contract import FollowupView, TurnContract, live_parts, turn_contract
from novaberg.graph.state import TurnState
from novaberg.storage.events import EventState
from novaberg.telemetry import Trace


@dataclass
class TurnResult:
    reply: str
    turn_id: int
    conversation_id: int
    state: TurnState
    trace: Trace
    memory_id: int | None
    followups: list[FollowupView] = field(default_factory=list)
    """The second passes' replies this response delivers (each its own stored turn)."""
    events: list[EventState] = field(default_factory=list)
    """The events the turn scheduled, read once it is stored (the server's turn routes)."""

    def contract(self) -> TurnContract:
        """The turn as ``novaberg ask --json`` prints it (../shared/DESIGN.md, interface
        contract), built as a stored turn's is (:func:`~novaberg.engine.contract.turn_contract`)."""
        return turn_contract(
            reply=self.reply,
            turn_id=self.turn_id,
            conversation_id=self.conversation_id,
            followups=self.followups,
            calls=self.trace.calls,
            parts=live_parts(self.state),
            stored=self.memory_id is not None,
            events=self.events,
        )

    def contract_json(self) -> dict[str, Any]:
        """:meth:`contract` as JSON-ready data."""
        return self.contract().model_dump(mode="json")
