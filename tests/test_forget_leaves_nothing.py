"""``memory forget`` leaves nothing: after a plain salient turn, a thinker's last resort with its
self-triggered follow-up, failed memory jobs and a consolidation into a fact — each carrying a
distinctive word — forgetting the memories leaves the word in no column of any table (the
tables and columns read from the schema itself) and, on SQLite, in no byte of the database
files; the next turn sends none of it as history. Logs at WARNING and above never carry it.
On SQLite and on PostgreSQL, against the Ollama test server."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.forgetting import FORGET_MAP
from novaberg.testing import OllamaTestServer, Reply, SearxngTestServer
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.registry import ToolEnv

WORD = "Zanzibarquux"
CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


def salient(summary: str) -> Reply:
    return said({"score": 0.9, "summary": summary})


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_RETRIES__ATTEMPTS", "1")
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


def places_holding(db: Database, word: str) -> list[str]:
    """Every ``table.column`` whose value holds ``word`` (any case), the tables and columns
    read from the schema: every table of SQLite (the full-text shadow tables too), every
    column of every table of this PostgreSQL schema (tsvector and JSON cast to text)."""
    found = []
    needle = word.lower()
    if db.dialect == "sqlite":
        tables = [
            r["name"] for r in db.query("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        for table in tables:
            for row in db.query(f'SELECT * FROM "{table}"'):
                for column, value in row.items():
                    if isinstance(value, bytes):
                        hit = needle.encode() in value.lower()
                    else:
                        hit = needle in str(value).lower()
                    if hit:
                        found.append(f"{table}.{column}")
        return sorted(set(found))
    columns = db.query(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema() ORDER BY table_name, column_name"
    )
    for c in columns:
        n = db.scalar(
            f'SELECT COUNT(*) AS n FROM "{c["table_name"]}" '
            f'WHERE lower("{c["column_name"]}"::text) LIKE ?',
            (f"%{needle}%",),
        )
        if n:
            found.append(f"{c['table_name']}.{c['column_name']}")
    return found


def postgres_relation_files(db: Database) -> list[Path]:
    """The data files of every table of the schema, with their TOAST tables and every index
    (the full-text GIN index keeps its words as keys), after a checkpoint wrote them out.
    The tests' PostgreSQL is a local throwaway server, so its data directory is readable."""
    db.conn.execute("CHECKPOINT")
    data_dir = Path(str(db.scalar("SELECT setting FROM pg_settings WHERE name = 'data_directory'")))
    rows = db.query(
        "SELECT pg_relation_filepath(c.oid) AS path FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname IN (current_schema(), 'pg_toast') AND c.relkind IN ('r', 'i', 't') "
        "AND pg_relation_filepath(c.oid) IS NOT NULL"
    )
    files = [f for r in rows for f in data_dir.glob(f"{r['path']}*") if f.is_file()]
    assert files, f"no relation files found under {data_dir}"
    return files


async def test_forget_leaves_no_byte_of_the_text_anywhere(
    engine: Engine,
    server: OllamaTestServer,
    database_target: Path | str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryStore(engine.db)
    server.standing("profile_adaptive", said({"statements": []}))
    # (a) a plain salient turn …
    server.script("salience", salient(f"The user's parrot is called {WORD}."))
    first = await engine.run_turn(f"My parrot is called {WORD}.")
    conversation = first.conversation_id
    # … (d) consolidated into a fact, and the profile built on it
    server.script("consolidate", said({"action": "new", "fact": f"The user has a parrot, {WORD}."}))
    await engine.run_background(limit=1)
    [fact] = store.items("default", kind="long_term")
    server.script(
        "profile_adaptive",
        said({"statements": [{"text": f"Dotes on {WORD}.", "sources": [fact.id]}]}),
    )
    await engine.run_background()
    assert WORD in store.profile("default")["adaptive"].text

    # (b) the thinker's last resort: the draft stays, a second pass answers as a follow-up
    server.script("router", CHECK)
    server.script("responder", Reply(content=f"{WORD} needs a bigger cage."))
    server.script("thinker", Reply.thinking_swallowed_answer(f"Is {WORD} right? prose only"))
    server.script("thinker_nachfass", Reply(content="prose"), Reply(content="more prose"))
    server.script("salience", salient(f"The user worries about {WORD}'s cage."))
    server.script("responder", Reply(content=f"Second look: {WORD} is fine."))  # second pass
    last_resort = await engine.run_turn(
        f"Is {WORD}'s cage big enough?", conversation_id=conversation
    )
    assert last_resort.contract_json()["thinker"]["result"] == "last_resort"
    assert [f.reply for f in last_resort.followups] == [f"Second look: {WORD} is fine."]
    server.script("consolidate", said({"action": "same", "fact_id": fact.id, "fact": ""}))
    await engine.run_background()

    # (c) failed memory jobs whose model text (or a server's error) quotes the word
    server.script("salience", salient(f"The user takes {WORD} to the vet tomorrow."))
    await engine.run_turn(f"I take {WORD} to the vet tomorrow.", conversation_id=conversation)
    server.script("consolidate", Reply.http_error(500, f"invalid input: '{WORD} to the vet'"))
    server.script(
        "timeline",
        said({"events": [{"what": f"{WORD} at the vet", "when": f"when {WORD} sings"}]}),
    )
    with caplog.at_level(logging.WARNING):
        outcomes = await engine.run_background()
    failed = {o.type: o.result for o in outcomes if o.status == "failed"}
    assert {"consolidate", "timeline"} <= failed.keys()
    assert all(WORD.lower() not in reason.lower() for reason in failed.values())
    job_lines = [r.getMessage() for r in caplog.records if r.module == "jobs"]
    assert len(job_lines) >= 2
    assert all(WORD.lower() not in line.lower() for line in job_lines)  # no user/model text
    assert places_holding(engine.db, WORD)  # the word is there before forget …

    done = [
        store.forget("default", item.id)
        for item in store.items("default")
        if store.get("default", item.id) is not None
    ]
    assert done and all(d is not None for d in done)
    compacted = {d.files for d in done if d is not None}
    if isinstance(database_target, Path):
        assert compacted == {
            "freed pages overwritten, full-text index merged, write-ahead log emptied"
        }
    else:
        assert compacted == {"tables and their indexes rewritten"}

    leftovers = places_holding(engine.db, WORD)
    assert leftovers == [], f"after forget, {WORD} is still in {leftovers}"
    if isinstance(database_target, Path):
        files = sorted(database_target.parent.glob(f"{database_target.name}*"))
    else:
        files = postgres_relation_files(engine.db)
    raw = {str(p): p.read_bytes().lower() for p in files}
    assert WORD.lower().encode() not in b"".join(raw.values()), [
        name for name, data in raw.items() if WORD.lower().encode() in data
    ]

    # the next turn in that conversation sends none of the forgotten exchanges as history
    before = len(server.requests("/api/chat", caller="responder"))
    await engine.run_turn("How are you today?", conversation_id=conversation)
    [request] = server.requests("/api/chat", caller="responder")[before:]
    sent = json.dumps(request.body["messages"], ensure_ascii=False)
    assert WORD.lower() not in sent.lower()
    assert "forgotten" not in sent  # left out, not sent as a placeholder either
    history = engine.db.history(conversation, turns=20)
    assert history[0].content == "How are you today?"


async def test_a_later_reply_that_was_given_a_forgotten_item_is_erased_too(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    server.script("salience", salient(f"The user's parrot is called {WORD}."))
    first = await engine.run_turn(f"My parrot is called {WORD}.")
    server.standing("consolidate", said({"action": "new", "fact": ""}))  # fails: no fact
    server.standing("profile_adaptive", said({"statements": []}))
    await engine.run_background()
    server.script("responder", Reply(content=f"Of course: {WORD}!"))
    later = await engine.run_turn(
        f"What is my {WORD} parrot called?", conversation_id=first.conversation_id
    )
    assert later.state["context"].retrieval  # the item was given to the responder
    assert first.memory_id is not None
    done = store.forget("default", first.memory_id)
    assert done is not None and done.later_turns == 1
    rows = engine.db.query(
        "SELECT role, content FROM messages WHERE turn_id = ? ORDER BY id", (later.turn_id,)
    )
    # the user's own later words stay; Nova's reply that drew on the item does not
    assert [(r["role"], WORD in r["content"]) for r in rows] == [
        ("user", True),
        ("assistant", False),
    ]
    assert engine.db.history(first.conversation_id, turns=10) == []


async def test_a_later_reply_the_thinker_drew_from_memory_search_is_erased_too(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    server.script("salience", salient(f"The user's parrot is called {WORD}."))
    first = await engine.run_turn(f"My parrot is called {WORD}.")
    server.standing("consolidate", said({"action": "new", "fact": ""}))  # fails: no fact
    server.standing("profile_adaptive", said({"statements": []}))
    await engine.run_background()
    # a year later, a turn that shares neither a word nor a meaning with the item: the
    # enricher does not give it (not relevant, not recent), the thinker's memory_search
    # finds it, and the revised answer repeats it
    with engine.db.transaction() as c:
        c.execute("UPDATE memories SET valid_from = ?", ("2025-01-01T00:00:00+00:00",))
    server.script("router", CHECK)
    server.script("responder", Reply(content="I am not sure."))
    server.script(
        "thinker",
        Reply(content='TOOL: memory_search({"query": "parrot"})'),
        Reply(content=f"RESULT: REVISED\nYour bird is {WORD}."),
    )
    later = await engine.run_turn("How was your day, Nova?", conversation_id=first.conversation_id)
    assert not later.state["context"].retrieval  # not given by the enricher
    assert later.reply == f"Your bird is {WORD}."
    assert first.memory_id is not None
    assert later.state["thinker"].recalled == (first.memory_id,)
    done = store.forget("default", first.memory_id)
    assert done is not None and done.later_turns == 1
    assert places_holding(engine.db, WORD) == []


def test_the_forget_map_names_only_tables_and_columns_that_exist(db: Database) -> None:
    for place in FORGET_MAP:
        columns = ", ".join(place.columns)
        db.query(f"SELECT {columns} FROM {place.table} WHERE 1 = 0")
        assert place.why


async def test_a_failed_web_search_logs_no_query(
    caplog: pytest.LogCaptureFixture, isolated_env: Path
) -> None:
    settings = load_settings().settings
    db = Database(settings.db_path)
    try:
        with SearxngTestServer() as searxng:
            searxng.status = 500
            settings.searxng_url = searxng.url
            env = ToolEnv(db=db, user_id="ada", settings=settings)
            with caplog.at_level(logging.WARNING):
                result = await builtin_registry().call("web_search", {"query": WORD}, env)
    finally:
        db.close()
    assert not result.ok and "HTTP 500" in result.text
    assert WORD not in result.text and WORD not in caplog.text
    assert caplog.records  # the failure is logged, without the query
