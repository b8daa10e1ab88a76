"""The typed turn-state channels: what the router, the enricher, the thinker, the tribunal, the
corrector, salience and memory write decide, and the events a turn raises, each one frozen model
(issue 24).
:func:`~novaberg.graph.state.check_writes` refuses a value of another type, so a node that
writes the wrong shape stops the turn at once, and mypy checks every read.

Each model's :meth:`view` is what the turn's stored trace keeps of it, a part of
:class:`~novaberg.trace_document.TraceDocument` (the keys it always had).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.backends.base import ChatMessage
from novaberg.proactive.when import When
from novaberg.trace_document import (
    CorrectedTrace,
    CorrectionAsked,
    CorrectorTrace,
    CourtTrace,
    GivenTrace,
    ReminderAsked,
    RouteTrace,
    SalienceTrace,
    ThinkerTrace,
    VoteTrace,
)


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


CorrectionOutcome = Literal["correct", "retract", "unmatched", "ambiguous"]


@dataclass(frozen=True, slots=True)
class Resolved:
    """What a correction the user made is about (:func:`novaberg.memory.corrections.resolve`),
    applied with the turn."""

    outcome: CorrectionOutcome
    wrong: str
    memory_id: int | None = None
    old: str | None = None
    new: str | None = None
    options: tuple[str, ...] = ()
    """The texts of the candidates, when ambiguous."""

    def trace(self) -> CorrectedTrace:
        """For the turn's trace: ids only (the texts are the user's and may be forgotten)."""
        return CorrectedTrace(outcome=self.outcome, memory_id=self.memory_id)


@dataclass(frozen=True, slots=True)
class ReminderPlan:
    """What the turn does with a reminder asked for (:func:`novaberg.proactive.reminders.plan`):
    scheduled with the turn, unresolved (its ``when`` could not be read), or off."""

    outcome: Literal["scheduled", "unresolved", "off"]
    what: str
    when: str
    at: When | None = None
    """When scheduled: when it is due (and whether it repeats)."""


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

    def view(self) -> RouteTrace:
        asked: dict[str, CorrectionAsked | ReminderAsked] = {}  # left out when not asked
        if self.correction is not None:
            asked["correction"] = CorrectionAsked(**self.correction.model_dump())
        if self.reminder is not None:
            asked["reminder"] = ReminderAsked(**self.reminder.model_dump())
        return RouteTrace(
            intent=self.intent,
            tone=self.tone,
            needs_check=self.needs_check,
            default=self.default,
            **asked,
        )


@dataclass(frozen=True, slots=True)
class Salience:
    """How much the user's message matters for remembering them (``salience``)."""

    score: float | None
    """0..1; ``None``: unknown (an unusable answer or a failed call), so nothing is stored."""
    summary: str
    malformed: bool = False
    failed: bool = False

    def view(self) -> SalienceTrace:
        return SalienceTrace(
            score=self.score,
            summary=self.summary,
            **_flags(malformed=self.malformed, failed=self.failed),
        )


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

    def view(self) -> CorrectorTrace:
        return CorrectorTrace(
            rounds=self.rounds,
            reasons=list(self.reasons),
            applied=self.applied,
            **_flags(failed=self.failed),
        )


@dataclass(frozen=True, slots=True)
class ThinkerRun:
    """What the thinker did (``thinker``)."""

    iterations: int
    followup_calls: int
    """Its ``thinker_nachfass`` calls: the answer asked for again when it came back empty."""
    result: str
    """ok, revised, max_iterations, unresolved, last_resort or failed."""
    tools: tuple[str, ...] = ()
    """The tools it called, in order."""
    recalled: tuple[int, ...] = ()
    """The memory items ``memory_search`` showed it (forget erases a turn that drew on one)."""
    recalled_messages: tuple[int, ...] = ()
    """The stored messages ``memory_search`` showed it."""

    def view(self) -> ThinkerTrace:
        return ThinkerTrace(
            iterations=self.iterations,
            followup_calls=self.followup_calls,
            result=self.result,
            tools=list(self.tools),
            recalled=[
                *(GivenTrace(id=i) for i in self.recalled),
                *(GivenTrace(message_id=i) for i in self.recalled_messages),
            ],
        )


@dataclass(frozen=True, slots=True)
class Ballot:
    """One judge's vote in one round."""

    judge: str
    vote: Literal["ok", "revise", "abstained"]
    reason: str
    malformed: bool = False
    """Its answer was unusable: read as ok."""
    abstained: bool = False
    """It failed (in this round or before) and did not vote; the others decide."""

    def view(self) -> VoteTrace:
        return VoteTrace(
            judge=self.judge,
            vote=self.vote,
            reason=self.reason,
            malformed=self.malformed,
            **_flags(abstained=self.abstained),
        )


@dataclass(frozen=True, slots=True)
class Court:
    """The tribunal's rounds (``tribunal``)."""

    rounds: int
    votes: tuple[Ballot, ...]
    """The last round's, one per judge."""
    history: tuple[tuple[Ballot, ...], ...]
    """Every round's votes, oldest first."""
    correcting: bool
    """Whether the corrector runs next."""

    def view(self) -> CourtTrace:
        return CourtTrace(
            rounds=self.rounds,
            votes=[v.view() for v in self.votes],
            history=[[v.view() for v in round_] for round_ in self.history],
            correcting=self.correcting,
        )


@dataclass(frozen=True, slots=True)
class Given:
    """A memory item, or a stored message its words found, given to the responder."""

    text: str
    reason: str
    kind: str
    """The item's kind (short_term, long_term, event), or ``message``."""
    id: int | None = None
    """The memory item's id; ``None`` for a message."""
    message_id: int | None = None
    """The stored message's id; ``None`` for an item."""


@dataclass(frozen=True, slots=True)
class Chosen:
    """What retrieval chose for the turn, as its trace records it (no text: forget leaves the
    trace alone)."""

    tokens: int
    reason: str
    id: int | None = None
    message_id: int | None = None
    score: float | None = None
    """The item's score; a message has none."""

    def view(self) -> GivenTrace:
        if self.id is not None:
            return GivenTrace(id=self.id, score=self.score, tokens=self.tokens, reason=self.reason)
        return GivenTrace(message_id=self.message_id, tokens=self.tokens, reason=self.reason)


@dataclass(frozen=True, slots=True)
class Line:
    """One message of the conversation's recent history."""

    role: str
    content: str

    def message(self) -> ChatMessage:
        """As a chat request carries it."""
        return ChatMessage(role=self.role, content=self.content)


@dataclass(frozen=True, slots=True)
class Dated:
    """An event of the user's timeline around today."""

    date: str
    text: str


@dataclass(frozen=True, slots=True)
class Context:
    """What the enricher gathered for the turn (``context``)."""

    history: tuple[Line, ...] = ()
    """The conversation's recent messages, oldest first."""
    memories: tuple[Given, ...] = ()
    """The items it found, then the stored messages (the budget cuts from the end)."""
    retrieval: tuple[Chosen, ...] = ()
    correction: Resolved | None = None
    """What a correction the user made is about, applied with the turn."""
    reminder: ReminderPlan | None = None
    """What the turn does with a reminder asked for."""
    profile: dict[str, str] | None = None
    """The current profile's parts (core, adaptive) that have statements."""
    timeline: tuple[Dated, ...] = ()


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """An event the turn raised (``events``; appended, never replaced): a self-trigger."""

    type: str
    id: int
    status: str


def _flags(**flags: bool) -> dict[str, bool]:
    """The flags that are set: a trace leaves out one that is not (it always did)."""
    return {name: True for name, on in flags.items() if on}
