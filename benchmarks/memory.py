"""Memory benchmarks: retrieval latency at 10k/100k items, retrieval quality without an LLM,
database growth per 1,000 turns, each on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.environment import environment
from novaberg.memory.retrieval import Retriever
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database

USER = "bench"
NAMES = [
    "Lena",
    "Mila",
    "Jonas",
    "Aylin",
    "Emre",
    "Sofia",
    "Noah",
    "Clara",
    "Timo",
    "Elif",
    "Yusuf",
    "Greta",
    "Ben",
    "Lara",
    "Deniz",
]
CITIES = [
    "Lisbon",
    "Porto",
    "Hamburg",
    "Izmir",
    "Vienna",
    "Oslo",
    "Ghent",
    "Turin",
    "Krakow",
    "Bergen",
    "Leeds",
    "Riga",
]
JOBS = [
    "nurse",
    "baker",
    "pilot",
    "teacher",
    "welder",
    "lawyer",
    "chemist",
    "plumber",
    "architect",
    "florist",
]
HOBBIES = [
    "chess",
    "climbing",
    "pottery",
    "rowing",
    "knitting",
    "birding",
    "fencing",
    "origami",
    "salsa",
    "archery",
]
RELATIONS = [
    "sister", "brother", "mother", "father", "grandmother", "cousin", "neighbour", "boss",
    "dentist", "doctor", "colleague", "roommate", "landlord", "therapist", "coach", "uncle",
]  # fmt: skip
ACTIVITIES = [
    "had coffee with", "argued with", "called", "visited", "wrote a letter to",
    "went for a walk with", "cooked dinner for", "was worried about", "laughed with",
    "bought a present for",
]  # fmt: skip
ATTRIBUTES = {
    "name": ("The user's {rel}'s name is {name}.", "What is my {rel}'s name again?", NAMES),
    "city": ("The user's {rel} lives in {city}.", "Where does my {rel} live?", CITIES),
    "job": ("The user's {rel} works as a {job}.", "What does my {rel} work as?", JOBS),
    "hobby": (
        "The user's {rel} loves {hobby} as a hobby.", "Which hobby does my {rel} love?", HOBBIES,
    ),
}  # fmt: skip
SLOT = {"name": "name", "city": "city", "job": "job", "hobby": "hobby"}


@contextlib.contextmanager
def postgres_url() -> Iterator[str]:
    """A fresh database on NOVABERG_TEST_DATABASE_URL's server, or on a throwaway server."""
    from novaberg.testing.postgres import TemporaryPostgres, create_database, drop_database

    server_url = os.environ.get("NOVABERG_TEST_DATABASE_URL")
    server = None
    folder = None
    if not server_url:
        folder = Path(tempfile.mkdtemp(prefix="novaberg-bench-pg-"))
        server = TemporaryPostgres(folder)
        server_url = server.start()
    url = create_database(server_url)
    try:
        yield url
    finally:
        drop_database(server_url, url)
        if server is not None:
            server.stop()
        if folder is not None:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def database(kind: str) -> Iterator[Database]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="novaberg-bench-") as folder:
            db = Database(Path(folder) / "bench.db")
            try:
                yield db
            finally:
                db.close()
    else:
        with postgres_url() as url:
            db = Database(url)
            try:
                yield db
            finally:
                db.close()


def _stamp(day: float, base: datetime) -> str:
    return (base + timedelta(days=day)).isoformat(timespec="milliseconds")


def _bulk(db: Database, rows: list[tuple[Any, ...]]) -> list[int]:
    """Insert ``(kind, text, importance, key, valid_from, happens_on)`` rows; return ids."""
    ids = []
    with db.transaction() as c:
        for kind, text, importance, key, valid_from, happens_on in rows:
            ids.append(
                MemoryStore.add(
                    c, USER, kind, text, importance, key,
                    valid_from=valid_from, happens_on=happens_on,
                ).id
            )  # fmt: skip
    return ids


NEAR_MISSES = [
    "The user's {rel} wants to live somewhere warmer one day",
    "The user forgot the name of their {rel}'s cat",
    "The user's {rel} said work as a {job} sounds tiring",
    "The user's {rel} tried a new hobby and hated it",
    "The user and their {rel} talked about where friends live",
]  # fmt: skip


def _noise(rng: random.Random, n: int, base: datetime, span_days: float) -> list[tuple[Any, ...]]:
    """Salient-looking items about the same people; a third are near misses that share the
    questions' words (live, name, work, hobby) without answering them."""
    rows = []
    for i in range(n):
        rel = rng.choice(RELATIONS)
        if rng.random() < 1 / 3:
            text = rng.choice(NEAR_MISSES).format(rel=rel, job=rng.choice(JOBS)) + f" ({i})."
        else:
            text = (
                f"The user {rng.choice(ACTIVITIES)} their {rel} {rng.choice(NAMES)} "
                f"near {rng.choice(CITIES)} after {rng.choice(HOBBIES)} ({i})."
            )
        day = rng.uniform(0, span_days)
        rows.append(
            ("short_term", text, rng.uniform(0.5, 0.9), f"noise:{i}", _stamp(day, base), None)
        )
    return rows


# -- retrieval latency --------------------------------------------------------------------------
def questions_about(rng: random.Random, count: int) -> list[str]:
    """``count`` questions about the noise's people and attributes."""
    return [
        spec[1].format(rel=rng.choice(RELATIONS))
        for spec in rng.choices(list(ATTRIBUTES.values()), k=count)
    ]


def retrieval_latency(
    sizes: tuple[int, ...], queries: int, kinds: tuple[str, ...]
) -> dict[str, Any]:
    rng = random.Random(7)
    base = datetime.now(UTC) - timedelta(days=400)
    questions = questions_about(rng, queries)
    out: dict[str, Any] = {}
    for kind in kinds:
        with database(kind) as db:
            store = MemoryStore(db)
            have = 0
            for size in sorted(sizes):
                rows = _noise(rng, size - have, base, 400)
                rows = [(k, t, i, f"{key}:{size}", v, h) for k, t, i, key, v, h in rows]
                for start in range(0, len(rows), 10_000):
                    _bulk(db, rows[start : start + 10_000])
                have = size
                if kind == "postgres":
                    db.conn.execute("ANALYZE memories")
                retriever = Retriever(store)
                for q in questions[:10]:
                    retriever.retrieve(USER, q)  # warm caches
                times = []
                for q in questions:
                    started = time.perf_counter()
                    retriever.retrieve(USER, q)
                    times.append((time.perf_counter() - started) * 1000)
                times.sort()
                out[f"{kind}_{size}"] = {
                    "p50_ms": round(statistics.median(times), 2),
                    "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
                    "max_ms": round(times[-1], 2),
                    "queries": len(times),
                }
                print(f"retrieval {kind} {size}: {out[f'{kind}_{size}']}", flush=True)
    out["goal"] = "p95 < 20 ms at 100k on SQLite (mem0: 200 ms p95)"
    return out


# -- retrieval quality --------------------------------------------------------------------------
def _world(rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Planted facts (some updated later) and dated events, with a question for each."""
    facts = []
    for rel in RELATIONS:
        for attribute, (template, question, values) in ATTRIBUTES.items():
            first, second = rng.sample(values, 2)
            facts.append(
                {
                    "rel": rel,
                    "attribute": attribute,
                    "text": template.format(rel=rel, **{SLOT[attribute]: first}),
                    "update": template.format(rel=rel, **{SLOT[attribute]: second}).replace(
                        f"The user's {rel}", f"Now the user's {rel}"
                    )
                    if rng.random() < 0.3
                    else None,
                    "question": question.format(rel=rel),
                }
            )
    events = []
    for n, what in enumerate(
        ["dentist appointment", "job interview", "flight to Oslo", "driving test",
         "piano recital", "wedding anniversary", "visa appointment", "marathon"]
    ):  # fmt: skip
        events.append(
            {
                "text": f"The user has a {what}.",
                "question": f"When is my {what}?",
                "happens_on": (datetime.now(UTC) + timedelta(days=n + 3)).date().isoformat(),
            }
        )
    return facts, events


def quality(kind: str, noise: int = 2000) -> dict[str, Any]:
    rng = random.Random(11)
    facts, events = _world(rng)
    base = datetime.now(UTC) - timedelta(days=120)
    results: dict[str, Any] = {}
    for marked in (True, False):
        with database(kind) as db:
            store = MemoryStore(db)
            _bulk(db, _noise(rng, noise, base, 120))
            rows = [
                ("long_term", f["text"], 0.8, f"fact:{i}", _stamp(rng.uniform(0, 60), base), None)
                for i, f in enumerate(facts)
            ]
            fact_ids = _bulk(db, rows)
            updates = {}
            for i, f in enumerate(facts):
                if f["update"]:
                    [new] = _bulk(
                        db,
                        [
                            (
                                "long_term",
                                f["update"],
                                0.8,
                                f"update:{i}",
                                _stamp(rng.uniform(70, 110), base),
                                None,
                            )
                        ],
                    )
                    updates[i] = new
                    if marked:
                        with db.transaction() as c:
                            MemoryStore.supersede(c, fact_ids[i], new)
            event_ids = _bulk(
                db,
                [
                    (
                        "event",
                        e["text"],
                        0.7,
                        f"event:{n}",
                        _stamp(rng.uniform(60, 100), base),
                        e["happens_on"],
                    )
                    for n, e in enumerate(events)
                ],
            )
            retriever = Retriever(store)
            hits = total = current_first = updated = 0
            tokens = []
            for i, f in enumerate(facts):
                found = retriever.retrieve(USER, f["question"])
                tokens.append(sum(r.tokens for r in found))
                ranked = [r.item.id for r in found]
                if i in updates:
                    updated += 1
                    new, old = updates[i], fact_ids[i]
                    if new in ranked[:5] and (
                        old not in ranked or ranked.index(new) < ranked.index(old)
                    ):
                        current_first += 1
                else:
                    total += 1
                    hits += fact_ids[i] in ranked[:5]
            event_hits = 0
            for e, eid in zip(events, event_ids, strict=True):
                found = retriever.retrieve(USER, e["question"])
                tokens.append(sum(r.tokens for r in found))
                event_hits += eid in [r.item.id for r in found][:5]
            label = "superseded_marked" if marked else "superseded_unmarked"
            results[label] = {
                "recall_at_5_plain_facts": round(hits / total, 3),
                "plain_facts": total,
                "current_above_superseded": round(current_first / updated, 3),
                "updated_facts": updated,
                "recall_at_5_events": round(event_hits / len(events), 3),
                "tokens_per_query_mean": round(statistics.mean(tokens), 1),
                "tokens_per_query_max": max(tokens),
                "noise_items": noise,
            }
            print(f"quality {kind} {label}: {results[label]}", flush=True)
    results["goal"] = "recall@5 >= 0.9, current above superseded >= 0.95, tokens/query < 1500"
    return results


# -- database growth ----------------------------------------------------------------------------
def _size(db: Database, path: Path | None) -> int:
    if path is not None:
        db.query("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(p.stat().st_size for p in path.parent.iterdir() if p.name.startswith(path.name))
    return int(db.scalar("SELECT pg_database_size(current_database()) AS n"))


def _tables(db: Database, path: Path | None) -> dict[str, int]:
    """Bytes per table and index: SQLite's ``dbstat`` pages, PostgreSQL's relation sizes."""
    if path is not None:
        rows = db.query("SELECT name, SUM(pgsize) AS n FROM dbstat GROUP BY name")
    else:
        rows = db.query(
            "SELECT c.relname AS name, pg_relation_size(c.oid) AS n FROM pg_class c "
            "JOIN pg_namespace s ON s.oid = c.relnamespace "
            "WHERE s.nspname = current_schema() AND c.relkind IN ('r', 'i', 't', 'm')"
        )
    return {str(r["name"]): int(r["n"] or 0) for r in rows}


def growth(kind: str, turns: int = 1000) -> dict[str, Any]:
    """Bytes per 1,000 turns through the real engine (test server, no delay), half of them
    salient, with every memory job run."""
    import json as _json
    import logging

    from novaberg.config import load_settings
    from novaberg.engine import Engine
    from novaberg.testing import OllamaTestServer, Reply

    with contextlib.ExitStack() as stack:
        home = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="novaberg-grow-")))
        url = stack.enter_context(postgres_url()) if kind == "postgres" else None
        server = stack.enter_context(OllamaTestServer())
        env = {
            "NOVABERG_HOME": str(home),
            "OLLAMA_HOST": server.url,
            "NOVABERG_BACKEND": "ollama",
            "NOVABERG_TRIBUNAL__JUDGES": "",
        }
        if url:
            env["NOVABERG_DATABASE_URL"] = url
        logging.getLogger("novaberg").setLevel(logging.ERROR)  # the failed profile jobs
        stack.enter_context(environment(env))
        server.standing(
            "consolidate",
            Reply(
                content=_json.dumps(
                    {
                        "action": "new",
                        "fact": "The user mentioned a new detail about their week.",
                    }
                )
            ),
        )
        server.standing("profile_adaptive", Reply(content=_json.dumps({"statements": []})))
        server.standing("profile_core", Reply(content=_json.dumps({"statements": []})))

        async def run() -> dict[str, Any]:
            engine = await Engine.open(load_settings().settings)
            path = None if url else engine.settings.db_path
            before = _size(engine.db, path)
            tables_before = _tables(engine.db, path)
            rng = random.Random(3)
            for n in range(turns):
                salient = n % 2 == 0
                summary = f"The user {rng.choice(ACTIVITIES)} their {rng.choice(RELATIONS)} ({n})."
                server.script(
                    "salience",
                    Reply(
                        content=_json.dumps(
                            {
                                "score": 0.9 if salient else 0.1,
                                "summary": summary if salient else "",
                            }
                        )
                    ),
                )
                await engine.run_turn(
                    f"I {rng.choice(ACTIVITIES)} my {rng.choice(RELATIONS)}, message {n}."
                )
                await engine.run_background()
            after = _size(engine.db, path)
            tables = _tables(engine.db, path)
            grown = {
                name: round((size - tables_before.get(name, 0)) * 1000 / turns / 1024)
                for name, size in tables.items()
            }
            items = engine.db.scalar("SELECT COUNT(*) AS n FROM memories")
            await engine.aclose()
            return {
                "bytes_per_1000_turns": round((after - before) * 1000 / turns),
                "mib_per_1000_turns": round((after - before) * 1000 / turns / 2**20, 2),
                "turns": turns,
                "salient_share": 0.5,
                "memory_rows": items,
                "kib_per_1000_turns_by_table": dict(
                    sorted(((k, v) for k, v in grown.items() if v), key=lambda kv: -kv[1])
                ),
            }

        result = asyncio.run(run())
    print(f"growth {kind}: {result}", flush=True)
    return result


KINDS = ("sqlite", "postgres")


def memory_quality() -> dict[str, Any]:
    return {f"{kind}_noise_{n}": quality(kind, n) for kind in KINDS for n in (2000, 20000)}


def memory_growth(turns: int) -> dict[str, Any]:
    return {kind: growth(kind, turns) for kind in KINDS}
