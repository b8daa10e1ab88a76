"""A finished turn, and the contract JSON ``novaberg ask --json`` prints from it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from novaberg.graph.state import TurnState
from novaberg.telemetry import Trace


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
            "tribunal": tribunal_view(self.state),
            "salience": None
            if scored is None
            else {"score": scored.get("score"), "stored": self.memory_id is not None},
            "events": self.events,
        }


def tribunal_view(state: TurnState) -> dict[str, Any] | None:
    """``tribunal`` of the contract: voting rounds and the last round's votes."""
    court = state.get("tribunal")
    if court is None:
        return None
    corrections = (state.get("corrector") or {}).get("rounds", 0)
    return {"rounds": court["rounds"], "votes": court["votes"], "corrections": corrections}
