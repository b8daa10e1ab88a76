"""The typed turn-state channels: what the router, the corrector, salience and memory write
decide, each one frozen model (issue 24). :func:`~novaberg.graph.state.check_writes` refuses a
value of another type, so a node that writes the wrong shape stops the turn at once, and mypy
checks every read.

The channels of the enricher, the thinker and the tribunal (``context``, ``thinker``,
``tribunal``) and the turn's ``events`` are still plain dicts; their shapes are in
:mod:`novaberg.graph.state`.

Each model's :meth:`view` is what the turn's stored trace keeps of it (JSON, the keys it always
had).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


# The message corrects or retracts something the user said before ("no, Munich, not Berlin":
# ``correct``, wrong "Berlin", right "Munich"; "I don't have the dog any more": ``retract``,
# wrong "dog"). No docstring: it would be the schema's description, sent with every request.
class Correction(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    kind: Literal["correct", "retract"]
    wrong: str = Field(min_length=1, max_length=200)
    right: str | None = Field(None, max_length=200)


# The message asks to be reminded ("remind me tomorrow at 9 to call my mother": what "call my
# mother", when "tomorrow at 9"); novaberg.proactive.when reads ``when``. No docstring: it
# would be the schema's description, sent with every router request.
class Reminder(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)
    what: str = Field(min_length=1, max_length=300)
    when: str = Field(min_length=1, max_length=100)


@dataclass(frozen=True, slots=True)
class Route:
    """The router's reading of the message (``router``)."""

    intent: str
    tone: str
    needs_check: bool
    default: bool
    """The safe default route: the router's answer was unusable or its call failed."""
    correction: Correction | None = None
    """What the message corrects or retracts, kept only when its words are in the message."""
    reminder: Reminder | None = None
    """What the message asks to be reminded of, kept only when its ``when`` is in it."""

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "intent": self.intent,
            "tone": self.tone,
            "needs_check": self.needs_check,
        }
        if self.correction is not None:
            out["correction"] = self.correction.model_dump()
        if self.reminder is not None:
            out["reminder"] = self.reminder.model_dump()
        out["default"] = self.default
        return out


@dataclass(frozen=True, slots=True)
class Salience:
    """How much the user's message matters for remembering them (``salience``)."""

    score: float | None
    """0..1; ``None``: unknown (an unusable answer or a failed call), so nothing is stored."""
    summary: str
    malformed: bool = False
    failed: bool = False

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"score": self.score, "summary": self.summary}
        if self.malformed:
            out["malformed"] = True
        if self.failed:
            out["failed"] = True
        return out


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """The short-term memory the turn will store with it (``memory_item``)."""

    text: str
    score: float


@dataclass(frozen=True, slots=True)
class Correcting:
    """The corrector's rounds so far (``corrector``)."""

    rounds: int
    reasons: tuple[str, ...]
    """The judges' reasons it was given, ``judge: reason``."""
    applied: bool
    """Whether its revision replaced the reply."""
    failed: bool = False

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rounds": self.rounds,
            "reasons": list(self.reasons),
            "applied": self.applied,
        }
        if self.failed:
            out["failed"] = True
        return out
