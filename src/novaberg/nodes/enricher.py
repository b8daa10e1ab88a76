"""Enricher (no LLM; the message's embedding comes from the memory embedder): loads what the
responder should know.

- the conversation's recent completed exchanges: Nova's stored ones, or, for a front-end that
  resends its chat (``ctx.shown``), the chat as it shows it (a branch the user left behind,
  a stopped reply, an earlier answer to a message asked again: not sent);
- memories found by :func:`~novaberg.memory.retrieval.recall` (by words and by meaning;
  then recency + importance + relevance, in a token budget), each with the reason it was
  chosen; with the in-process embedder (or none) the search starts with the turn, beside
  the router's call (``ctx.recalled``), and the enricher takes its result; when the
  embedder is missing or fails, by words only, with a notice in the trace;
- earlier messages of any conversation, the user's and Nova's, found by their words
  (``memory.messages`` of them, 3; not those the history holds, nor one a memory item was
  made from), each dated: "(the user said this on 2026-05-08) …";
- when the router heard a correction ("no, Munich, not Berlin"): the memory it is about
  (:func:`~novaberg.memory.corrections.resolve`), whose old version is then not given as
  current; the turn's transaction applies it (``engine/turn_store.py``);
- the latest user profile (core + adaptive);
- timeline events from yesterday to two weeks ahead.

The history, the timeline and the profile are read from the turn's start, beside the
router's call (``ctx.read``, :mod:`novaberg.nodes.enricher_reads`), as the search is.

The reasons go into the turn's trace as ``retrieval`` (ids and reasons only: the trace of a
later turn must not keep a copy of a memory's text that the user may forget; a message as
``message_id``, by which forget finds the turns that were given it).

Every read runs in the database's worker threads (``ctx.db.run``), off the loop.
"""

from __future__ import annotations

import logging
from datetime import date

from novaberg.graph.channels import Chosen, Context, Dated, Given, Line
from novaberg.graph.state import TurnState
from novaberg.memory.corrections import resolve
from novaberg.memory.retrieval import Heed, estimate_tokens, excerpt, query_terms, recall
from novaberg.memory.store import MemoryStore
from novaberg.nodes.context import TurnContext
from novaberg.nodes.enricher_reads import read_for_enricher
from novaberg.proactive.reminders import plan
from novaberg.queue import FOREGROUND
from novaberg.text import same_text

log = logging.getLogger("novaberg")


async def enricher(state: TurnState, ctx: TurnContext) -> TurnState:
    user = state["user_id"]
    store = MemoryStore(ctx.db)
    if ctx.recalled is not None:  # started with the turn; usually done by now
        found = await ctx.recalled
    else:  # a backend embedder: its call waits in the model queue behind the router's
        found = await recall(
            ctx.db,
            ctx.settings,
            user,
            state["user_text"],
            queue=ctx.queue,
            trace=ctx.trace,
            priority=max(FOREGROUND, ctx.yields_to),
            what="enricher",
            messages=Heed.for_turn(ctx.settings, state.get("conversation_id")),
        )
    ctx.trace.notices.extend(found.notices)
    chosen = found.items
    today = date.today()

    correction = None
    route = state.get("router")
    said_wrong = route.correction if route is not None else None
    if said_wrong is not None and state.get("origin") == "user":
        correction = await ctx.db.run(resolve, store, user, said_wrong)
        if correction.memory_id is not None:  # the old version is not given as current
            chosen = [r for r in chosen if r.item.id != correction.memory_id]
    ended = correction.memory_id if correction is not None else None
    asked = route.reminder if route is not None else None
    reminder = None
    if asked is not None and state.get("origin") == "user":  # scheduled in the turn's transaction
        reminder = plan(asked, ctx.settings, can_send=ctx.settings.proactive.enabled)

    if ctx.read is not None:  # started with the turn; usually done by now
        reads = await ctx.read
    else:
        reads = await ctx.db.run(
            read_for_enricher,
            ctx.db,
            user,
            state["conversation_id"],
            ctx.shown.history if ctx.shown is not None else None,
            ctx.settings.history_turns,
            today,
        )
    history, events = reads.history, reads.events
    profile = {  # without the statements resting on a version just corrected
        part: "\n".join(s.text for s in p.statements if ended not in s.sources)
        for part, p in reads.profile.items()
    }
    profile = {part: text for part, text in profile.items() if text}
    in_history = {same_text(m.content) for m in history}
    heard = [h for h in found.heard if same_text(h.message.text) not in in_history]
    terms = query_terms(state["user_text"])
    p = ctx.prompts
    said = [
        Given(
            message_id=h.message.message_id,
            text=(p.said_user if h.message.role == "user" else p.said_nova).format(
                day=h.message.at[:10]
            )
            + " "
            + excerpt(h.message.text, terms),
            reason=h.reason,
            kind="message",
        )
        for h in heard
    ]
    items = [
        Given(id=r.item.id, text=r.item.text, reason=r.reason, kind=r.item.kind) for r in chosen
    ]
    retrieval = [
        *(
            Chosen(id=r.item.id, score=round(r.score, 3), tokens=r.tokens, reason=r.reason)
            for r in chosen
        ),
        *(
            Chosen(message_id=m.message_id, tokens=estimate_tokens(len(m.text)), reason=m.reason)
            for m in said
        ),
    ]
    context = Context(
        history=tuple(Line(role=m.role, content=m.content) for m in history),
        memories=(*items, *said),  # the messages after the items: the budget cuts from the end
        retrieval=tuple(retrieval),
        correction=correction,
        reminder=reminder,
        profile=profile or None,
        timeline=tuple(Dated(date=str(e.happens_on), text=e.text) for e in events),
    )
    return {"context": context}
