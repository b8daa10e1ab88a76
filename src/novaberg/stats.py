"""How often each defence fired: figures over the recorded calls, turns and events.

One code path for SQLite and PostgreSQL: plain SQL (:mod:`novaberg.storage.stats`) fetches the
rows of the window (``--since``), and the figures are computed here in Python —
counts, outcome counts, and latency percentiles by linear interpolation between the closest
ranks (the same definition as PostgreSQL's ``percentile_cont``).

Sources, and what survives ``memory forget``:

- ``llm_calls``: one row per request sent (retries included): per caller and backend the count,
  p50/p95 of ``duration_ms`` and the outcomes; follow-up calls are the requests of caller
  ``thinker_nachfass`` (first attempts). Forget keeps these rows (it erases their errors only).
- ``turns``: turns by status (window on ``started_at``); their traces give the thinker's results
  and the tribunal's votes (corrections per judge). Forget erases a turn's trace, so a forgotten
  turn counts in ``turns`` but not in ``thinker`` or ``corrections``.
- ``events``: last resorts are the self-trigger events (one per last resort, by the status of
  their second pass); background jobs by type and status. Forget keeps these rows.

The shape of :meth:`Stats.contract_json` is the interface contract's (``../shared/DESIGN.md``,
"Probe and stats contract"): ``calls`` and ``turns``, plus compatible extra keys.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from novaberg.errors import UsageError
from novaberg.storage import stats as stored
from novaberg.storage.db import Database
from novaberg.storage.proactive import TYPE as PROACTIVE
from novaberg.telemetry import OUTCOMES
from novaberg.text import quoted
from novaberg.trace_document import TraceDocument

FOLLOW_UP_CALLER = "thinker_nachfass"
SELF_TRIGGER = "self_trigger"
_SINCE = re.compile(r"^\s*(\d{1,6})\s*([dhm])\s*$")
_UNITS = {"d": "days", "h": "hours", "m": "minutes"}


def parse_since(text: str) -> timedelta:
    """``7d``, ``24h`` or ``30m`` as a span of time; anything else is a usage error."""
    match = _SINCE.match(text)
    if match is None or int(match.group(1)) == 0:
        raise UsageError(
            f"--since takes a positive number of days, hours or minutes, like 7d, 24h or 30m "
            f"(got {quoted(text)})."
        )
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def percentile(ordered: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ascending values, interpolated linearly between the
    closest ranks (PostgreSQL's ``percentile_cont``); 0.0 for no values."""
    if not ordered:
        return 0.0
    rank = (len(ordered) - 1) * q
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class CallStats:
    """The requests of one caller on one backend."""

    caller: str
    backend: str
    durations: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return len(self.durations)

    def view(self) -> dict[str, Any]:
        ordered = sorted(self.durations)
        outcomes = {o: self.outcomes.get(o, 0) for o in OUTCOMES}
        outcomes.update({o: n for o, n in self.outcomes.items() if o not in outcomes})
        return {
            "caller": self.caller,
            "backend": self.backend,
            "count": self.count,
            "p50_ms": round(percentile(ordered, 0.5), 1),
            "p95_ms": round(percentile(ordered, 0.95), 1),
            "outcomes": outcomes,
        }


@dataclass
class JudgeStats:
    """One judge's votes over the window's stored tribunal histories."""

    votes: int = 0
    revise: int = 0
    corrections: int = 0
    """Revise votes that sent the answer to the corrector."""
    abstained: int = 0
    malformed: int = 0

    def view(self) -> dict[str, int]:
        return {
            "votes": self.votes,
            "revise": self.revise,
            "corrections": self.corrections,
            "abstained": self.abstained,
            "malformed": self.malformed,
        }


@dataclass
class Stats:
    since: datetime
    user: str | None
    calls: list[CallStats]
    turns: dict[str, int]
    followup_calls: int
    followup_turns: int
    last_resorts: dict[str, int]
    """Self-trigger events by status (one per last resort)."""
    thinker: dict[str, int]
    corrections: dict[str, JudgeStats]
    jobs: dict[str, dict[str, int]]
    proactive: dict[str, int]
    """Proactive messages by status (``pending``/``running`` counted as ``scheduled``)."""
    dropped: dict[str, int]
    """Why proactive messages were dropped, by reason kind (:func:`reason_kind`)."""
    older_records: bool
    """Whether the database holds records older than the window (for the empty message)."""

    @property
    def empty(self) -> bool:
        return (
            not self.calls
            and not self.turns
            and not self.jobs
            and not self.last_resorts
            and not self.proactive
        )

    def contract_json(self) -> dict[str, Any]:
        return {
            "calls": [c.view() for c in self.calls],
            "turns": dict(self.turns),
            "since": self.since.isoformat(timespec="seconds"),
            "user": self.user,
            "followup_calls": {"calls": self.followup_calls, "turns": self.followup_turns},
            "last_resorts": {
                "count": sum(self.last_resorts.values()),
                "second_passes": dict(self.last_resorts),
            },
            "thinker": dict(self.thinker),
            "corrections": {judge: s.view() for judge, s in self.corrections.items()},
            "jobs": {kind: dict(by) for kind, by in self.jobs.items()},
            "proactive": {**self.proactive, "dropped_why": dict(self.dropped)},
        }


def collect(db: Database, window: timedelta, user: str | None = None) -> Stats:
    """The figures of the last ``window`` (all users' when ``user`` is None)."""
    try:
        since = datetime.now(UTC) - window
    except OverflowError:  # --since 999999d: since the beginning
        since = datetime(1, 1, 1, tzinfo=UTC)
    cutoff = since.isoformat(timespec="milliseconds")
    calls, followups, followup_turns = _calls(db, cutoff, user)
    turns, thinker, corrections = _turns(db, cutoff, user)
    last_resorts, jobs, proactive = _events(db, cutoff, user)
    dropped = _dropped(db, cutoff, user)
    stats = Stats(
        since=since,
        user=user,
        calls=calls,
        turns=turns,
        followup_calls=followups,
        followup_turns=followup_turns,
        last_resorts=last_resorts,
        thinker=thinker,
        corrections=corrections,
        jobs=jobs,
        proactive=proactive,
        dropped=dropped,
        older_records=False,
    )
    if stats.empty:
        stats.older_records = stored.recorded_before(db, cutoff, user)
    return stats


def _calls(db: Database, cutoff: str, user: str | None) -> tuple[list[CallStats], int, int]:
    groups: dict[tuple[str, str], CallStats] = {}
    followups = 0
    followup_turns: set[int] = set()
    for row in stored.calls_since(db, cutoff, user):
        key = (row.caller, row.backend)
        group = groups.get(key)
        if group is None:
            group = groups[key] = CallStats(*key)
        group.durations.append(row.duration_ms)
        group.outcomes[row.outcome] += 1
        if key[0] == FOLLOW_UP_CALLER and row.attempt == 1:
            followups += 1
            if row.turn_id is not None:
                followup_turns.add(row.turn_id)
    ordered = [groups[k] for k in sorted(groups)]
    return ordered, followups, len(followup_turns)


def _turns(
    db: Database, cutoff: str, user: str | None
) -> tuple[dict[str, int], dict[str, int], dict[str, JudgeStats]]:
    turns = stored.turn_counts(db, cutoff, user)
    thinker: Counter[str] = Counter()
    judges: dict[str, JudgeStats] = defaultdict(JudgeStats)
    for text in stored.done_traces(db, cutoff, user):
        trace = TraceDocument.read(text)
        if trace.thinker is not None and trace.thinker.result:
            thinker[trace.thinker.result] += 1
        count_votes(trace, judges)
    return turns, dict(sorted(thinker.items())), dict(sorted(judges.items()))


def count_votes(trace: TraceDocument, judges: dict[str, JudgeStats]) -> None:
    """Every round of a turn's tribunal; a round is followed by a correction when the corrector
    ran after it (``corrector.rounds`` counts those runs)."""
    court = trace.tribunal
    if court is None:
        return
    corrected = trace.corrector.rounds if trace.corrector is not None else 0
    for index, round_ in enumerate(court.history):
        for vote in round_:
            judge = judges[vote.judge]
            if vote.abstained:
                judge.abstained += 1
                continue
            judge.votes += 1
            judge.malformed += vote.malformed
            if vote.vote == "revise":
                judge.revise += 1
                judge.corrections += index < corrected


def _events(
    db: Database, cutoff: str, user: str | None
) -> tuple[dict[str, int], dict[str, dict[str, int]], dict[str, int]]:
    last_resorts: dict[str, int] = {}
    jobs: dict[str, dict[str, int]] = {}
    proactive: dict[str, int] = {}
    for row in stored.event_counts(db, cutoff, user):
        kind, status, n = row.type, row.status, row.n
        if kind == SELF_TRIGGER:
            last_resorts[status] = n
        elif kind == PROACTIVE:
            shown = "scheduled" if status in ("pending", "running") else status
            proactive[shown] = proactive.get(shown, 0) + n
        else:
            jobs.setdefault(kind, {})[status] = n
    return last_resorts, jobs, proactive


DROPPED = (
    ("nothing worth saying", "nothing_to_say"),
    ("a judge", "judge_revise"),
    ("max_late_h", "too_late"),
    ("max_per_day", "daily_cap"),
    ("are off", "switched_off"),
    ("turn failed", "turn_failed"),
    ("no longer on the timeline", "cause_gone"),
    ("no longer in the adaptive profile", "cause_gone"),
)


def reason_kind(result: str) -> str:
    """A dropped message's reason as a kind (the reasons carry numbers: hours, counts)."""
    return next((kind for words, kind in DROPPED if words in result), "other")


def _dropped(db: Database, cutoff: str, user: str | None) -> dict[str, int]:
    found: dict[str, int] = {}
    for result in stored.dropped_results(db, cutoff, user):
        kind = reason_kind(result)
        found[kind] = found.get(kind, 0) + 1
    return found
