"""Background memory jobs, run from the event queue at background priority.

A salient turn stores a short-term item and, in the same transaction, enqueues its jobs:

- ``consolidate``: the item becomes a long-term fact: new, the same as an existing fact (the
  item is linked to it), or an update of one (the old fact is kept with a validity end);
- ``timeline``: dated events in the user's message, the date resolved by ``dateparser``
  against the message's own time ("morgen", "next Friday");
- ``profile_adaptive`` after every salient turn, ``profile_core`` every
  ``memory.core_every`` items: a new profile version whose statements name their sources;
- ``weigh``, for an imported chat's user message only (``import-chats --remember``):
  salience over the message alone; a salient one becomes a short-term item with the jobs
  above, as a turn's would.

Each job's writes, its call records and its ``done``/``failed`` mark land in one transaction,
and every write has an idempotency key, so a job that runs again after a crash changes
nothing twice. A model answer that is malformed, empty or points at memories it was not shown
is recorded as ``failed`` with the reason, never as "nothing to remember".

Nothing here blocks the event loop: every read and write goes through ``await ctx.db.run``
(the database's worker threads), and dateparser, slow on its first call, runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.backends.base import ChatMessage
from novaberg.errors import BackendError, EmbedderError, ModelOutputError, NovabergError
from novaberg.jobs import user_events
from novaberg.memory.embedding import Vectors, choose, embed
from novaberg.memory.job_context import JobContext
from novaberg.memory.job_policy import enqueue_memory_jobs
from novaberg.memory.job_prompts import job_prompts
from novaberg.memory.retrieval import query_terms, vector_index
from novaberg.memory.store import MemoryStore, turn_item_key
from novaberg.prompts.evaluation import Situation
from novaberg.prompts.salience import SalienceOutput, salience_prompt
from novaberg.queue import BACKGROUND, CALL_OWNER
from novaberg.storage import events as stored_events
from novaberg.storage.db import insert_calls
from novaberg.storage.events import Event
from novaberg.storage.memories import FORGOTTEN, MemoryItem, Statement
from novaberg.storage.memory_jobs import events_ahead
from novaberg.storage.turns import TurnSource, source_of
from novaberg.structured import ask_structured

log = logging.getLogger("novaberg")

JOB_TYPES = ("consolidate", "timeline", "profile_adaptive", "profile_core")
IMPORT_TYPES = ("weigh",)
"""Salience over an imported user message (``import-chats --remember``): run by that command
(again to resume), not by the background runner, which runs :data:`JOB_TYPES`."""
MALFORMED = "the model returned no usable JSON (its calls are recorded as malformed)"


@dataclass(frozen=True)
class JobOutcome:
    event_id: int
    type: str
    status: Literal["done", "failed"]
    result: str


class Failed(Exception):
    """A job that could not produce anything usable; the message says why."""


# -- model outputs --------------------------------------------------------------------------
class Consolidation(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action: Literal["new", "same", "update"]
    fact_id: int | None = None
    fact: str = Field(default="", max_length=500)
    words: list[str] = Field(default_factory=list)
    """Words a later question would use that the fact does not (topics, synonyms); indexed
    with the fact (see :func:`with_words`)."""


class DatedEvent(BaseModel):
    model_config = ConfigDict(extra="ignore")
    what: str = Field(max_length=300)
    when: str = Field(max_length=100)


class Events(BaseModel):
    model_config = ConfigDict(extra="ignore")
    events: list[DatedEvent] = Field(max_length=5)


class ProfileStatement(BaseModel):
    model_config = ConfigDict(extra="ignore")
    text: str = Field(max_length=300)
    sources: list[int]
    concern: bool = False
    """An open worry worth a check-in (the adaptive profile's; :func:`check_in_later`)."""


class ProfileOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    statements: list[ProfileStatement] = Field(max_length=10)


def _listing(items: list[MemoryItem], none: str) -> str:
    return "\n".join(f"[{m.id}] {m.text}" for m in items) or none


class BackgroundJobs:
    """Runs the memory jobs waiting in the event queue, oldest first, each for the user whose
    conversation enqueued it (whichever user this process serves)."""

    def __init__(self, ctx_factory: Callable[[], JobContext]) -> None:
        self.ctx_factory = ctx_factory

    async def run_pending(
        self, limit: int = 100, between: Callable[[], object] | None = None
    ) -> list[JobOutcome]:
        """Claim and run waiting jobs, one at a time, until none is left (or ``limit`` ran).
        A job another process has claimed is not touched. ``between`` is called after each
        job that ran, before the next is claimed."""
        probe = self.ctx_factory()
        outcomes = []
        for _ in range(limit):
            event = await probe.db.run(probe.events.claim, JOB_TYPES)
            if event is None:
                break
            outcomes.append(await self.run(event))
            if between is not None:
                between()
        return outcomes

    async def run(self, event: Event) -> JobOutcome:
        """Run one job this process has claimed."""
        ctx = self.ctx_factory()
        store = MemoryStore(ctx.db)
        handler = _HANDLERS[event.type]
        user = await ctx.db.run(ctx.db.conversation_user, event.conversation_id)
        if user is None:
            return await self._failed(ctx, event, f"conversation {event.conversation_id} is gone")
        CALL_OWNER.set(user)  # the model queue takes different users' calls in turn
        try:
            write, note = await handler(ctx, store, user, event)
        except Failed as exc:
            return await self._failed(ctx, event, str(exc), user)
        except NovabergError as exc:
            return await self._failed(ctx, event, _reason(exc), user)
        except Exception as exc:  # a bug must not end the loop that runs the other jobs
            log.error("%s job (event %d) crashed: %s", event.type, event.id, type(exc).__name__)
            log.debug("the crash of event %d", event.id, exc_info=True)
            return await self._failed(ctx, event, f"internal error ({type(exc).__name__})", user)

        def finish() -> str:  # in a database worker: the job's writes, calls and mark at once
            done = note
            with ctx.db.transaction() as c:
                if write is not None:
                    done = write(c) or done
                insert_calls(c, ctx.trace.calls, turn_id=None, event_id=event.id)
                ctx.events.mark(event.id, "done", done, c)
                user_events.record(c, user, "job", event.id)  # for GET /api/events
            return done

        result = await ctx.db.run(finish)
        user_events.notify(user)
        ctx.queue.observers.job_ended(event.type, "done", ctx.trace.calls)
        log.info("%s job (event %d) done: %s", event.type, event.id, result)
        return JobOutcome(event.id, event.type, "done", result)

    @staticmethod
    async def _failed(
        ctx: JobContext, event: Event, reason: str, user: str | None = None
    ) -> JobOutcome:
        """Record a failure; ``reason`` says what failed and never quotes the user's or the
        model's words (it is shown by ``memory jobs`` and logged)."""

        def record() -> None:
            with ctx.db.transaction() as c:
                insert_calls(c, ctx.trace.calls, turn_id=None, event_id=event.id)
                ctx.events.mark(event.id, "failed", reason, c)
                if user is not None:  # for GET /api/events
                    user_events.record(c, user, "job", event.id)

        await ctx.db.run(record)
        if user is not None:
            user_events.notify(user)
        ctx.queue.observers.job_ended(event.type, "failed", ctx.trace.calls)
        log.warning("%s job (event %d) failed: %s", event.type, event.id, reason)
        return JobOutcome(event.id, event.type, "failed", reason)


def _reason(exc: NovabergError) -> str:
    """A failure reason without words from a prompt or an answer: a backend's message may
    quote the request (a server's validation error), so only its kind is named; the call
    records keep the details."""
    if isinstance(exc, BackendError | ModelOutputError):
        return f"the model call failed ({type(exc).__name__}; see the job's call records)"
    return f"{type(exc).__name__}: {exc}"


Write = Callable[[Any], str | None] | None
Handler = Callable[[JobContext, MemoryStore, str, Event], Coroutine[Any, Any, tuple[Write, str]]]


def _source(store: MemoryStore, user: str, event: Event) -> MemoryItem | None:
    return store.get(user, int(event.payload["memory_id"]))


async def consolidate(
    ctx: JobContext, store: MemoryStore, user: str, event: Event
) -> tuple[Write, str]:

    def read() -> tuple[MemoryItem | None, list[MemoryItem]]:  # in a database worker
        item = _source(store, user, event)
        if item is None or item.consolidated_into is not None:
            return item, []
        matches = [c for c in store.fulltext(user, query_terms(item.text)) if c.kind == "long_term"]
        best = [c.id for c in sorted(matches, key=lambda c: -c.rel)][:5]
        facts = store.by_ids(user, best)
        return item, [facts[i] for i in best if i in facts]

    item, related = await ctx.db.run(read)
    if item is None:
        return None, "the item was forgotten before it was consolidated"
    if item.consolidated_into is not None:
        return None, f"already consolidated into fact {item.consolidated_into}"
    texts = job_prompts(ctx.settings.language)
    messages: list[ChatMessage] = [
        {"role": "system", "content": texts.consolidate},
        {
            "role": "user",
            "content": f"{texts.existing_facts}:\n{_listing(related, texts.none)}\n\n"
            f"{texts.new_item}:\n{item.text}",
        },
    ]
    out = await ask_structured(ctx, "consolidate", messages, Consolidation, priority=BACKGROUND)
    if out is None:
        raise Failed(MALFORMED)
    offered = {m.id for m in related}
    if out.action in ("same", "update") and out.fact_id not in offered:
        raise Failed(f"the model named fact {out.fact_id}, which it was not shown")
    fact = out.fact.strip()
    if out.action in ("new", "update") and not fact:
        raise Failed(f"the model chose {out.action!r} but wrote no fact")
    if fact:
        fact = with_words(fact, out.words, ctx.settings.language)
    vector, index, note = await _fact_vector(ctx, fact) if fact else (None, None, "")

    def write(c: Any) -> str:
        assert item is not None
        if out.action == "same":
            assert out.fact_id is not None
            MemoryStore.cover(c, item.id, out.fact_id)
            return f"same as fact {out.fact_id}; item {item.id} linked to it"
        added = MemoryStore.add(
            c,
            user,
            "long_term",
            fact,
            item.importance,
            f"fact:{item.id}",
            source_turn_id=item.source_turn_id,
            source_message_id=item.source_message_id,
            derived_from=[item.id],
        )
        MemoryStore.cover(c, item.id, added.id)
        if vector is not None and index is not None:
            index.upsert(c, added.id, user, vector.embedder, vector.vectors[0])
        if out.action == "update":
            assert out.fact_id is not None
            MemoryStore.supersede(c, out.fact_id, added.id)
            return f"fact {added.id} supersedes fact {out.fact_id}{note}"
        return f"new fact {added.id}{note}"

    return write, ""


def _date_options(at: datetime, language: str) -> dict[str, Any]:
    """dateparser's options: the user's language first, relative to ``at``, future preferred."""
    return {
        "languages": list(dict.fromkeys([language, "en", "de"])),
        "settings": {"RELATIVE_BASE": at.replace(tzinfo=None), "PREFER_DATES_FROM": "future"},
    }


def date_expressions(text: str, at: datetime, language: str) -> list[tuple[str, datetime]]:
    """The date expressions dateparser finds in ``text`` ("morgen", "next Friday"), resolved."""
    from dateparser.search import search_dates

    return list(search_dates(text, **_date_options(at, language)) or [])


def resolve_date(when: str, at: datetime, language: str) -> date | None:
    """``when`` ("morgen", "next Friday", "am 12. Mai") as a date, relative to ``at``."""
    import dateparser

    found = dateparser.parse(when, **_date_options(at, language))
    if found is None:
        hits = date_expressions(when, at, language)
        found = hits[0][1] if hits else None
    return None if found is None else found.date()


async def timeline(
    ctx: JobContext, store: MemoryStore, user: str, event: Event
) -> tuple[Write, str]:
    item, turn = await ctx.db.run(
        lambda: (_source(store, user, event), source_of(ctx.db, int(event.payload["turn_id"])))
    )
    if item is None or turn is None or turn.forgotten or turn.user_text == FORGOTTEN:
        return None, "the source was forgotten"
    message = turn.user_text
    at = datetime.fromisoformat(turn.started_at)
    # dateparser is CPU work (about 400 ms on its first call): in a thread, not on the loop,
    # after the warm-up that loads its language data once
    if ctx.dates_ready is not None:
        await ctx.dates_ready()
    mentioned = await asyncio.to_thread(date_expressions, message, at, ctx.settings.language)
    if not mentioned:
        return None, "no date expression in the message (dateparser found none); no model call"
    messages: list[ChatMessage] = [
        {"role": "system", "content": job_prompts(ctx.settings.language).timeline},
        {"role": "user", "content": message},
    ]
    out = await ask_structured(ctx, "timeline", messages, Events, priority=BACKGROUND)
    if out is None:
        raise Failed(MALFORMED)
    if not out.events:
        raise Failed(
            f"the model found no event although dateparser found {len(mentioned)} date "
            "expression(s) in the message"
        )

    def resolve_all() -> list[tuple[int, str, date]]:  # dateparser: in a thread
        resolved = []
        for n, found in enumerate(out.events):
            day = resolve_date(found.when, at, ctx.settings.language)
            if day is not None and found.what.strip():
                resolved.append((n, found.what.strip(), day))
        return resolved

    resolved = await asyncio.to_thread(resolve_all)
    if not resolved:
        raise Failed(
            f"no event date could be resolved: the model gave {len(out.events)} event(s), "
            "none with a date dateparser understands"
        )

    def write(c: Any) -> str:
        stored = []
        for n, what, day in resolved:
            added = MemoryStore.add(
                c,
                user,
                "event",
                what,
                item.importance,
                f"event:{item.id}:{n}",
                source_turn_id=item.source_turn_id,
                source_message_id=item.source_message_id,
                derived_from=[item.id],
                happens_on=day.isoformat(),
            )
            moved = replace_told_again(c, user, added.id, what, day)
            days = on_the_day(c, ctx.settings, user, added.id, what, day, item, event)
            also = f" ({days} message(s) scheduled)" if days else ""
            stored.append(f"event {added.id} on {day.isoformat()}{also}{moved}")
        return ", ".join(stored)

    return write, ""


def replace_told_again(c: Any, user: str, new_id: int, what: str, day: date) -> str:
    """In the timeline job's transaction: the user's current events still ahead with the same
    words as the new one (up to case and spacing) are that event told again — on the same
    day, or moved to another ("the party is on Saturday now"): each is superseded by the new
    one, and the messages scheduled for it follow it (:func:`~novaberg.proactive.schedule.
    follow_event`). Two events of the same name still to come are taken for one. What was
    done, in words ("" when nothing was)."""
    from novaberg.proactive.schedule import follow_event
    from novaberg.text import same_text

    ahead = events_ahead(c, user, new_id, datetime.now(UTC).date().isoformat())
    wanted = same_text(what)
    done = []
    for row in ahead:
        if same_text(row.text) != wanted:
            continue
        MemoryStore.supersede(c, row.id, new_id)
        moved = follow_event(c, user, row.id, new_id, what, day)
        done.append(f"; replaces event {row.id}" + "".join(f", {m}" for m in moved))
    return "".join(done)


IMPORTANT = 0.8
"""An event whose item salience scored at least this gets a message the day before too."""


def on_the_day(
    c: Any,
    settings: Any,
    user: str,
    event_id: int,
    what: str,
    day: date,
    item: MemoryItem,
    job: Event,
) -> int:
    """In the timeline job's transaction: a proactive message on the morning of a dated
    event (``proactive.morning``, the user's zone) and, for an important one, the morning
    before; only those still ahead, once per event (their cause key). Returns how many."""
    from datetime import time as clock

    from novaberg.proactive.schedule import event_key, schedule, zone
    from novaberg.proactive.when import When, wall_time

    where = zone(settings)
    morning = clock.fromisoformat(settings.proactive.morning)
    ahead = [0, 1] if item.importance >= IMPORTANT else [0]
    made = 0
    for before in ahead:
        local = wall_time(day - timedelta(days=before), morning, where)
        key = event_key(event_id, before)
        if local <= datetime.now(UTC) or stored_events.has_cause(c, key):
            continue  # passed, or there already (moved here from the event this one replaced)
        schedule(
            c,
            user,
            what,
            When(local.astimezone(UTC), local),
            cause=f"the timeline: memory {event_id} on {day.isoformat()}",
            cause_key=key,
            kind="event",
            turn_id=item.source_turn_id,
            conversation=job.conversation_id,
            ahead=before,
            sources=[event_id],
        )
        made += 1
    return made


def check_in_later(c: Any, settings: Any, user: str, concern: Statement, job: Event) -> bool:
    """In the adaptive profile job's transaction: a check-in on an open concern on the morning
    ``proactive.checkin_days`` from now, once per concern (its words, up to case and spacing,
    are its cause); sent only while the concern is still in the adaptive profile. Whether one
    was scheduled now."""
    import hashlib
    from datetime import time as clock

    from novaberg.proactive.schedule import schedule, zone
    from novaberg.proactive.when import When, wall_time
    from novaberg.text import same_text

    where = zone(settings)
    day = datetime.now(UTC).astimezone(where).date() + timedelta(
        days=settings.proactive.checkin_days
    )
    local = wall_time(day, clock.fromisoformat(settings.proactive.morning), where)
    words = hashlib.sha256(f"{user}\n{same_text(concern.text)}".encode()).hexdigest()
    key = f"checkin:{words}"
    if stored_events.has_cause(c, key):
        return False
    schedule(
        c,
        user,
        concern.text,
        When(local.astimezone(UTC), local),
        cause="an open concern of the adaptive profile",
        cause_key=key,
        kind="checkin",
        turn_id=job.turn_id,
        conversation=job.conversation_id,
        sources=concern.sources,
    )
    return True


async def _profile(
    part: Literal["core", "adaptive"],
    ctx: JobContext,
    store: MemoryStore,
    user: str,
    event: Event,
) -> tuple[Write, str]:
    everything = await ctx.db.run(store.items, user, current_only=True, limit=200)
    current = [m for m in everything if m.kind != "event"]
    if part == "adaptive":
        since = datetime.now(UTC) - timedelta(days=14)
        basis = [m for m in current if datetime.fromisoformat(m.valid_from) >= since][:20]
    else:
        basis = sorted(current, key=lambda m: -m.importance)[:40]
    basis = [m for m in basis if m.consolidated_into is None]
    if not basis:
        return None, "no memories to build the profile from"
    texts = job_prompts(ctx.settings.language)
    messages: list[ChatMessage] = [
        {
            "role": "system",
            "content": texts.profile_core if part == "core" else texts.profile_adaptive,
        },
        {"role": "user", "content": f"{texts.memories}:\n{_listing(basis, texts.none)}"},
    ]
    out = await ask_structured(
        ctx, f"profile_{part}", messages, ProfileOutput, priority=BACKGROUND, max_tokens=512
    )
    if out is None:
        raise Failed(MALFORMED)
    offered = {m.id for m in basis}
    statements = [
        Statement(s.text.strip(), sorted(set(s.sources)))
        for s in out.statements
        if s.text.strip() and s.sources and set(s.sources) <= offered
    ]
    dropped = len(out.statements) - len(statements)
    if not statements:
        raise Failed(
            f"no usable statement: {len(out.statements)} given, each empty or without "
            "sources among the memories shown"
        )

    concerns = [
        Statement(s.text.strip(), sorted(set(s.sources)))
        for s in out.statements
        if part == "adaptive" and s.concern and s.text.strip() and s.sources
        and set(s.sources) <= offered
    ]  # fmt: skip

    def write(c: Any) -> str:
        version = store.set_profile(user, part, statements, c)
        note = f" ({dropped} without valid sources dropped)" if dropped else ""
        later = sum(check_in_later(c, ctx.settings, user, s, event) for s in concerns)
        asked = f"; {later} check-in(s) scheduled" if later else ""
        return f"{part} profile version {version}: {len(statements)} statements{note}{asked}"

    return write, ""


async def profile_adaptive(
    ctx: JobContext, store: MemoryStore, user: str, event: Event
) -> tuple[Write, str]:
    return await _profile("adaptive", ctx, store, user, event)


async def profile_core(
    ctx: JobContext, store: MemoryStore, user: str, event: Event
) -> tuple[Write, str]:
    return await _profile("core", ctx, store, user, event)


WORDS_MAX = 8
_WORD_OK = re.compile(r"^\w[\w' -]{0,39}$", re.UNICODE)
WORDS_LABEL = {"en": "topics", "de": "Themen"}


def with_words(fact: str, words: list[str], language: str) -> str:
    """The fact as stored and indexed: with the words a later question would use (the
    consolidation model's ``words``, never tool output or Nova's replies) after it,
    ``"Ada adopted a dog named Bruno. (topics: pet, animal)"``. Words already in the fact,
    repeated, or not plain words are left out; at most :data:`WORDS_MAX`."""
    present = set(re.findall(r"\w+", fact.lower()))
    kept: list[str] = []
    for raw in words:
        word = " ".join(str(raw).split())
        if not _WORD_OK.match(word) or word.lower() in present:
            continue
        if word.lower() not in {k.lower() for k in kept}:
            kept.append(word)
        if len(kept) == WORDS_MAX:
            break
    if not kept:
        return fact
    return f"{fact} ({WORDS_LABEL.get(language, WORDS_LABEL['en'])}: {', '.join(kept)})"


async def _fact_vector(ctx: JobContext, text: str) -> tuple[Vectors | None, Any, str]:
    """The new fact's vector from the memory embedder (at background priority), the index
    to store it in, and a note for the job's result when there is none (the job still
    stores the fact: ``memory reindex`` or the next retrieval adds the vector)."""
    choice = choose(ctx.settings, text)  # with auto: the fact's language's embedder
    if choice.name is None:
        return None, None, ""
    try:
        vector = await embed(
            choice, [text], query=False, queue=ctx.queue, trace=ctx.trace, priority=BACKGROUND
        )
    except EmbedderError as exc:
        log.warning("consolidate: the fact gets no vector now (%s)", exc)
        return None, None, "; no vector yet (the embedder failed)"
    return vector, await ctx.db.run(vector_index, ctx.db), ""


async def weigh(ctx: JobContext, store: MemoryStore, user: str, event: Event) -> tuple[Write, str]:
    """Salience over one imported user message (``import-chats --remember``): the message
    alone, with no situation, so the other system's assistant is never a source of facts
    about the user. A salient one becomes a short-term item dated by the message and gets the
    jobs of a turn's item, in the job's transaction."""
    turn_id = int(event.payload["turn_id"])
    key = turn_item_key(turn_id)

    def read() -> tuple[TurnSource | None, int | None]:  # in a database worker
        return source_of(ctx.db, turn_id), store.key_id(ctx.db, user, key)

    turn, weighed = await ctx.db.run(read)
    if turn is None or turn.forgotten or turn.user_text == FORGOTTEN:
        return None, "the source was forgotten"
    if weighed is not None:
        return None, f"weighed before: memory {weighed}"
    text = turn.user_text
    if not text.strip():
        return None, "no user message in this turn; no model call"
    messages = salience_prompt(ctx, Situation(), text)
    out = await ask_structured(ctx, "salience", messages, SalienceOutput, priority=BACKGROUND)
    if out is None:
        raise Failed(MALFORMED)
    summary = out.summary.strip()
    if out.score < ctx.settings.salience_threshold or not summary:
        return None, f"not remembered (salience {out.score:.2f})"
    repeated = await ctx.db.run(store.current_saying, user, "short_term", summary)
    if repeated is not None:
        return None, f"kept already as memory {repeated}; not stored twice"
    said_at = turn.started_at
    message_id = event.payload.get("message_id")

    def write(c: Any) -> str:
        added = MemoryStore.add(
            c,
            user,
            "short_term",
            summary,
            out.score,
            key,
            source_turn_id=turn_id,
            source_message_id=None if message_id is None else int(message_id),
            valid_from=said_at,
        )
        if not added.created:
            return f"weighed before: memory {added.id}"
        jobs = enqueue_memory_jobs(
            c, ctx.events, ctx.settings.memory, user, added.id, turn_id, event.conversation_id
        )
        return f"memory {added.id} (salience {out.score:.2f}); {len(jobs)} job(s) enqueued"

    return write, ""


_HANDLERS: dict[str, Handler] = {
    "weigh": weigh,
    "consolidate": consolidate,
    "timeline": timeline,
    "profile_adaptive": profile_adaptive,
    "profile_core": profile_core,
}
