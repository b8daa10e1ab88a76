"""A turn's stored trace (``turns.trace_json``) as one model: what each stage decided and who
answered, written once when the turn is stored and read by the Why panel, ``GET
/api/turns/{id}``, ``novaberg stats``, the server's ``/metrics`` and the forget cascade.

What retrieval and the thinker drew on is held by ids and reasons, never by the texts of the
memories or messages given: ``forget`` finds a later turn that drew on a forgotten one by its
ids. The rest is what the turn's own stages said (the router's reading, salience's summary,
the judges' reasons, the draft), erased with the turn's words when they are forgotten
(:mod:`novaberg.storage.forgetting`). :meth:`TraceDocument.text` writes the JSON the
trace always had: a part a stage did not fill is left out as before (a vote that did not abstain
has no ``abstained``), and ``json.dumps``' separators are kept, which the forget cascade's
cheap ``LIKE '%"id": 7%'`` filter relies on. :meth:`TraceDocument.read` reads any stored trace,
older ones included (what a part lacks takes its default); one that is not a trace at all reads
as an empty one.
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "CorrectedTrace",
    "CorrectionAsked",
    "CorrectorTrace",
    "CourtTrace",
    "GivenTrace",
    "ReminderAsked",
    "ReminderTrace",
    "RouteTrace",
    "SalienceTrace",
    "ThinkerTrace",
    "TraceDocument",
    "VoteTrace",
]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class CorrectionAsked(_Part):
    """What the router read as a correction or retraction in the message."""

    kind: str
    wrong: str
    right: str | None = None


class ReminderAsked(_Part):
    """What the router read as a reminder asked for."""

    what: str
    when: str


class RouteTrace(_Part):
    """The router's reading of the message."""

    intent: str = ""
    tone: str = ""
    needs_check: bool = False
    correction: CorrectionAsked | None = None
    reminder: ReminderAsked | None = None
    default: bool = False
    """The safe default route: the router's answer was unusable or its call failed."""


class GivenTrace(_Part):
    """A memory item (``id``) or a stored message (``message_id``) retrieval gave the
    responder, or ``memory_search`` showed the thinker."""

    id: int | None = None
    message_id: int | None = None
    score: float | None = None
    tokens: int = 0
    reason: str = ""


class CorrectedTrace(_Part):
    """What a correction the user made was about: ids only."""

    outcome: str
    """correct, retract, unmatched or ambiguous."""
    memory_id: int | None = None


class ReminderTrace(BaseModel):
    """A reminder asked for: when, and the scheduled message's id (no words of the user's).
    Not frozen: ``event_id`` is set in the turn's transaction, once it is scheduled."""

    model_config = ConfigDict(extra="ignore", validate_assignment=True)
    outcome: str
    """scheduled, unresolved or off."""
    due_at: str | None = None
    repeat: str | None = None
    event_id: int | None = None


class SalienceTrace(_Part):
    score: float | None = None
    summary: str = ""
    malformed: bool = False
    failed: bool = False


class ThinkerTrace(_Part):
    iterations: int = 0
    followup_calls: int = 0
    result: str = ""
    """ok, revised, max_iterations, unresolved, last_resort or failed."""
    tools: list[str] = []
    recalled: list[GivenTrace] = []


class VoteTrace(_Part):
    judge: str
    vote: str = "ok"
    """ok, revise or abstained."""
    reason: str = ""
    malformed: bool = False
    abstained: bool = False


class CourtTrace(_Part):
    rounds: int = 0
    votes: list[VoteTrace] = Field(default=[], description="The last round's, one per judge.")
    history: list[list[VoteTrace]] = Field(default=[], description="Every round's votes.")
    correcting: bool = False

    def every_round(self) -> list[list[VoteTrace]]:
        """Every round's votes; a trace from before the history was kept has its last."""
        return self.history or ([self.votes] if self.votes else [])


class CorrectorTrace(_Part):
    rounds: int = 0
    reasons: list[str] = []
    applied: bool = False
    failed: bool = False


class TraceDocument(_Part):
    """One turn's stored trace. A statement remembered without a turn (MCP's ``remember``)
    stores only ``origin`` and ``via``; a forgotten turn only ``forgotten``."""

    nodes: list[str] = []
    router: RouteTrace | None = None
    retrieval: list[GivenTrace] = []
    correction: CorrectedTrace | None = None
    reminder: ReminderTrace | None = None
    salience: SalienceTrace | None = None
    thinker: ThinkerTrace | None = None
    tribunal: CourtTrace | None = None
    corrector: CorrectorTrace | None = None
    draft: str | None = None
    """The responder's draft when the answer is another; ``None`` when the reply is it."""
    answered_by: str | None = None
    notices: list[str] = []
    call_sent_ms: list[float | None] = []
    """When each call (in the order of the turn's calls) was sent, ms after its first node."""
    origin: str | None = None
    via: str | None = None
    forgotten: bool = False
    """The turn's words were forgotten (``memory forget``): its trace is this flag alone."""

    def given(self) -> list[GivenTrace]:
        """What the turn drew on: retrieval's choice and what the thinker recalled."""
        return [*self.retrieval, *(self.thinker.recalled if self.thinker else [])]

    def text(self) -> str:
        """The stored JSON: the parts that were set, in ``json.dumps``' spelling."""
        return json.dumps(self.model_dump(mode="json", exclude_unset=True), ensure_ascii=False)

    @classmethod
    def read(cls, text: str | None) -> TraceDocument:
        """A stored trace; an empty one for none, or for text that is not a trace. A part that
        does not read (written by hand, or by a version that spelled it otherwise) is left out,
        the others are kept."""
        if not text:
            return cls()
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            pass
        try:
            raw = json.loads(text)
        except ValueError:
            return cls()
        if not isinstance(raw, dict):
            return cls()
        kept = {}
        for name, value in raw.items():
            if name in cls.model_fields:
                try:
                    cls.model_validate({name: value})
                except ValidationError:
                    continue
                kept[name] = value
        return cls.model_validate(kept)
