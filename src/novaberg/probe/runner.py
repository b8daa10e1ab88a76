"""Running a probe: choose the server and model, check it answers, run every experiment at
once (the target bounds how many requests are in flight), store the run.

Only a server that cannot be probed at all raises (unreachable, unknown model, or not one
request answered); a model that lacks a capability gets those experiments skipped, with the
reason, and the probe goes on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Literal, Protocol

from novaberg.backends.base import Backend
from novaberg.backends.select import make_backend
from novaberg.config import Settings
from novaberg.errors import BackendError, BackendUnreachable, ModelNotFound
from novaberg.nodes.tribunal import configured_judges
from novaberg.probe import latency, structured, think_flag, think_split, tools, truncation
from novaberg.probe.context import Experiment, ProbeContext
from novaberg.probe.result import ExperimentResult, ProbeReport
from novaberg.probe.store import save_run
from novaberg.probe.target import ProbeTarget
from novaberg.storage.db import Database, now

ProbeBackend = Literal["ollama", "openai"]
EXPERIMENTS: tuple[Experiment, ...] = (
    think_split.EXPERIMENT,
    tools.EXPERIMENT,
    structured.EXPERIMENT,
    truncation.EXPERIMENT,
    think_flag.EXPERIMENT,
    latency.EXPERIMENT,
)
"""Every experiment, in the order of the report (the contract's three first)."""
DEFAULT_TRIALS = 20
DEFAULT_TIMEOUT_S = 120.0


class Progress(Protocol):
    def planned(self, total: int) -> None: ...
    def advanced(self) -> None: ...


def probe_backend(settings: Settings, chosen: ProbeBackend | None) -> ProbeBackend:
    """The named backend, else the configured one; ``auto`` and ``embedded`` probe Ollama
    (the embedded model is not a server: it has none of these faults to measure)."""
    if chosen is not None:
        return chosen
    return "openai" if settings.backend == "openai" else "ollama"


def probe_settings(
    settings: Settings, backend: ProbeBackend, model: str | None, timeout_s: float
) -> Settings:
    """The settings with the named model and a per-request timeout of ``timeout_s``."""
    timeouts = settings.timeouts.model_copy(
        update={
            "total_s": min(settings.timeouts.total_s, timeout_s),
            "first_token_s": min(settings.timeouts.first_token_s, timeout_s),
        }
    )
    update: dict[str, object] = {"timeouts": timeouts}
    if model is not None:
        update["model" if backend == "ollama" else "openai_model"] = model
    return settings.model_copy(update=update)


async def preflight(backend: Backend) -> tuple[str, ...] | None:
    """Raise when the server cannot be probed at all; else the model's capabilities (``None``
    when the protocol does not report them)."""
    reported = await backend.capabilities()  # Ollama's raises: unreachable, or no such model
    if reported is not None:
        return reported
    status = await backend.status()
    if not status.reachable:
        raise BackendUnreachable(status.detail, backend=backend.name, model=backend.model)
    served = list(status.installed_models)
    if served and backend.model not in served:
        raise ModelNotFound(
            f"Model '{backend.model}' is not served by the {backend.name} server (it serves: "
            f"{', '.join(served)}). Name one with --model or NOVABERG_OPENAI_MODEL.",
            installed=served,
            backend=backend.name,
            model=backend.model,
        )
    return None


async def run_probe(
    settings: Settings,
    db: Database,
    *,
    backend: ProbeBackend | None = None,
    model: str | None = None,
    trials: int = DEFAULT_TRIALS,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Progress | None = None,
    experiments: Sequence[Experiment] = EXPERIMENTS,
) -> ProbeReport:
    name = probe_backend(settings, backend)
    settings = probe_settings(settings, name, model, timeout_s)
    chosen = make_backend(name, settings)
    started, started_at = time.perf_counter(), now()
    try:
        capabilities = await preflight(chosen)
        concurrency = int(getattr(settings.concurrency, name))
        target = ProbeTarget(
            chosen, concurrency, capabilities, progress.advanced if progress else None
        )
        ctx = ProbeContext(
            target=target,
            trials=trials,
            window=settings.limits.context_tokens,
            language=settings.language,
            judge=configured_judges(settings)[0],
        )
        results = await _run_all(ctx, experiments, progress)
    finally:
        await chosen.aclose()
    report = ProbeReport(
        backend=name,
        model=chosen.model,
        experiments=results,
        capabilities=capabilities,
        requests=len(target.calls),
        answered=target.answered,
        wall_s=time.perf_counter() - started,
    )
    if settings.backend not in ("ollama", "openai") and backend is None:
        report.notices.append(
            f"NOVABERG_BACKEND is {settings.backend}: the probe measured Ollama, the server "
            "that mode uses when it answers."
        )
    report.run_id = await db.run(  # in a database worker, off the event loop
        save_run, db, report, target.calls, trials=trials, started_at=started_at, finished_at=now()
    )
    if target.calls and not target.reached:
        raise BackendError(
            f"The {name} server answered none of the {len(target.calls)} probe requests "
            f"(each timed out or found no server; run {report.run_id} is stored). Check "
            "that it works (`novaberg doctor`) or give it more time (--timeout).",
            backend=name,
            model=chosen.model,
        )
    return report


async def _run_all(
    ctx: ProbeContext, experiments: Sequence[Experiment], progress: Progress | None
) -> list[ExperimentResult]:
    skips = {e.name: e.skip_reason(ctx) for e in experiments}
    runnable = [e for e in experiments if skips[e.name] is None]
    if progress is not None:
        progress.planned(sum(e.planned(ctx) for e in runnable))
    found = await asyncio.gather(*(e.run(ctx) for e in runnable))
    done = {e.name: result for e, result in zip(runnable, found, strict=True)}
    return [
        done[e.name] if e.name in done else ExperimentResult.skip(e.name, skips[e.name] or "")
        for e in experiments
    ]
