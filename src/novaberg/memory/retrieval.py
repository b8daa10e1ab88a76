"""Retrieval: finding what the user told Nova, by words and by meaning, within a budget.

Two signals find candidates:

- **words**: the user's newest full-text matches (200) and their best-ranked matching facts
  and events however old (50) — BM25 on SQLite FTS5, ``ts_rank_cd`` on PostgreSQL;
- **meaning**: the nearest neighbours of the message's vector among the user's item vectors of
  the same embedder (:class:`~novaberg.storage.vectors.VectorIndex`, 50), kept when their cosine
  similarity reaches the embedder's floor (:data:`~novaberg.memory.embedding.MIN_SIMILARITY`);

plus the user's newest items (10). Superseded facts (``valid_to`` set) and short-term items
already covered by a fact are never candidates. A message without content words (a greeting,
a thank-you: only stop words and words under three letters) is searched by neither signal:
the nearest vectors to "Hallo" are still the nearest, and unrelated.

A message naming a day or a month ("on 7 July, 2023", "in August") has a third signal,
**date** (:func:`dated_ranks`): the candidates words or meaning found that were told then,
ranked as those two rank them. It reorders, never finds: the date alone makes no candidate.

The signals are fused by reciprocal rank: an item's **relevance** is the sum, over the signals
that found it, of ``(k + 1) / (k + rank)`` (``k`` = :attr:`Retriever.fusion_k`, 1): 1 for the
first of a signal, 0.5 for the third, so an item both signals put first scores 2. Ranks, not
raw scores, are added, because BM25 and cosine live on different scales. ``k`` = 1 (not the
usual 60) keeps the first ranks apart from the rest: on the meaning suite (2,000 noise items,
MiniLM) it found 20 of 20 English meaning questions in the top 5, against 19 with k = 5 to 20.

As in Generative Agents, each candidate's score is then a weighted sum: recency
(``0.5 ** (age_days / half_life)``, the half-life ``half_life_days`` (14) for short-term
items and ``fact_half_life_days`` (180) for facts and events) + importance (the salience score
the item was stored with) + 2 × relevance. An item no signal found is kept only if it is both
recent and important. The best are packed into the token budget. Every returned item says why
it was chosen, naming the signal ("words: 'sister'", "meaning: 0.71 similar"); the enricher puts
those reasons into the turn's trace.

Beside the items, :func:`recall` can look through the user's stored messages (``messages``,
:class:`Heed`): the conversation as memory, found by its words alone (:meth:`Retriever.heard`,
``MemoryStore.said``), returned apart in :attr:`Recall.heard`, each dated and marked with whose
it was.

:func:`recall` is the one entry for the enricher, the thinker's ``memory_search``, ``novaberg
memory search`` and the API: it embeds the message (off the event loop), retrieves in the
database's worker thread, and falls back to full text with a notice when the embedder is
missing or fails, or the stored vectors have another dimension.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from novaberg.errors import EmbedderError, NovabergError, VectorDimensionError
from novaberg.memory.dates import Named, named_dates, on_named
from novaberg.memory.embedding import (
    Choice,
    Vectors,
    choose,
    embed,
    embed_local,
    embed_with_backend,
    unread_script,
)
from novaberg.memory.store import MemoryStore
from novaberg.storage.memories import Candidate, MemoryItem, SaidBefore
from novaberg.text import same_text

log = logging.getLogger("novaberg")

_STOPWORDS = """
    the and for are but not you your yours was were has have had this that these those with
    from into about what when where which who whom why how can could would should will shall
    may might must did does doing done any all some one ones our ours out its it's i'm i've
    just also very really there their them they then than too much many more most such own
    same other only over under again once here been being because while of to in on at by
    is be as if or an a so do me my mine we us he him his she her hers it
    tell know remember please nova think thing things like want need get got say said
    der die das den dem des ein eine einer eines einem einen und oder aber nicht ist sind war
    waren bin bist hat habe hast haben mit von vom zum zur für auf aus bei nach über unter
    wie was wer wo wann warum welche welcher welches ich du er sie es wir ihr mich mir dich
    dir uns euch mein meine meiner meinen meinem dein deine sein seine ihre kann können
    noch schon auch nur sehr dann denn doch mal weißt erinnerst bitte
    hello hallo hey hiya moin servus ciao bye tschüss tschüs thanks thank danke okay alright
"""
STOPWORDS = frozenset(_STOPWORDS.split())
_WORD = re.compile(r"\w+", re.UNICODE)


NO_CONTENT = (
    "not searched by words or meaning: the message has no content words (only stop words, "
    "words under three letters, or no letters)"
)
"""The trace's notice for a message about nothing Nova was told (a greeting, emoji)."""


def query_terms(text: str, limit: int = 12) -> list[str]:
    """Distinct content words of a message, lower-case, word characters only."""
    seen: list[str] = []
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 or word in STOPWORDS or word in seen or "_" in word:
            continue
        seen.append(word)
        if len(seen) == limit:
            break
    return seen


def estimate_tokens(chars: int) -> int:
    """About four characters a token (no tokenizer is shared by every backend)."""
    return max(1, math.ceil(chars / 4))


class NearestIndex(Protocol):
    """What retrieval needs of :class:`~novaberg.storage.vectors.VectorIndex`."""

    def nearest(
        self, user_id: str, embedder: str, query: Sequence[float], k: int
    ) -> list[tuple[int, float]]: ...


@dataclass(frozen=True)
class Weights:
    recency: float = 1.0
    importance: float = 1.0
    relevance: float = 2.0


@dataclass(frozen=True)
class Retrieved:
    item: MemoryItem
    score: float
    recency: float
    importance: float
    relevance: float
    tokens: int
    reason: str
    words: int | None = None
    """The item's rank among the full-text matches (1 = best), if words found it."""
    meaning: float | None = None
    """The cosine similarity of the message's and the item's vectors, if meaning found it."""
    dated: int | None = None
    """The item's rank among the found items told on a day the message names (1 = best), if
    it names one (:func:`dated_ranks`)."""


@dataclass(frozen=True)
class Heard:
    """A stored message found by its words (the conversation as memory), with its rank among
    the message matches (1 = best) and the reason it was chosen."""

    message: SaidBefore
    rank: int
    reason: str


@dataclass(frozen=True)
class Meaning:
    """The message's vector, for the meaning signal."""

    embedder: str
    vector: Sequence[float]
    index: NearestIndex
    min_similarity: float = 0.0


@dataclass
class Retriever:
    store: MemoryStore
    budget_tokens: int = 400
    max_items: int = 8
    half_life_days: float = 14.0
    fact_half_life_days: float = 180.0
    fulltext_ranked: int = 200
    fulltext_facts: int = 50
    vector_candidates: int = 50
    recent_candidates: int = 10
    fusion_k: float = 1.0
    weights: Weights = Weights()

    def by_words(self, user: str, message: str) -> list[Candidate]:
        """Blocking: the full-text candidates for ``message`` (the words signal)."""
        return self.store.fulltext(
            user, query_terms(message), self.fulltext_ranked, self.fulltext_facts
        )

    def retrieve(
        self,
        user: str,
        message: str,
        *,
        at: datetime | None = None,
        meaning: Meaning | None = None,
        words: list[Candidate] | None = None,
    ) -> list[Retrieved]:
        """Blocking (database reads): in async code, through ``db.run``. Raises
        :class:`~novaberg.errors.VectorDimensionError` when the stored vectors of
        ``meaning.embedder`` have another length than its vector. ``words``: the result of
        :meth:`by_words` for this message, when the caller searched already."""
        at = at or datetime.now(UTC)
        terms = query_terms(message)
        found_by_words = self.by_words(user, message) if words is None else words
        candidates = {c.id: c for c in found_by_words}
        by_words = sorted(candidates.values(), key=lambda c: (-c.rel, -c.id))
        words_rank = {c.id: n for n, c in enumerate(by_words, 1)}
        similar: dict[int, float] = {}
        if meaning is not None:
            near = meaning.index.nearest(
                user, meaning.embedder, meaning.vector, self.vector_candidates
            )
            similar = {i: s for i, s in near if s >= meaning.min_similarity}
            missing = [i for i in similar if i not in candidates]
            for c in self.store.candidates(user, missing):
                candidates[c.id] = c
            similar = {i: s for i, s in similar.items() if i in candidates}  # current only
        meaning_rank = {
            i: n for n, i in enumerate(sorted(similar, key=lambda i: (-similar[i], -i)), 1)
        }
        for c in self.store.recent(user, self.recent_candidates):
            candidates.setdefault(c.id, c)
        k = self.fusion_k
        found = {
            c.id: sum((k + 1) / (k + r[c.id]) for r in (words_rank, meaning_rank) if c.id in r)
            for c in candidates.values()
        }
        dated_rank = dated_ranks(list(candidates.values()), found, named_dates(message))
        scored = []
        w = self.weights
        for c in candidates.values():
            relevance = found[c.id]
            if c.id in dated_rank:
                relevance += (k + 1) / (k + dated_rank[c.id])
            recency = self._recency(c, at)
            if relevance == 0.0 and recency * c.importance < 0.6:
                continue  # neither about this message nor fresh and important
            score = w.recency * recency + w.importance * c.importance + w.relevance * relevance
            scored.append((score, c, recency, relevance))
        scored.sort(key=lambda s: (-s[0], -s[1].id))
        chosen = self._pack([(s[1].id, estimate_tokens(s[1].chars)) for s in scored])
        items = self.store.by_ids(user, chosen)
        out = []
        said: set[str] = set()  # an exact repeat of a better item is not listed again
        for score, c, recency, relevance in scored:
            if c.id not in chosen or c.id not in items:
                continue
            item = items[c.id]
            if same_text(item.text) in said:
                continue
            said.add(same_text(item.text))
            why = Found(words_rank.get(c.id), similar.get(c.id), terms, dated_rank.get(c.id))
            out.append(
                Retrieved(
                    item,
                    score,
                    recency,
                    c.importance,
                    relevance,
                    estimate_tokens(c.chars),
                    _reason(item, why, recency, at),
                    why.words,
                    why.meaning,
                    why.dated,
                )
            )
        return out

    def heard(
        self,
        user: str,
        message: str,
        limit: int,
        *,
        skip: Sequence[int] = (),
        items: Sequence[Retrieved] = (),
    ) -> list[Heard]:
        """Blocking: the user's stored messages best matching ``message``'s words, at most
        ``limit``; when it names a day or a month, those said then come forward
        (:func:`dated_order`, among the :data:`DATED_POOL` best matches). Left out, as the
        items stand for them: the message one of ``items`` was made from; Nova's reply to it
        when the item was found by words or meaning (her reply usually repeats it; an item
        given for being recent and important alone does not answer for what she said); a
        message saying word for word what an item says; and ``skip`` (message ids)."""
        if limit <= 0:
            return []
        terms = query_terms(message)
        made_from = {r.item.source_message_id for r in items}
        answered = {
            r.item.source_turn_id for r in items if r.words is not None or r.meaning is not None
        }
        texts = {same_text(r.item.text) for r in items}
        out: list[Heard] = []
        wanted = limit + len(made_from) + len(answered)
        named = named_dates(message)
        found = self.store.said(
            user, terms, max(wanted, DATED_POOL) if named else wanted, skip=skip
        )
        for rank, said in dated_order(found, named, self.fusion_k):
            if (
                said.message_id in made_from
                or (said.role == "assistant" and said.turn_id in answered)
                or same_text(said.text) in texts
            ):
                continue
            texts.add(same_text(said.text))
            out.append(Heard(said, rank, _heard_reason(said, rank, terms)))
            if len(out) == limit:
                break
        return out

    def _recency(self, c: Candidate, at: datetime) -> float:
        age_days = max(0.0, (at - datetime.fromisoformat(c.valid_from)).total_seconds() / 86400)
        half_life = self.half_life_days if c.kind == "short_term" else self.fact_half_life_days
        return float(0.5 ** (age_days / half_life))

    def _pack(self, ranked: list[tuple[int, int]]) -> set[int]:
        """The ids that fit: best first, skipping an item too big for what is left."""
        chosen: set[int] = set()
        used = 0
        for memory_id, tokens in ranked:
            if len(chosen) == self.max_items:
                break
            if used + tokens > self.budget_tokens:
                continue  # a smaller, lower-ranked item may still fit
            chosen.add(memory_id)
            used += tokens
        return chosen


@dataclass(frozen=True)
class Found:
    """Which signals found an item."""

    words: int | None
    meaning: float | None
    terms: list[str]
    dated: int | None = None


def dated_ranks(
    candidates: Sequence[Candidate], found: dict[int, float], named: Sequence[Named]
) -> dict[int, int]:
    """The third signal, when the message names a day or a month ("on 7 July, 2023", "in
    August"): the candidates words or meaning found (``found``: their fused relevance, 0 for
    none) that were told then (:meth:`~novaberg.memory.dates.Named.holds`), ranked as those
    two signals rank them, by item id (1 = best). Empty when the message names no date. It
    only reorders what the other signals found: a day named alone finds nothing."""
    if not named:
        return {}
    told_then = [
        c for c in candidates if found.get(c.id, 0.0) > 0 and on_named(c.valid_from, named)
    ]
    told_then.sort(key=lambda c: (-found[c.id], -c.id))
    return {c.id: n for n, c in enumerate(told_then, 1)}


DATED_POOL = 50
"""The best-ranked message matches a search that names a date looks through for those said
then (:func:`dated_order`)."""


def dated_order(
    found: Sequence[SaidBefore], named: Sequence[Named], k: float = 1.0
) -> list[tuple[int, SaidBefore]]:
    """The message matches (best first) with their ranks, reordered as :func:`dated_ranks`
    reorders the items: those said on a day or in a month ``named`` gain ``(k + 1) / (k +
    n)``, the n-th of them in their words' order, beside their words' ``(k + 1) / (k +
    rank)``. Unchanged when nothing is named."""
    ranked = list(enumerate(found, 1))
    if not named:
        return ranked
    then = [rank for rank, said in ranked if on_named(said.at, named)]
    bonus = {rank: (k + 1) / (k + n) for n, rank in enumerate(then, 1)}
    ranked.sort(key=lambda r: (-((k + 1) / (k + r[0]) + bonus.get(r[0], 0.0)), r[0]))
    return ranked


def _reason(item: MemoryItem, found: Found, recency: float, at: datetime) -> str:
    parts = []
    if found.words is not None:
        text = item.text.lower()
        words = [t for t in found.terms if t in text]
        shown = ", ".join(f"'{w}'" for w in words[:4]) or "a word stem"
        parts.append(f"words: {shown} (rank {found.words})")
    if found.meaning is not None:
        parts.append(f"meaning: {found.meaning:.2f} similar")
    if found.dated is not None:
        parts.append(f"date: told on {said_on(item.valid_from)}, as asked (rank {found.dated})")
    if not parts:
        parts.append("recent and important")
    age = (at - datetime.fromisoformat(item.valid_from)).total_seconds() / 86400
    parts.append(f"{_age(age)} old (recency {recency:.2f})")
    parts.append(f"importance {item.importance:.2f}")
    label = {"long_term": "fact", "short_term": "recent item", "event": "timeline event"}
    return f"{label.get(item.kind, item.kind)}: " + "; ".join(parts)


HEARD_CHARS = 500
"""How much of a found message a turn is given: the part around its first matching word."""


def excerpt(text: str, terms: Sequence[str], chars: int = HEARD_CHARS) -> str:
    """``text``, or the ``chars`` of it around the first of ``terms`` it holds (``…`` where
    it was cut)."""
    if len(text) <= chars:
        return text
    lower = text.lower()
    at = min((i for i in (lower.find(t) for t in terms) if i >= 0), default=0)
    start = max(0, min(at - chars // 4, len(text) - chars))
    part = text[start : start + chars].strip()
    return ("…" if start > 0 else "") + part + ("…" if start + chars < len(text) else "")


def said_on(at: str) -> str:
    """A stored time as a day people read: ``8 May 2026``."""
    day = datetime.fromisoformat(at)
    return f"{day.day} {day:%B %Y}"


def _heard_reason(said: SaidBefore, rank: int, terms: list[str]) -> str:
    text = said.text.lower()
    words = [t for t in terms if t in text]
    shown = ", ".join(f"'{w}'" for w in words[:4]) or "a word stem"
    who = "you" if said.role == "user" else "Nova"
    return f"conversation: {who} said on {said_on(said.at)}; words: {shown} (rank {rank})"


def _age(days: float) -> str:
    if days < 1 / 24:
        return "under an hour"
    if days < 1:
        return f"{days * 24:.0f} h"
    return f"{days:.0f} d"


_indexes: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_indexes_lock = threading.Lock()


def vector_index(db: Any) -> Any:
    """The database's one :class:`~novaberg.storage.vectors.VectorIndex` (made once: making it
    checks the extension and builds missing indexes). Blocking: in a database worker."""
    from novaberg.storage.vectors import open_vector_index

    with _indexes_lock:
        index = _indexes.get(db)
        if index is None:
            index = _indexes[db] = open_vector_index(db)
        return index


# -- the one entry for every caller -------------------------------------------------------------
@dataclass(frozen=True)
class Recall:
    """What :func:`recall` found, with what the trace should say about how."""

    items: list[Retrieved]
    embedder: str | None
    """The embedder whose vectors were searched; ``None``: full text only."""
    notices: list[str] = field(default_factory=list)
    heard: list[Heard] = field(default_factory=list)
    """Stored messages found by their words (``messages`` asked for), best first."""


SEARCH_MESSAGES = 10
"""Stored messages that ``memory search`` and ``GET /api/memory?query=`` list at most."""


@dataclass(frozen=True)
class Heed:
    """Which stored messages :func:`recall` looks through besides the memory items."""

    limit: int = 0
    """How many to return at most (0: none)."""
    conversation: int | None = None
    skip_newest: int = 0
    """Messages of ``conversation`` left out, newest first: the turn's history has them."""

    @classmethod
    def for_turn(cls, settings: Any, conversation: int | None) -> Heed:
        """What a turn's search looks through: ``memory.messages`` of them, none of those its
        history holds."""
        return cls(
            settings.memory.messages,
            conversation=conversation,
            skip_newest=2 * max(0, settings.history_turns),
        )


async def recall(
    db: Any,
    settings: Any,
    user: str,
    message: str,
    *,
    queue: Any = None,
    trace: Any = None,
    max_items: int | None = None,
    budget_tokens: int | None = None,
    priority: int | None = None,
    what: str = "retrieval",
    given: Vectors | None = None,
    messages: Heed | None = None,
) -> Recall:
    """Retrieve for ``message`` by words and by meaning (the embedder of
    :func:`~novaberg.memory.embedding.choose`), never failing for the embedder's sake: without
    one, it retrieves by words and says why in ``notices`` (for the trace). ``queue`` and
    ``trace``: the model queue and the trace a backend embedder (``memory.embed_model``) is
    called through. ``given``: the message's vector, computed before, used when it is the
    chosen embedder's. ``messages``: the stored messages to look through by
    their words too (:class:`Heed`; none by default), returned as :attr:`Recall.heard`."""
    from novaberg.queue import FOREGROUND

    memory = settings.memory
    retriever = Retriever(
        MemoryStore(db),
        budget_tokens=memory.budget_tokens if budget_tokens is None else budget_tokens,
        max_items=memory.max_items if max_items is None else max_items,
        half_life_days=memory.half_life_days,
        fact_half_life_days=memory.fact_half_life_days,
    )
    choice: Choice = choose(settings, message)  # with auto: the message's language's
    notices = list(choice.notices)
    if not query_terms(message):
        # a greeting, a thank-you, an "ok", emoji: about nothing Nova was told, so no search;
        # the nearest vectors would still be the nearest, and unrelated (recent, important
        # items still come, as for every message)
        items = await db.run(retriever.retrieve, user, message)
        # said in the trace where it may surprise: a longer question of only stop words, or
        # a message without letters; a greeting or a thank-you is as expected
        words = _WORD.findall(message)
        said = len(words) >= 4 or not any(ch.isalpha() for ch in message)
        return Recall(items, None, [*notices, f"{what}: {NO_CONTENT}"] if said else notices)
    script = unread_script(choice.name, message)
    if script is not None:
        notices.append(
            f"{what}: by words only, the message is mostly in a script ({script.lower()}) "
            f"that the embedder {choice.name} does not read"
        )
        choice = Choice(None, notices=choice.notices)

    if choice.name is not None and not choice.backend:
        # an in-process embedder: in one database worker, the full-text search while another
        # thread embeds the message (MiniLM in onnxruntime keeps to one core), then the items
        # still without a vector and the search by meaning
        if given is not None and given.embedder != choice.name:
            given = None
        here: Recall = await db.run(
            _recall_here,
            db,
            retriever,
            choice,
            user,
            message,
            what,
            notices,
            given,
            messages,
            settings,
        )
        return here

    vector: Sequence[float] | None = None
    if choice.name is not None and not await db.run(retriever.store.any_retrievable, user):
        choice = Choice(None, notices=choice.notices)  # nothing to compare: no embedder call
    if choice.name is not None:
        try:
            if queue is None:  # a command: no engine, its own queue
                vectors = await embed_with_backend(settings, choice, [message], query=True)
            else:
                vectors = await embed(
                    choice,
                    [message],
                    query=True,
                    queue=queue,
                    trace=trace,
                    priority=FOREGROUND if priority is None else priority,
                    what=f"{what}: the message",
                )
            vector = vectors.vectors[0]
            notices.extend(vectors.notices)
        except EmbedderError as exc:
            log.warning("%s: no meaning search this time (%s); full text only", what, exc)
            notices.append(f"{what}: by words only, the embedder failed: {exc}")
    found: Recall = await db.run(
        _search, db, retriever, choice, vector, user, message, what, notices, None, messages
    )
    return found


def start_recall(
    db: Any, settings: Any, user: str, message: str, *, what: str, messages: Heed | None = None
) -> asyncio.Task[Recall] | None:
    """Start :func:`recall` for a turn's message now, when it needs no model call (the
    in-process embedder, or none): the engine starts it with the turn, so the message's
    vector and the search by words and meaning run while the router's call is out, and the
    enricher, after the router, finds them done (with 200 ms per model call; with calls
    answered at once, on two cores, the search competes with the turn's own work and gains
    little). ``None`` with a backend embedder, whose call goes through the model queue behind
    the router's, as the enricher asks it. The task raises what :func:`recall` raises."""
    if choose(settings, message).backend:
        return None
    return asyncio.ensure_future(recall(db, settings, user, message, what=what, messages=messages))


def _recall_here(
    db: Any,
    retriever: Retriever,
    choice: Choice,
    user: str,
    message: str,
    what: str,
    notices: list[str],
    given: Vectors | None = None,
    messages: Heed | None = None,
    settings: Any = None,
) -> Recall:
    """Blocking, in a database worker: :func:`recall` with an in-process embedder. Without
    ``given``, the message is embedded in another thread while this one runs the full-text
    search: onnxruntime's pass keeps to one core, SQLite's search to another."""
    assert choice.name is not None
    if not retriever.store.any_retrievable(user):
        # no item to compare the message with: its vector would be computed for nothing (on a
        # new user's turns, the pass of the embedder was most of the enricher's wait)
        return _search(db, retriever, choice, None, user, message, what, notices, None, messages)
    pending = (
        None
        if given is not None
        else _embedding_threads().submit(
            embed_local, choice.name, [message], query=True, what=f"{what}: the message"
        )
    )
    words = retriever.by_words(user, message)
    vector: Sequence[float] | None = None
    try:
        vectors = given if pending is None else pending.result()
        assert vectors is not None
        vector = vectors.vectors[0]
        caught = [] if settings is None else catch_up_now(db, user, settings, what=what)
        notices = [*notices, *vectors.notices, *caught]
    except EmbedderError as exc:
        log.warning("%s: no meaning search this time (%s); full text only", what, exc)
        notices = [*notices, f"{what}: by words only, the embedder failed: {exc}"]
    return _search(db, retriever, choice, vector, user, message, what, notices, words, messages)


_threads: ThreadPoolExecutor | None = None
_threads_lock = threading.Lock()


def _embedding_threads() -> ThreadPoolExecutor:
    """The threads a search embeds its message in (two: concurrent turns of a server)."""
    global _threads
    with _threads_lock:
        if _threads is None:
            _threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="novaberg-embed")
        return _threads


def _search(
    db: Any,
    retriever: Retriever,
    choice: Choice,
    vector: Sequence[float] | None,
    user: str,
    message: str,
    what: str,
    notices: list[str],
    words: list[Candidate] | None = None,
    messages: Heed | None = None,
) -> Recall:
    """Blocking: retrieve by words, and by meaning when there is a vector, then the stored
    messages (``messages``) by their words. ``words``: the full-text candidates, when the
    caller searched already."""
    if vector is None or choice.name is None:
        found = Recall(retriever.retrieve(user, message, words=words), None, notices)
        return _heed(retriever, found, user, message, messages)
    index = vector_index(db)
    said = [f"{what}: {index.notice}"] if index.notice else []
    meaning = Meaning(choice.name, vector, index, choice.min_similarity)
    try:
        items = retriever.retrieve(user, message, meaning=meaning, words=words)
        found = Recall(items, choice.name, [*notices, *said])
    except VectorDimensionError as exc:  # the message names novaberg memory reindex
        by_words = retriever.retrieve(user, message, words=words)
        found = Recall(by_words, None, [*notices, *said, f"{what}: by words only: {exc}"])
    return _heed(retriever, found, user, message, messages)


def _heed(
    retriever: Retriever, found: Recall, user: str, message: str, messages: Heed | None
) -> Recall:
    """Blocking: ``found`` with the stored messages ``messages`` asks for."""
    if messages is None or messages.limit <= 0:
        return found
    skip: list[int] = []
    if messages.conversation is not None and messages.skip_newest > 0:
        skip = retriever.store.newest_messages(messages.conversation, messages.skip_newest)
    heard = retriever.heard(user, message, messages.limit, skip=skip, items=found.items)
    return replace(found, heard=heard)


CATCH_UP = 16
"""Items without a vector that one retrieval embeds first, newest first."""


async def catch_up(db: Any, user: str, settings: Any, *, what: str) -> list[str]:
    """:func:`catch_up_now` in a database worker."""
    result: list[str] = await db.run(catch_up_now, db, user, settings, what=what)
    return result


def catch_up_now(db: Any, user: str, settings: Any, *, what: str) -> list[str]:
    """Blocking: give the user's newest items that lack a vector of their in-process
    embedder (:func:`~novaberg.memory.embedding.choose` for each item's text) one (at most
    :data:`CATCH_UP`): the short-term item of the last turn (memory jobs embed only the
    facts they write, and may be off), items kept while the embedder was missing. A failure
    leaves them for next time, with a notice."""

    def wanted(text: str) -> str:
        return choose(settings, text).name or ""

    todo = MemoryStore(db).unembedded(user, wanted, CATCH_UP)
    notices: list[str] = []
    for name, items in todo.items():
        if not name:
            continue
        try:
            vectors = embed_local(
                name, [text for _, text in items], query=False, what=f"{what}: memory items"
            )
        except EmbedderError as exc:
            notices.append(f"{what}: {len(items)} item(s) still without a vector ({exc})")
            continue
        try:
            index = vector_index(db)
            with db.transaction() as c:
                for (memory_id, _), vec in zip(items, vectors.vectors, strict=True):
                    index.upsert(c, memory_id, user, vectors.embedder, vec)
        except NovabergError as exc:  # an item forgotten meanwhile; vectors of another length
            log.warning("%s: item vectors not stored (%s)", what, type(exc).__name__)
            notices += [*vectors.notices, f"{what}: {len(items)} item vector(s) not stored: {exc}"]
            continue
        notices += vectors.notices
    return notices
