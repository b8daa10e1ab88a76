"""Retrieval for the enricher: recency + importance + relevance, packed into a token budget.

As in Generative Agents, each candidate's score is a weighted sum of three parts in [0, 1]:

- recency: ``0.5 ** (age_days / half_life)``, where the half-life is ``half_life_days`` (14)
  for short-term items and ``fact_half_life_days`` (180) for long-term facts and events: a
  mood fades in weeks, "my sister's name is Clara" does not (a fact ends by being superseded);
- importance: the salience score the item was stored with;
- relevance: full-text rank (BM25 on SQLite FTS5, ``ts_rank_cd`` on PostgreSQL) divided by the
  best rank among the candidates, or the cosine similarity of the message's and the item's
  embeddings where both exist (the larger of the two).

Candidates are the user's newest full-text matches (200), their best-ranked matching facts and
events however old (50), and their newest items (10); superseded facts (``valid_to`` set) and
short-term items already covered by a fact are never candidates. An item
with no relevance is kept only if it is both recent and important. Every returned item says
why it was chosen; the enricher puts those reasons into the turn's trace.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from novaberg.memory.store import Candidate, MemoryItem, MemoryStore

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
"""
STOPWORDS = frozenset(_STOPWORDS.split())
_WORD = re.compile(r"\w+", re.UNICODE)


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


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b) or not a:
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return max(0.0, dot / norm) if norm else 0.0


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


@dataclass
class Retriever:
    store: MemoryStore
    budget_tokens: int = 400
    max_items: int = 8
    half_life_days: float = 14.0
    fact_half_life_days: float = 180.0
    fulltext_newest: int = 200
    fulltext_ranked: int = 50
    recent_candidates: int = 10
    weights: Weights = Weights()

    def retrieve(
        self,
        user: str,
        message: str,
        *,
        at: datetime | None = None,
        query_vector: Sequence[float] | None = None,
        vector_model: str | None = None,
    ) -> list[Retrieved]:
        at = at or datetime.now(UTC)
        terms = query_terms(message)
        candidates = {
            c.id: c
            for c in self.store.fulltext(user, terms, self.fulltext_newest, self.fulltext_ranked)
        }
        top = max((c.rel for c in candidates.values()), default=0.0)
        lexical = {i: (c.rel / top if top > 0 else 0.0) for i, c in candidates.items()}
        for c in self.store.recent(user, self.recent_candidates):
            candidates.setdefault(c.id, c)
        vectors = (
            self.store.vectors(candidates, vector_model)
            if query_vector is not None and vector_model
            else {}
        )
        scored = []
        w = self.weights
        for c in candidates.values():
            semantic = (
                cosine(query_vector, vectors[c.id])
                if query_vector is not None and c.id in vectors
                else 0.0
            )
            relevance = max(lexical.get(c.id, 0.0), semantic)
            recency = self._recency(c, at)
            if relevance == 0.0 and recency * c.importance < 0.6:
                continue  # neither about this message nor fresh and important
            score = w.recency * recency + w.importance * c.importance + w.relevance * relevance
            scored.append((score, c, recency, relevance, semantic))
        scored.sort(key=lambda s: (-s[0], -s[1].id))
        chosen = self._pack([(s[1].id, estimate_tokens(s[1].chars)) for s in scored])
        items = self.store.by_ids(user, chosen)
        return [
            Retrieved(
                items[c.id],
                score,
                recency,
                c.importance,
                relevance,
                estimate_tokens(c.chars),
                _reason(items[c.id], terms, lexical.get(c.id, 0.0), semantic, recency, at),
            )
            for score, c, recency, relevance, semantic in scored
            if c.id in chosen and c.id in items
        ]

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


def _reason(
    item: MemoryItem,
    terms: list[str],
    lexical: float,
    semantic: float,
    recency: float,
    at: datetime,
) -> str:
    parts = []
    if lexical > 0:
        words = [t for t in terms if t in item.text.lower()]
        shown = ", ".join(f"'{w}'" for w in words[:4]) or "a word stem"
        parts.append(f"matches {shown} (text rank {lexical:.2f})")
    if semantic > 0:
        parts.append(f"similar in meaning ({semantic:.2f})")
    age = (at - datetime.fromisoformat(item.valid_from)).total_seconds() / 86400
    parts.append(f"{_age(age)} old (recency {recency:.2f})")
    parts.append(f"importance {item.importance:.2f}")
    label = {"long_term": "fact", "short_term": "recent item", "event": "timeline event"}
    return f"{label.get(item.kind, item.kind)}: " + "; ".join(parts)


def _age(days: float) -> str:
    if days < 1 / 24:
        return "under an hour"
    if days < 1:
        return f"{days * 24:.0f} h"
    return f"{days:.0f} d"
