"""The vector index (novaberg.storage.vectors): the conformance suite every implementation
passes on its database (sqlite-vec on SQLite, pgvector on PostgreSQL with the extension, the
exact scan on SQLite without sqlite-vec and on PostgreSQL without pgvector), how
:func:`open_vector_index` chooses between them, and `novaberg memory reindex`. An
implementation that is not what its database should open is a failure, not a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from novaberg.errors import VectorDimensionError
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.sql import SQLITE_VEC_ENV
from novaberg.storage.vectors import (
    ExactIndex,
    PgvectorIndex,
    SqliteVecIndex,
    VectorIndex,
    int8_scores,
    open_vector_index,
    pack,
    quantize,
    rerank_count,
    top_rows,
)
from novaberg.storage.vectors.held import HeldCopies
from novaberg.testing.postgres import create_database, drop_database

NOVABERG = [sys.executable, "-m", "novaberg"]
DIM = 32


@dataclass(frozen=True)
class Implementation:
    """One implementation of the index and the database it serves."""

    name: str
    server: str
    """``sqlite``, or the PostgreSQL server fixture: ``pgvector_server`` or ``postgres_server``
    (Debian's PostgreSQL, without pgvector)."""
    cls: type[ExactIndex]
    mode: str
    notice: str | None
    """What the notice of the exact scan starts with (None: no notice)."""
    env: dict[str, str]


IMPLEMENTATIONS = [
    Implementation("sqlite-vec", "sqlite", SqliteVecIndex, "sqlite-vec", None, {}),
    Implementation("pgvector", "pgvector_server", PgvectorIndex, "pgvector", None, {}),
    Implementation(
        "exact-sqlite",
        "sqlite",
        ExactIndex,
        "exact",
        "sqlite-vec is not loaded (turned off by",
        {SQLITE_VEC_ENV: "off"},  # a Python that cannot load the extension
    ),
    Implementation(
        "exact-postgres",
        "postgres_server",
        ExactIndex,
        "exact",
        "pgvector is not installed on this PostgreSQL server",
        {},
    ),
]


@pytest.fixture(params=IMPLEMENTATIONS, ids=[i.name for i in IMPLEMENTATIONS])
def implementation(request: pytest.FixtureRequest) -> Implementation:
    impl: Implementation = request.param
    return impl


@pytest.fixture
def target(
    implementation: Implementation,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Path | str]:
    """Where the implementation's database keeps its data (a SQLite file, or a fresh database
    on its PostgreSQL server, dropped afterwards), with its environment set."""
    for key, value in implementation.env.items():
        monkeypatch.setenv(key, value)
    if implementation.server == "sqlite":
        yield tmp_path / "store" / "novaberg.db"
        return
    server = request.getfixturevalue(implementation.server)
    url = create_database(server)
    try:
        yield url
    finally:
        drop_database(server, url)


@pytest.fixture
def vdb(target: Path | str) -> Iterator[Database]:
    database = Database(target)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def opened(implementation: Implementation) -> Any:
    """``open_vector_index``, checked to give this implementation (never another, silently)."""

    def open_checked(db: Database, **kwargs: Any) -> VectorIndex:
        index = open_vector_index(db, **kwargs)
        assert type(index) is implementation.cls, (
            f"{implementation.name} is not available here: the database opened "
            f"{type(index).__name__} ({index.notice})"
        )
        assert index.mode == implementation.mode
        return index

    return open_checked


def held(index: VectorIndex) -> HeldCopies:
    """The index's in-memory copies (every implementation has them)."""
    assert isinstance(index, ExactIndex)
    return index.held


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def add_items(db: Database, user: str, n: int, start: int = 0) -> list[int]:
    ids = []
    with db.transaction() as c:
        for i in range(start, start + n):
            added = MemoryStore.add(c, user, "long_term", f"item {user} {i}", 0.5, f"k:{user}:{i}")
            ids.append(added.id)
    return ids


def store_vectors(
    index: VectorIndex, db: Database, user: str, ids: list[int], vectors: np.ndarray, emb: str
) -> None:
    with db.transaction() as c:
        for memory_id, vec in zip(ids, vectors, strict=True):
            index.upsert(c, memory_id, user, emb, vec)


def large_user(
    db: Database, opened: Any, n: int, seed: int
) -> tuple[VectorIndex, VectorIndex, np.ndarray, list[int]]:
    """ada with ``n`` random vectors of the embedder "toy": an index that holds a user's copy
    from 100 vectors on, one that never does (the database's own search), the vectors, and
    their items' ids."""
    index = opened(db, cache_from=100)
    plain = opened(db, cache_bytes=0)
    vectors = unit(np.random.default_rng(seed), n)
    ids = add_items(db, "ada", n)
    store_vectors(index, db, "ada", ids, vectors, "toy")
    return index, plain, vectors, ids


# -- the conformance suite: every implementation, on its database ------------------------------
def test_the_database_opens_the_implementation_it_should(
    vdb: Database, implementation: Implementation, opened: Any
) -> None:
    index = opened(vdb)
    if implementation.notice is None:
        assert index.notice is None
    else:
        assert index.notice and index.notice.startswith(implementation.notice)
    assert index.recorded() == {} and index.stats() == [] and index.space("toy") is None
    assert index.nearest("ada", "toy", [1.0, 0.0], 3) == []


def test_nearest_finds_the_right_item_among_many(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    rng = np.random.default_rng(1)
    ids = add_items(vdb, "ada", 2000)
    vectors = unit(rng, 2000)
    store_vectors(index, vdb, "ada", ids, vectors, "toy")
    for target in (0, 777, 1999):
        query = vectors[target] + 0.05 * unit(rng, 1)[0]
        found = index.nearest("ada", "toy", query, 5)
        assert found[0][0] == ids[target]
        assert found[0][1] > 0.95
        sims = [s for _, s in found]
        assert sims == sorted(sims, reverse=True) and len(found) == 5
    # the same ranking as an exact computation
    query = unit(rng, 1)[0]
    exact = np.argsort(-(vectors @ query))[:10]
    assert [i for i, _ in index.nearest("ada", "toy", query, 10)] == [ids[j] for j in exact]
    assert index.recorded() == {"toy": DIM}
    assert index.missing("toy") == []


def test_a_user_finds_only_their_own_items(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    rng = np.random.default_rng(2)
    vectors = unit(rng, 40)
    ada = add_items(vdb, "ada", 20)
    bob = add_items(vdb, "bob", 20)
    store_vectors(index, vdb, "ada", ada, vectors[:20], "toy")
    store_vectors(index, vdb, "bob", bob, vectors[20:], "toy")
    found = index.nearest("ada", "toy", vectors[25], 40)  # bob's vector as the query
    assert {i for i, _ in found} == set(ada)
    assert index.nearest("carol", "toy", vectors[0], 5) == []
    assert index.missing("toy", "ada") == [] and index.missing("other", "bob") == bob


def test_embedders_are_kept_apart(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    rng = np.random.default_rng(3)
    ids = add_items(vdb, "ada", 30)
    a, b = unit(rng, 30), unit(rng, 30)
    store_vectors(index, vdb, "ada", ids[:20], a[:20], "model-a")
    store_vectors(index, vdb, "ada", ids[10:], b[10:], "model-b")
    # the item's vector of model-a is the query: in model-b's space it is just another item
    assert index.nearest("ada", "model-a", a[12], 1)[0] == (ids[12], pytest.approx(1.0, abs=1e-5))
    in_b = index.nearest("ada", "model-b", a[3], 30)
    assert {i for i, _ in in_b} == set(ids[10:])  # item 3 has no model-b vector
    assert index.recorded() == {"model-a": DIM, "model-b": DIM}
    assert index.missing("model-b", "ada") == ids[:10]


def test_superseded_facts_are_left_out(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    rng = np.random.default_rng(4)
    ids = add_items(vdb, "ada", 50)
    vectors = unit(rng, 50)
    store_vectors(index, vdb, "ada", ids, vectors, "toy")
    with vdb.transaction() as c:
        for old in ids[:10]:  # ten facts replaced by the last one
            MemoryStore.supersede(c, old, ids[-1])
    found = index.nearest("ada", "toy", vectors[3], 5)
    assert len(found) == 5 and not set(ids[:10]) & {i for i, _ in found}


def test_forget_removes_the_vector_everywhere(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    rng = np.random.default_rng(5)
    ids = add_items(vdb, "ada", 20)
    vectors = unit(rng, 20)
    store_vectors(index, vdb, "ada", ids, vectors, "toy")
    assert MemoryStore(vdb).forget("ada", ids[7]) is not None
    assert ids[7] not in [i for i, _ in index.nearest("ada", "toy", vectors[7], 20)]
    assert vdb.query("SELECT 1 FROM memory_vectors WHERE memory_id = ?", (ids[7],)) == []
    if index.mode == "sqlite-vec":
        table = f"memory_vec_{index.space('toy').id}"  # type: ignore[union-attr]
        assert vdb.query(f"SELECT 1 FROM {table} WHERE rowid = ?", (ids[7],)) == []
    if vdb.dialect == "sqlite":
        # not in the index's chunks or anywhere else in the file either
        vdb.one("PRAGMA wal_checkpoint(TRUNCATE)")
        raw = Path(vdb.where).read_bytes()
        assert pack(vectors[7]) not in raw
        assert pack(vectors[8]) in raw  # the check can fail: a kept vector is found
    elif index.mode == "pgvector":
        assert vdb.scalar("SELECT COUNT(*) FROM memory_vectors WHERE emb IS NOT NULL") == 19
    else:
        assert vdb.scalar("SELECT COUNT(*) FROM memory_vectors") == 19


def test_a_vector_of_another_length_is_refused_naming_reindex(vdb: Database, opened: Any) -> None:
    index = opened(vdb)
    ids = add_items(vdb, "ada", 2)
    rng = np.random.default_rng(6)
    store_vectors(index, vdb, "ada", ids[:1], unit(rng, 1), "toy")
    with pytest.raises(VectorDimensionError, match="novaberg memory reindex") as refused:
        index.nearest("ada", "toy", unit(rng, 1, DIM + 8)[0], 3)
    assert (refused.value.recorded, refused.value.given) == (DIM, DIM + 8)
    with pytest.raises(VectorDimensionError, match="novaberg memory reindex"):
        store_vectors(index, vdb, "ada", ids[1:], unit(rng, 1, DIM + 8), "toy")
    assert vdb.scalar("SELECT COUNT(*) FROM memory_vectors") == 1  # nothing half-written


def test_without_sqlite_vec_the_search_scans_exactly_with_a_notice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "n.db"
    rng = np.random.default_rng(7)
    vectors = unit(rng, 60)
    db = Database(path)
    index = open_vector_index(db)
    ids = add_items(db, "ada", 30)
    store_vectors(index, db, "ada", ids, vectors[:30], "toy")
    db.close()

    monkeypatch.setenv(SQLITE_VEC_ENV, "off")  # a Python that cannot load the extension
    db = Database(path)
    index = open_vector_index(db)
    assert index.mode == "exact"
    assert index.notice and "sqlite-vec is not loaded" in index.notice
    more = add_items(db, "ada", 30, start=30)
    store_vectors(index, db, "ada", more, vectors[30:], "toy")  # writes still work
    assert MemoryStore(db).forget("ada", ids[0]) is not None  # and forget
    assert index.nearest("ada", "toy", vectors[40], 1)[0][0] == more[10]
    db.close()

    monkeypatch.delenv(SQLITE_VEC_ENV)  # the extension again: its index is rebuilt
    db = Database(path)
    try:
        index = open_vector_index(db)
        assert index.mode == "sqlite-vec" and index.space("toy").indexed  # type: ignore[union-attr]
        found = index.nearest("ada", "toy", vectors[40], 60)
        assert found[0][0] == more[10] and ids[0] not in {i for i, _ in found}
        assert len(found) == 59
    finally:
        db.close()


def test_without_pgvector_the_search_scans_exactly_and_doctor_says_how_to_add_it(
    postgres_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = create_database(postgres_server)  # Debian's PostgreSQL: no pgvector
    try:
        db = Database(url)
        try:
            index = open_vector_index(db)
            assert index.mode == "exact"
            assert index.notice and "pgvector is not installed" in index.notice
            rng = np.random.default_rng(8)
            ids = add_items(db, "ada", 40)
            vectors = unit(rng, 40)
            store_vectors(index, db, "ada", ids, vectors, "toy")
            assert index.nearest("ada", "toy", vectors[17], 1)[0][0] == ids[17]
        finally:
            db.close()
        monkeypatch.setenv("NOVABERG_DATABASE_URL", url)
        monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
        monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
        done = subprocess.run(
            [*NOVABERG, "doctor", "--json"], capture_output=True, text=True, timeout=120,
            env=dict(os.environ),
        )  # fmt: skip
        report = json.loads(done.stdout)
        assert report["vectors"]["mode"] == "exact"
        assert any("install pgvector" in fix for fix in report["fixes"])
    finally:
        drop_database(postgres_server, url)


def test_pgvector_added_later_gets_the_vectors_stored_before(
    pgvector_server: str,
) -> None:
    """A database migrated and written without the extension, then opened where it exists:
    the vectors stored meanwhile are copied into the pgvector column and indexed."""
    url = create_database(pgvector_server)
    try:
        db = Database(url)
        try:
            rng = np.random.default_rng(9)
            ids = add_items(db, "ada", 10)
            vectors = unit(rng, 10)
            with db.transaction() as c:  # as the exact mode writes them
                c.execute(
                    "INSERT INTO vector_spaces (embedder, dim, indexed, created_at) "
                    "VALUES ('toy', ?, 0, 'x')",
                    (DIM,),
                )
                for memory_id, vec in zip(ids, vectors, strict=True):
                    c.execute(
                        "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                        "VALUES (?, 'toy', 'ada', ?)",
                        (memory_id, pack(vec)),
                    )
            index = open_vector_index(db)
            assert index.mode == "pgvector" and index.space("toy").indexed  # type: ignore[union-attr]
            assert db.scalar("SELECT COUNT(*) FROM memory_vectors WHERE emb IS NULL") == 0
            assert index.nearest("ada", "toy", vectors[4], 1)[0][0] == ids[4]
        finally:
            db.close()
    finally:
        drop_database(pgvector_server, url)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="100")
    env.pop("NOVABERG_LOOP_GUARD", None)
    return subprocess.run(
        [*NOVABERG, "memory", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_reindex_fills_missing_vectors_with_a_progress_bar(
    isolated_env: Path, target: Path | str, opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    if isinstance(target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", target)
    else:
        target = isolated_env / "novaberg.db"
    db = Database(target)
    try:
        texts = ["I adopted a dog named Bruno last spring", "I can't stand coriander"]
        with db.transaction() as c:
            ids = [
                MemoryStore.add(c, "default", "long_term", t, 0.8, f"k{i}").id
                for i, t in enumerate(texts)
            ]
            MemoryStore.add(c, "bob", "long_term", "Bob sails on weekends", 0.8, "k9")
        # vectors of the same name but 8 numbers: the model behind the name changed
        index = opened(db)
        with db.transaction() as c:
            index.upsert(c, ids[0], "default", "minilm-l6-v2", [0.5] * 8)
    finally:
        db.close()

    done = run_cli("reindex", "--embedder", "minilm-l6-v2")
    assert done.returncode == 0, done.stderr
    assert "3/3" in done.stderr  # the progress bar, at its end
    assert "now gives vectors of 384 numbers, the stored ones have 8" in done.stderr
    assert "Removed 1 vector(s)" in done.stdout and "Computed 3 vector(s)" in done.stdout

    again = run_cli("reindex", "--embedder", "minilm-l6-v2", "--json")
    assert json.loads(again.stdout)["computed"] == 0

    db = Database(target)
    try:
        index = opened(db)
        assert index.recorded() == {"minilm-l6-v2": 384} and index.missing("minilm-l6-v2") == []
        from novaberg.embedders import get_embedder

        query = get_embedder("minilm-l6-v2").embed(["What kind of pet do I own?"], query=True)
        assert index.nearest("default", "minilm-l6-v2", query.array[0], 1)[0][0] == ids[0]
    finally:
        db.close()


def test_a_large_user_is_searched_in_memory_and_the_copy_stays_current(
    vdb: Database, opened: Any
) -> None:
    """Under every implementation: the copy answers as the database's own search does
    (sqlite-vec; pgvector's exact distance; the exact scan), and follows new, forgotten and
    superseded items through the counts m011's triggers keep."""
    db = vdb
    index = opened(db, cache_from=100)  # the in-memory copy from 100 vectors on
    plain = opened(db, cache_bytes=0)  # the database's own search, to compare with
    copies = held(index)
    rng = np.random.default_rng(10)
    vectors = unit(rng, 400)
    ids = add_items(db, "ada", 300)
    store_vectors(index, db, "ada", ids, vectors[:300], "toy")
    small = add_items(db, "bob", 20, start=500)
    store_vectors(index, db, "bob", small, vectors[300:320], "toy")
    queries = unit(rng, 5)

    def both(q: np.ndarray, k: int = 10) -> list[tuple[int, float]]:
        got = index.nearest("ada", "toy", q, k)
        assert [i for i, _ in got] == [i for i, _ in plain.nearest("ada", "toy", q, k)]
        return got

    both(queries[0])  # the first search in this process: the database's own
    assert not copies.cache and not copies.loading
    both(queries[1])  # the second: the database answers, the copy loads meanwhile
    key = (index.space("toy").id, "ada")  # type: ignore[union-attr]
    assert key in copies.loading or key in copies.cache  # (a small copy may be done)
    index.settle()
    assert list(copies.cache) == [key] and not copies.loading
    both(queries[2])
    index.nearest("bob", "toy", queries[0], 5)  # 20 vectors: never copied
    assert len(copies.cache) == 1

    more = add_items(db, "ada", 50, start=300)  # new items: appended to the copy
    store_vectors(index, db, "ada", more, vectors[320:370], "toy")
    assert both(vectors[333], 1)[0][0] == more[13]
    assert MemoryStore(db).forget("ada", more[13]) is not None  # a removal: reloaded
    assert more[13] not in [i for i, _ in both(vectors[333], 20)]
    index.settle()
    assert more[13] not in [i for i, _ in both(vectors[333], 20)]
    with db.transaction() as c:
        MemoryStore.supersede(c, ids[5], ids[6])
    assert ids[5] not in [i for i, _ in both(vectors[5], 20)]
    copy = copies.cache[(index.space("toy").id, "ada")]  # type: ignore[union-attr]
    assert len(copy.ids) == 349 and more[13] not in copy.ids.tolist()


def test_the_search_that_starts_loading_the_copy_does_not_wait_for_it(
    vdb: Database, opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a large user's copy takes 0.6-2 s at 100k: the search that starts it (and every
    one until it is there) is answered by the database meanwhile."""
    db = vdb
    release = threading.Event()
    try:
        index, plain, vectors, ids = large_user(db, opened, 150, seed=22)
        copies = held(index)
        real_load = HeldCopies.load

        def held_up(self: HeldCopies, *args: Any, **kwargs: Any) -> Any:
            assert release.wait(30), "the test never released the load"
            return real_load(self, *args, **kwargs)

        monkeypatch.setattr(HeldCopies, "load", held_up)
        index.nearest("ada", "toy", vectors[0], 5)  # the first search: no copy asked for
        for q in vectors[1:4]:  # the load is held up: these must not wait for it
            got = index.nearest("ada", "toy", q, 5)
            assert got == plain.nearest("ada", "toy", q, 5)
        assert not copies.cache and len(copies.loading) == 1
        release.set()
        index.settle()
        assert len(copies.cache) == 1 and not copies.loading
        assert index.nearest("ada", "toy", vectors[7], 1)[0][0] == ids[7]
    finally:
        release.set()


def test_a_row_changed_under_the_copy_is_scored_as_it_is_now_and_never_for_another_user(
    vdb: Database, opened: Any
) -> None:
    """The copy's best rows are read back by their key (SQLite's rowid). Between the copy's
    check and that read, ada's newest vector can be forgotten and its rowid reused by bob's:
    ada's search must not return bob's item (nor ada's forgotten one)."""
    db = vdb
    index, _, vectors, ids = large_user(db, opened, 150, seed=21)
    index.nearest("ada", "toy", vectors[0], 5)
    index.nearest("ada", "toy", vectors[0], 5)
    index.settle()
    space = index.space("toy")
    assert space is not None
    stale = held(index).cache[(space.id, "ada")]
    last = ids[-1]
    assert MemoryStore(db).forget("ada", last) is not None
    [bobs] = add_items(db, "bob", 1, start=900)
    store_vectors(index, db, "bob", [bobs], vectors[149:150], "toy")  # ada's last vector
    if db.dialect == "sqlite":  # the rowid ada's row had, now bob's
        assert (
            db.scalar("SELECT user_id FROM memory_vectors WHERE rowid = ?", (int(stale.keys[-1]),))
            == "bob"
        )
    found = held(index).nearest(stale, space, "ada", vectors[149], 10)
    assert bobs not in [i for i, _ in found] and last not in [i for i, _ in found]
    assert len(found) == 10 and set(i for i, _ in found) <= set(ids[:-1])


def test_a_large_users_search_reads_as_many_rows_however_many_facts_were_superseded(
    vdb: Database, opened: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Superseded facts keep their vectors. The copy must score them out, not widen the
    rows it reads back by their number (a long life supersedes thousands)."""
    db = vdb
    index, plain, vectors, ids = large_user(db, opened, 600, seed=30)
    rng = np.random.default_rng(31)  # a query that is none of the stored vectors
    with db.transaction() as c:
        for i in range(0, 600, 2):  # 300 of 600 superseded by their neighbour
            MemoryStore.supersede(c, ids[i], ids[i + 1])
    index.nearest("ada", "toy", vectors[1], 10)
    index.nearest("ada", "toy", vectors[1], 10)  # the copy loads in the background
    index.settle()
    read: list[int] = []
    real = Database.query

    def counting(self: Database, sql: str, *args: object, **kw: object) -> object:
        rows = real(self, sql, *args, **kw)  # type: ignore[arg-type]
        if "vec FROM memory_vectors WHERE" in sql:
            read.append(len(rows))
        return rows

    monkeypatch.setattr(Database, "query", counting)
    for q in (vectors[0], vectors[1], vectors[300], unit(rng, 1)[0]):
        got = [i for i, _ in index.nearest("ada", "toy", q, 10)]
        assert got == [i for i, _ in plain.nearest("ada", "toy", q, 10)]
        assert len(got) == 10 and not set(got) & set(ids[0::2])
    assert read and max(read) <= rerank_count(10, 600) < rerank_count(310, 600)


def test_top_rows_picks_the_highest_scores() -> None:
    rng = np.random.default_rng(13)
    cases = [
        rng.integers(-5000, 5000, 100_000).astype(np.float64),  # many ties, as int8 gives
        rng.standard_normal(100_000),
        np.zeros(50_000),  # every score the same: the threshold keeps all
        np.sort(rng.standard_normal(30_000)),  # the best at the end, missed by a sample
        rng.standard_normal(120),
    ]
    for scores in cases:
        for take in (1, 50, 250, len(scores)):
            picked = top_rows(scores, take)
            want = min(take, len(scores))  # asked for more than there are: all of them
            assert len(picked) == len(set(picked.tolist())) == want
            assert sorted(scores[picked]) == sorted(np.sort(scores)[len(scores) - want :])


def test_the_int8_scores_keep_the_exact_nearest_within_the_rescored_set() -> None:
    """The in-memory copy scores int8 codes, then re-scores its best exactly: the exact top 50
    must lie inside that set, even for random vectors, whose neighbours are nearly tied."""
    rng = np.random.default_rng(12)
    matrix = unit(rng, 20_000, 384).astype(np.float32)
    codes = quantize(matrix)
    assert codes.dtype == np.int8 and np.abs(codes).max() <= 127
    near = matrix[rng.integers(0, len(matrix), 10)] + 0.3 * unit(rng, 10, 384)
    for q in [*near, *unit(rng, 10, 384)]:
        q = (q / np.linalg.norm(q)).astype(np.float32)
        scores = int8_scores(codes, quantize(q))
        assert np.allclose(scores / 127**2, matrix @ q, atol=0.02)  # about the cosine
        exact = set(np.argsort(-(matrix @ q))[:50].tolist())
        kept = set(np.argsort(-scores, kind="stable")[: rerank_count(50, len(codes))].tolist())
        assert exact <= kept


def test_vectors_stored_before_this_index_keep_their_embedder(
    database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database of the release before (migrations up to m008, one vector per item under
    ``model``): m009 keeps each vector under its embedder, records the length, and drops a
    vector whose length differs from the others of its model (reindex computes it again)."""
    import novaberg.storage.db as storage

    every = storage.migration_names
    older = [n for n in every("sqlite") if n < "m009"]  # the same names for both databases
    monkeypatch.setattr(storage, "migration_names", lambda dialect="sqlite": older)
    db = Database(database_target)
    rng = np.random.default_rng(11)
    vectors = unit(rng, 3, 8)
    try:
        ids = add_items(db, "ada", 3)
        with db.transaction() as c:
            for memory_id, vec in zip(ids[:2], vectors[:2], strict=True):
                c.execute(
                    "INSERT INTO memory_vectors (memory_id, model, vec) VALUES (?, ?, ?)",
                    (memory_id, "nomic-embed-text", pack(vec)),
                )
            c.execute(
                "INSERT INTO memory_vectors (memory_id, model, vec) VALUES (?, ?, ?)",
                (ids[2], "nomic-embed-text", pack(vectors[2][:4])),
            )
    finally:
        db.close()
    monkeypatch.setattr(storage, "migration_names", every)
    db = Database(database_target)
    try:
        assert "m009_vectors" in db.applied_migrations()
        index = open_vector_index(db)
        assert index.recorded() == {"nomic-embed-text": 8}
        assert index.nearest("ada", "nomic-embed-text", vectors[1], 3)[0][0] == ids[1]
        assert index.missing("nomic-embed-text") == [ids[2]]
        users = {r["user_id"] for r in db.query("SELECT user_id FROM memory_vectors")}
        assert users == {"ada"}
    finally:
        db.close()


def test_m011_counts_the_vectors_a_database_of_the_release_before_holds(
    database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database of the release before (migrations up to m010; on SQLite the count triggers
    its code made, whose update trigger only counted a removal): m011 counts what is stored,
    and from then on its triggers keep the counts on both databases."""
    import novaberg.storage.db as storage

    every = storage.migration_names
    older = [n for n in every("sqlite") if n < "m011"]
    monkeypatch.setattr(storage, "migration_names", lambda dialect="sqlite": older)
    rng = np.random.default_rng(13)
    db = Database(database_target)
    try:
        ids = add_items(db, "ada", 3) + add_items(db, "bob", 1, start=3)
        if db.dialect == "sqlite":  # as the release before's VectorIndex made them
            with db.transaction() as c:
                c.execute(
                    "CREATE TABLE vector_counts (embedder TEXT NOT NULL, user_id TEXT NOT NULL, "
                    "added INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0, "
                    "PRIMARY KEY (embedder, user_id))"
                )
                c.execute(
                    "CREATE TRIGGER vector_counts_update AFTER UPDATE ON memory_vectors BEGIN "
                    "UPDATE vector_counts SET removed = removed + 1 WHERE embedder = "
                    "old.embedder AND user_id = old.user_id; END"
                )
                c.execute("INSERT INTO vector_counts VALUES ('toy', 'ada', 7, 5)")  # stale
        with db.transaction() as c:
            for memory_id, user, vec in zip(
                ids, ["ada", "ada", "ada", "bob"], unit(rng, 4), strict=True
            ):
                c.execute(
                    "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                    "VALUES (?, 'toy', ?, ?)",
                    (memory_id, user, pack(vec)),
                )
    finally:
        db.close()
    monkeypatch.setattr(storage, "migration_names", every)
    db = Database(database_target)
    try:
        assert "m011_vector_counts" in db.applied_migrations()

        def counts() -> dict[str, tuple[int, int]]:
            rows = db.query("SELECT user_id, added, removed FROM vector_counts")
            return {r["user_id"]: (int(r["added"]), int(r["removed"])) for r in rows}

        assert counts() == {"ada": (3, 0), "bob": (1, 0)}
        with db.transaction() as c:  # a replaced vector: one removed, one added
            c.execute(
                "UPDATE memory_vectors SET vec = ? WHERE memory_id = ?",
                (pack(unit(rng, 1)[0]), ids[0]),
            )
        assert counts() == {"ada": (4, 1), "bob": (1, 0)}
        assert MemoryStore(db).forget("ada", ids[1]) is not None
        assert counts() == {"ada": (4, 2), "bob": (1, 0)}
    finally:
        db.close()
