"""The backend contract (``backends/base.py``): every backend subclasses :class:`Backend`, and a
backend without an optional part gets its declared default, which callers use as they use any
other part (issue 24: no ``getattr``)."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import novaberg.backends.select  # noqa: F401  (imports every backend module)
from novaberg.backends.base import Backend, ChatRequest
from novaberg.backends.chain import BackendChain
from novaberg.backends.embedded import EmbeddedBackend
from novaberg.config import Retries, Timeouts
from novaberg.errors import CapabilityError
from novaberg.queue import ModelQueue
from novaberg.telemetry import Trace
from tests.conftest import MSG


def backend_classes(cls: type[Backend] = Backend) -> Iterator[type[Backend]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from backend_classes(sub)


@pytest.fixture
async def bare(tmp_path: Path) -> AsyncIterator[EmbeddedBackend]:
    """The embedded backend, not loaded: it has none of the optional parts."""
    backend = EmbeddedBackend(tmp_path, Timeouts())
    yield backend
    await backend.aclose()


def test_every_backend_is_complete_and_says_whether_it_embeds() -> None:
    found = {cls.__name__: cls for cls in backend_classes()}
    assert {"OllamaBackend", "OllamaPool", "OpenAICompatBackend", "EmbeddedBackend"} <= set(found)
    for name, cls in found.items():
        assert not inspect.isabstract(cls), f"{name} lacks {sorted(cls.__abstractmethods__)}"
        assert cls.embeds == (cls.embed is not Backend.embed), f"{name}.embeds is wrong"


async def test_a_backend_without_the_optional_parts_answers_with_their_defaults(
    bare: EmbeddedBackend,
) -> None:
    thinking = ChatRequest(caller="thinker", messages=MSG, think=True)
    structured = ChatRequest(caller="router", messages=MSG, json_schema={"type": "object"})
    assert bare.servers == 1
    assert not bare.embeds
    assert await bare.capabilities() is None
    assert await bare.context_claims("probe_truncation") == (None, None)
    assert bare.sent_think(thinking) is False
    assert bare.json_mode(structured) == "json_schema"
    assert bare.json_mode(thinking) == ""
    with pytest.raises(CapabilityError, match="embedded backend has no embeddings"):
        await bare.embed(["a"], "nomic-embed-text", "embed")


async def test_the_queue_asks_no_embeddings_of_a_backend_without_them(
    bare: EmbeddedBackend,
) -> None:
    queue = ModelQueue(
        BackendChain([bare], cooldown_s=30), {"embedded": 1}, Retries(attempts=1, backoff_s=0)
    )
    trace = Trace()
    assert await queue.embed(["a"], "nomic-embed-text", caller="embed", trace=trace) is None
    assert trace.calls == []
