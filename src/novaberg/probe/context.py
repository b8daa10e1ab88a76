"""What every experiment gets, and the shape of an experiment."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from novaberg.backends.base import ChatRequest
from novaberg.errors import error_kind
from novaberg.probe.result import ExperimentResult
from novaberg.probe.target import ProbeTarget, Sent
from novaberg.prompts.judges import JudgeSpec


@dataclass(frozen=True)
class ProbeContext:
    target: ProbeTarget
    trials: int
    """Trials per condition of each experiment."""
    window: int
    """The context window Novaberg sizes every prompt to (``limits.context_tokens``; sent to
    Ollama as ``num_ctx``)."""
    language: str
    judge: JudgeSpec
    """The first configured judge (its prompt is one of the structured-output prompts)."""


@dataclass(frozen=True)
class Experiment:
    name: str
    planned: Callable[[ProbeContext], int]
    """How many trials it will send (for the progress bar)."""
    skip_reason: Callable[[ProbeContext], str | None]
    """Why it cannot be measured on this model (a capability it lacks), or ``None``."""
    run: Callable[[ProbeContext], Awaitable[ExperimentResult]]


async def send_all(
    ctx: ProbeContext, requests: Sequence[ChatRequest], *, stream: bool = False
) -> list[Sent]:
    """Send every request, as many at once as the target allows; results in request order."""
    return list(await asyncio.gather(*(ctx.target.send(r, stream=stream) for r in requests)))


def answered(sent: Sequence[Sent]) -> list[Sent]:
    return [s for s in sent if s.response is not None]


def all_failed(name: str, sent: Sequence[Sent]) -> ExperimentResult | None:
    """A skipped result when no request of the experiment got an answer, else ``None``."""
    if not sent or answered(sent):
        return None
    kinds = Counter(error_kind(s.error) for s in sent if s.error is not None)
    listed = ", ".join(f"{kind} ×{n}" for kind, n in kinds.most_common())
    return ExperimentResult.skip(name, f"every request failed ({listed})", errors=len(sent))


def mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 1) if values else 0.0
