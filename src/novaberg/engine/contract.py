"""The object ``novaberg ask --json`` prints, ``POST /api/turns`` answers and ``GET
/api/turns/{id}`` gives back (``../shared/DESIGN.md``, interface contract), as one model.

:func:`turn_contract` is the one place it is built: from a live turn
(:meth:`~novaberg.engine.result.TurnResult.contract`) and from its stored rows
(:mod:`novaberg.engine.stored_turns`) alike, so the two cannot drift apart. Every key is always
there; a part that did not run is ``null``. A call's record carries the contract's keys and a
few compatible extras (its queue wait, the server's own time, the attempt, …).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.state import TurnState
from novaberg.storage.events import EventState
from novaberg.telemetry import CallRecord, JsonMode, Outcome
from novaberg.trace_document import CorrectorTrace, CourtTrace, TraceDocument


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CallView(_Part):
    """One request sent to one backend (retries are calls of their own)."""

    caller: str = Field(description="Who asked: router, responder, judge_<name>, a job's name, ….")
    backend: str
    model: str
    think: bool = Field(description="Whether the request asked the model to think.")
    content_len: int
    thinking_len: int
    eval_count: int
    prompt_eval_count: int
    tool_calls: int
    outcome: Outcome
    ms: float = Field(description="Wall time of the request, rounded to 0.1 ms.")
    queue_wait_ms: float
    backend_ms: float = Field(description="The server's own account of the call; 0 if unknown.")
    attempt: int
    error: str
    normalizer: str
    json_mode: JsonMode
    host: str

    @classmethod
    def of(cls, record: CallRecord) -> CallView:
        return cls(
            caller=record.caller,
            backend=record.backend,
            model=record.model,
            think=record.think,
            content_len=record.content_len,
            thinking_len=record.thinking_len,
            eval_count=record.eval_count,
            prompt_eval_count=record.prompt_eval_count,
            tool_calls=record.tool_calls,
            outcome=record.outcome,
            ms=round(record.ms, 1),
            queue_wait_ms=round(record.queue_wait_ms, 1),
            backend_ms=round(record.backend_ms, 1),
            attempt=record.attempt,
            error=record.error,
            normalizer=record.normalizer,
            json_mode=record.json_mode,
            host=record.host,
        )


class FollowupView(_Part):
    reply: str
    origin: str = Field(description="self_trigger: the second pass's message.")
    turn_id: int


class RecalledItem(_Part):
    id: int = Field(description="A memory item memory_search showed the thinker.")


class RecalledMessage(_Part):
    message_id: int = Field(description="A stored message memory_search showed the thinker.")


class ThinkerView(_Part):
    iterations: int
    followup_calls: int
    result: str = Field(description="ok, revised, max_iterations, unresolved, last_resort, failed.")
    tools: list[str] = []
    recalled: list[RecalledItem | RecalledMessage] = []


class VoteView(_Part):
    judge: str
    vote: Literal["ok", "revise", "abstained"]
    reason: str
    malformed: bool = Field(description="The judge's answer was unusable; read as ok.")
    abstained: bool = Field(default=False, description="The judge failed and did not vote.")


class TribunalView(_Part):
    rounds: int = Field(description="Voting rounds: 1 when every judge says ok at once.")
    votes: list[VoteView] = Field(description="The last round's, one per judge.")
    corrections: int


class SalienceView(_Part):
    score: float | None
    stored: bool = Field(description="Whether the turn became a memory item (and still is one).")


class EventView(_Part):
    id: int
    type: str
    status: str


class TurnContract(_Part):
    """One finished turn."""

    reply: str
    turn_id: int
    conversation_id: int
    followups: list[FollowupView]
    calls: list[CallView] = Field(description="One record per request sent, retries included.")
    thinker: ThinkerView | None
    tribunal: TribunalView | None
    salience: SalienceView | None
    events: list[EventView]


def turn_contract(
    *,
    reply: str,
    turn_id: int,
    conversation_id: int,
    followups: Iterable[FollowupView],
    calls: Iterable[CallRecord],
    parts: TraceDocument,
    stored: bool,
    events: Iterable[EventState],
) -> TurnContract:
    """The contract of a turn from its pieces: ``parts`` holds the turn's ``thinker``,
    ``tribunal``, ``corrector`` and ``salience`` records (:func:`live_parts` of a live turn,
    or its stored trace), ``stored`` whether its memory item exists."""
    thinker, court, scored = parts.thinker, parts.tribunal, parts.salience
    return TurnContract(
        reply=reply,
        turn_id=turn_id,
        conversation_id=conversation_id,
        followups=list(followups),
        calls=[CallView.of(c) for c in calls],
        thinker=None
        if thinker is None
        else ThinkerView.model_validate(thinker.model_dump(exclude_unset=True)),
        tribunal=None if court is None else _tribunal(court, parts.corrector),
        salience=None if scored is None else SalienceView(score=scored.score, stored=stored),
        events=[EventView(id=e.id, type=e.type, status=e.status) for e in events],
    )


def live_parts(state: TurnState) -> TraceDocument:
    """The parts of a live turn's state the contract reads, as its stored trace keeps them."""
    return TraceDocument(
        salience=scored.view() if (scored := state.get("salience")) is not None else None,
        thinker=ran.view() if (ran := state.get("thinker")) is not None else None,
        tribunal=court.view() if (court := state.get("tribunal")) is not None else None,
        corrector=fixed.view() if (fixed := state.get("corrector")) is not None else None,
    )


def _tribunal(court: CourtTrace, corrector: CorrectorTrace | None) -> TribunalView:
    return TribunalView(
        rounds=court.rounds,
        votes=[VoteView.model_validate(v.model_dump()) for v in court.votes],
        corrections=corrector.rounds if corrector is not None else 0,
    )
