"""LoCoMo: does Nova find what was said in long real conversations, against textbook retrievers?

    python -m benchmarks.locomo [--data DIR] [--conversations 26,41] [--apart]
                                [--questions N] [--embedder minilm-l6-v2] [--out FILE]

LoCoMo (snap-research/locomo, ACL 2024) has long dated conversations of two people and
questions with the dialogue turns that answer them (``evidence``). Five of the ten are in
``../shared/data/locomo-dev/`` (CC BY-NC 4.0: read from there at run time, never copied into
the project; ``--data`` or ``NOVABERG_LOCOMO_DIR`` names another folder).

**Each turn as a memory item.** Every dialogue turn becomes one short-term item of the
conversation's own user (``"Caroline: I went to a support group yesterday."``, a shared photo's
caption after it), dated by its session, with importance 0.5 and a vector of the embedder,
through the real store (:meth:`MemoryStore.add`) and vector index (:class:`VectorIndex`) of a
SQLite file. All conversations go into one database, one user each, as on a server; with
``--apart`` each conversation gets a database of its own.

Retrievers, on the same items and questions in the same run:

- ``nova``: :func:`novaberg.memory.retrieval.recall`, the one entry of the enricher,
  ``memory search`` and ``GET /api/memory`` (called directly; the question's vector given, as in
  a turn), with the default settings but ``max_items`` 10 and no token budget;
- ``fulltext``: textbook Okapi BM25 (k1 1.5, b 0.75, rank_bm25's defaults) over the user's turns,
  words as :func:`query_terms` finds them (no prefixes, no stemming);
- ``vectors``: the embedder's nearest neighbours by cosine (``VectorIndex.nearest``);
- ``rrf``: reciprocal-rank fusion of the two, ``1 / (60 + rank)`` over their first 100 each;
- ``history``: the second way in. The same conversation as Nova's conversation history of
  another user (each session a conversation, each pair of turns a finished turn: the first
  speaker's as the user's message, the second's as Nova's, dated by the session; no memory
  items), searched by :func:`recall`'s message signal (``Recall.heard``, words only), as
  ``memory search`` does for a conversation that salience did not keep.

Scored per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop) and over 1–4;
category 5 (adversarial: the answer is not in the conversation) is reported apart. ``recall@k``:
the share of a question's evidence turns among the first k, averaged over questions;
``hit@k``: at least one of them is; ``session_hit@5``: one of the first five turns is from a
session that holds evidence. ``p50_ms``/``p95_ms``: per question, the question's vector apart
(``query_vector_p50_ms``). Writes ``bench-results/locomo.json`` and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.meaning import item_vectors
from novaberg.config import Settings
from novaberg.embedders import get_embedder
from novaberg.memory.embedding import Vectors
from novaberg.memory.retrieval import Heed, query_terms, recall, vector_index
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev"
KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RETRIEVERS = ("nova", "fulltext", "vectors", "rrf", "history")
_DIA = re.compile(r"D(\d+):(\d+)")
_WORD = re.compile(r"\w+", re.UNICODE)


class LocomoDataError(Exception):
    """The data folder is missing or a file in it is not LoCoMo's shape (the message names it)."""


@dataclass(frozen=True)
class Turn:
    dia_id: str
    session: int
    date: str
    text: str


@dataclass(frozen=True)
class Question:
    conversation: str
    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    name: str
    turns: list[Turn]
    questions: list[Question]
    dropped_evidence: int
    """Evidence ids that name no turn of the conversation (left out of the scoring)."""


# -- the data ------------------------------------------------------------------------------------
def session_date(text: str) -> str:
    """``"1:56 pm on 8 May, 2023"`` as ISO 8601 in UTC."""
    stamp = datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    return stamp.isoformat(timespec="milliseconds")


def turn_text(raw: dict[str, Any]) -> str:
    text = f"{raw['speaker']}: {raw['text']}"
    caption = raw.get("blip_caption")
    return f"{text} (shares a photo: {caption})" if caption else text


def load_conversation(path: Path) -> Conversation:
    """One LoCoMo file; :class:`LocomoDataError` naming the file when it is malformed."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        turns = []
        for key in sorted((k for k in data if re.fullmatch(r"session_\d+", k)), key=_number):
            if not data[key]:
                continue
            date = session_date(data[f"{key}_date_time"])
            for raw in data[key]:
                turns.append(Turn(raw["dia_id"], _number(key), date, turn_text(raw)))
        known = {t.dia_id for t in turns}
        questions, dropped = [], 0
        for qa in data["qa"]:
            ids = [f"D{s}:{n}" for ref in qa["evidence"] for s, n in _DIA.findall(str(ref))]
            dropped += sum(i not in known for i in ids)
            evidence = tuple(dict.fromkeys(i for i in ids if i in known))
            if evidence:
                questions.append(Question(path.stem, qa["question"], int(qa["category"]), evidence))
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise LocomoDataError(
            f"{path}: not a LoCoMo conversation ({type(exc).__name__}: {exc})"
        ) from exc
    if not turns:
        raise LocomoDataError(f"{path}: not a LoCoMo conversation (no session with turns)")
    return Conversation(path.stem, turns, questions, dropped)


def _number(key: str) -> int:
    return int(key.split("_")[1])


def load(folder: Path, names: Sequence[str] | None = None) -> list[Conversation]:
    if not folder.is_dir():
        raise LocomoDataError(
            f"The LoCoMo data folder {folder} is not there: the benchmark reads the development "
            "set from ../shared/data/locomo-dev/ (or --data / NOVABERG_LOCOMO_DIR)."
        )
    files = sorted(folder.glob("*.json"))
    if names:
        files = [f for f in files if f.stem in names]
    if not files:
        raise LocomoDataError(f"{folder}: no conversation files (*.json) to read")
    return [load_conversation(f) for f in files]


# -- the textbook retrievers ---------------------------------------------------------------------
def tokens(text: str) -> list[str]:
    """Words as the query side sees them: :func:`query_terms`' filter, repeats kept."""
    allowed = set(query_terms(text, limit=10_000))
    return [w for w in _WORD.findall(text.lower()) if w in allowed]


class BM25:
    """Okapi BM25 over one user's items (rank_bm25's BM25Okapi: k1 1.5, b 0.75, idf floor)."""

    def __init__(self, ids: list[int], texts: list[str], k1: float = 1.5, b: float = 0.75):
        self.ids, self.k1, self.b = ids, k1, b
        self.docs = [Counter(tokens(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 0.0
        df: Counter[str] = Counter()
        for d in self.docs:
            df.update(d.keys())
        n = len(self.docs)
        idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
        floor = 0.25 * (sum(idf.values()) / len(idf)) if idf else 0.0
        self.idf = {w: v if v >= 0 else floor for w, v in idf.items()}

    def rank(self, question: str, k: int) -> list[int]:
        scores = np.zeros(len(self.docs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / max(self.avg, 1e-9))
        for w in set(query_terms(question, limit=10_000)):
            if w not in self.idf:
                continue
            tf = np.array([d.get(w, 0) for d in self.docs], dtype=np.float64)
            scores += self.idf[w] * tf * (self.k1 + 1) / (tf + norm)
        order = np.argsort(-scores, kind="stable")[:k]
        return [self.ids[i] for i in order if scores[i] > 0]


def rrf(lists: Sequence[Sequence[int]], k: int = 60, limit: int = 10) -> list[int]:
    score: dict[int, float] = {}
    for ranked in lists:
        for n, memory_id in enumerate(ranked, 1):
            score[memory_id] = score.get(memory_id, 0.0) + 1 / (k + n)
    return sorted(score, key=lambda i: (-score[i], i))[:limit]


# -- the run -------------------------------------------------------------------------------------
@contextlib.contextmanager
def fresh_database() -> Iterator[Database]:
    with tempfile.TemporaryDirectory(prefix="novaberg-locomo-") as folder:
        db = Database(Path(folder) / "locomo.db")
        try:
            yield db
        finally:
            db.close()


def user_of(conversation: Conversation) -> str:
    return f"locomo-{conversation.name}"


def store(
    db: Database, conversation: Conversation, embedder: str, vectors: np.ndarray
) -> dict[int, Turn]:
    """The turns as short-term items of the conversation's user, with their vectors."""
    user, index, by_id = user_of(conversation), vector_index(db), {}
    with db.transaction() as c:
        for turn, vec in zip(conversation.turns, vectors, strict=True):
            added = MemoryStore.add(
                c, user, "short_term", turn.text, 0.5, f"locomo:{turn.dia_id}", valid_from=turn.date
            )
            index.upsert(c, added.id, user, embedder, vec.tolist())
            by_id[added.id] = turn
    return by_id


def history_user_of(conversation: Conversation) -> str:
    return f"locomo-history-{conversation.name}"


def store_history(db: Database, conversation: Conversation) -> dict[int, Turn]:
    """The second way in: the conversation as Nova's conversation history of a user of its own
    (no memory items): each session one conversation, each pair of turns one finished turn
    (the first speaker's as the user's message, the second's as Nova's), dated by its
    session. Returns the messages' turns by message id."""
    user, by_id = history_user_of(conversation), {}
    sessions: dict[int, list[Turn]] = {}
    for turn in conversation.turns:
        sessions.setdefault(turn.session, []).append(turn)
    with db.transaction() as c:
        for turns in sessions.values():
            date = turns[0].date
            chat = c.execute(
                "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
                (user, date),
            ).rows[0]["id"]
            for n in range(0, len(turns), 2):
                pair = turns[n : n + 2]
                said = c.execute(
                    "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
                    "finished_at) VALUES (?, 'user', ?, 'done', ?, ?) RETURNING id",
                    (chat, pair[0].text, date, date),
                ).rows[0]["id"]
                for role, turn in zip(("user", "assistant"), pair, strict=False):
                    message = c.execute(
                        "INSERT INTO messages (conversation_id, turn_id, role, content, "
                        "created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
                        (chat, said, role, turn.text, date),
                    ).rows[0]["id"]
                    by_id[int(message)] = turn
    return by_id


@dataclass
class Ranked:
    """One retriever's answer to one question."""

    retriever: str
    question: Question
    dia_ids: list[str]
    sessions: list[int]
    ms: float


def score(rows: list[Ranked]) -> dict[str, Any]:
    out: dict[str, Any] = {"questions": len(rows)}
    if not rows:
        return out
    for k in KS:
        found = [len(set(r.dia_ids[:k]) & set(r.question.evidence)) for r in rows]
        shares = [n / len(r.question.evidence) for n, r in zip(found, rows, strict=True)]
        out[f"recall@{k}"] = round(statistics.mean(shares), 3)
        out[f"hit@{k}"] = round(statistics.mean(float(n > 0) for n in found), 3)
    out["session_hit@5"] = round(
        statistics.mean(float(bool(set(r.sessions[:5]) & _sessions(r.question))) for r in rows), 3
    )
    times = sorted(r.ms for r in rows)
    out["p50_ms"] = round(times[len(times) // 2], 2)
    out["p95_ms"] = round(times[min(len(times) - 1, int(0.95 * len(times)))], 2)
    return out


def _sessions(question: Question) -> set[int]:
    return {int(_DIA.findall(e)[0][0]) for e in question.evidence}


def report(rows: list[Ranked]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in RETRIEVERS:
        mine = [r for r in rows if r.retriever == name]
        if not mine:
            continue
        part: dict[str, Any] = {"1-4": score([r for r in mine if r.question.category != 5])}
        for cat in CATEGORIES:
            part[str(cat)] = score([r for r in mine if r.question.category == cat])
        out[name] = part
    return out


async def ask_all(
    db: Database,
    settings: Settings,
    conversations: list[Conversation],
    by_id: dict[int, Turn],
    qvecs: dict[str, np.ndarray],
    embedder: str,
    bm25: dict[str, BM25],
    by_message: dict[int, Turn],
) -> list[Ranked]:
    index = vector_index(db)
    rows: list[Ranked] = []

    def ranked(name: str, q: Question, ids: list[int], ms: float) -> None:
        turns = [(by_message if name == "history" else by_id)[i] for i in ids]
        rows.append(Ranked(name, q, [t.dia_id for t in turns], [t.session for t in turns], ms))

    for conv in conversations:
        user = user_of(conv)
        for n, q in enumerate(conv.questions):
            vec = qvecs[conv.name][n]
            given = Vectors(embedder, [vec.tolist()])
            t0 = time.perf_counter()
            found = await recall(
                db, settings, user, q.text, max_items=10, budget_tokens=10**9, given=given
            )
            ranked("nova", q, [r.item.id for r in found.items], _ms(t0))
            t0 = time.perf_counter()
            words = bm25[user].rank(q.text, 100)
            words_ms = _ms(t0)
            ranked("fulltext", q, words[:10], words_ms)
            t0 = time.perf_counter()
            near = [i for i, _ in await db.run(index.nearest, user, embedder, vec, 100)]
            near_ms = _ms(t0)
            ranked("vectors", q, near[:10], near_ms)
            t0 = time.perf_counter()
            fused = rrf([words, near])
            ranked("rrf", q, fused, words_ms + near_ms + _ms(t0))  # both searches and the fusion
            t0 = time.perf_counter()
            heard = await recall(
                db, settings, history_user_of(conv), q.text, given=given, messages=Heed(10)
            )
            ranked("history", q, [h.message.message_id for h in heard.heard], _ms(t0))
    return rows


def _ms(t0: float) -> float:
    return 1000 * (time.perf_counter() - t0)


def run_group(
    conversations: list[Conversation], embedder: str, item_vecs: Callable[[list[str]], np.ndarray]
) -> tuple[list[Ranked], dict[str, Any]]:
    """Store the conversations in one fresh database and ask every question of each."""
    settings = Settings(language="en", memory={"embedder": embedder})
    model = get_embedder(embedder)
    with fresh_database() as db:
        by_id: dict[int, Turn] = {}
        by_message: dict[int, Turn] = {}
        bm25: dict[str, BM25] = {}
        qvecs: dict[str, np.ndarray] = {}
        t0 = time.perf_counter()
        for conv in conversations:
            vecs = item_vecs([t.text for t in conv.turns])
            mine = store(db, conv, embedder, vecs)
            by_id.update(mine)
            bm25[user_of(conv)] = BM25(list(mine), [t.text for t in mine.values()])
            by_message.update(store_history(db, conv))
        store_s = time.perf_counter() - t0
        singles = []
        for conv in conversations:
            texts = [q.text for q in conv.questions]
            qvecs[conv.name] = model.embed(texts, query=True).array.astype(np.float32)
            for text in texts[:20]:
                t0 = time.perf_counter()
                model.embed([text], query=True)
                singles.append(_ms(t0))
        rows = asyncio.run(
            ask_all(db, settings, conversations, by_id, qvecs, embedder, bm25, by_message)
        )
    return rows, {
        "store_s": round(store_s, 1),
        "query_vector_p50_ms": round(statistics.median(singles), 2),
    }


def run(
    folder: Path,
    names: Sequence[str] | None = None,
    *,
    apart: bool = False,
    questions: int | None = None,
    embedder: str = "minilm-l6-v2",
) -> dict[str, Any]:
    conversations = load(folder, names)
    if questions is not None:
        conversations = [
            Conversation(c.name, c.turns, c.questions[:questions], c.dropped_evidence)
            for c in conversations
        ]

    def vecs(texts: list[str]) -> np.ndarray:
        return np.asarray(item_vectors(embedder, texts)[0], dtype=np.float32)

    groups = [[c] for c in conversations] if apart else [conversations]
    rows: list[Ranked] = []
    costs = []
    for group in groups:
        got, cost = run_group(group, embedder, vecs)
        rows.extend(got)
        costs.append(cost)
    return {
        "data": str(folder),
        "conversations": [c.name for c in conversations],
        "together": not apart,
        "embedder": embedder,
        "turns": sum(len(c.turns) for c in conversations),
        "questions": Counter(str(q.category) for c in conversations for q in c.questions),
        "evidence_ids_naming_no_turn": sum(c.dropped_evidence for c in conversations),
        "store_s": round(sum(c["store_s"] for c in costs), 1),
        "query_vector_p50_ms": costs[0]["query_vector_p50_ms"],
        "cpus": os.cpu_count(),
        "results": report(rows),
    }


def table(result: dict[str, Any]) -> str:
    cols = ["recall@1", "recall@5", "recall@10", "hit@1", "hit@5", "hit@10", "session_hit@5"]
    lines = [
        "| retriever | category | questions | " + " | ".join(cols) + " | p50 ms | p95 ms |",
        "|---|---|---" + "|---" * (len(cols) + 2) + "|",
    ]
    for name, parts in result["results"].items():
        for cat in ("1-4", "1", "2", "3", "4", "5"):
            s = parts[cat]
            if not s["questions"]:
                continue
            label = "**1–4**" if cat == "1-4" else f"{cat} {CATEGORIES[int(cat)]}"
            values = " | ".join(f"{s[c]:.3f}" for c in cols)
            times = f"{s['p50_ms']} | {s['p95_ms']}"
            lines.append(f"| {name} | {label} | {s['questions']} | {values} | {times} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    default = Path(os.environ.get("NOVABERG_LOCOMO_DIR", DATA))
    parser.add_argument("--data", type=Path, default=default)
    parser.add_argument("--conversations", default="", help="comma-separated names (file stems)")
    parser.add_argument("--apart", action="store_true", help="a database per conversation")
    parser.add_argument("--questions", type=int, default=None, help="the first N of each")
    parser.add_argument("--embedder", default="minilm-l6-v2")
    parser.add_argument("--out", type=Path, default=Path("bench-results/locomo.json"))
    args = parser.parse_args()
    names = [n for n in args.conversations.split(",") if n] or None
    try:
        result = run(
            args.data, names, apart=args.apart, questions=args.questions, embedder=args.embedder
        )
    except LocomoDataError as exc:
        raise SystemExit(f"benchmarks.locomo: {exc}") from None
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "results"}, indent=2))
    print(table(result))


if __name__ == "__main__":
    main()
