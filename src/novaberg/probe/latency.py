"""``latency``: time to first content token and generation speed, on a short streamed answer.

Measured under the probe's own load (as many requests at once as the backend's concurrency
setting allows, as in a turn whose judges vote together), so the time to first token includes
waiting in the server's queue. Tokens per second come from the server's own ``eval_duration``
where it reports one (Ollama), else from the time after the first token.
"""

from __future__ import annotations

import statistics

from novaberg.backends.base import ChatRequest
from novaberg.probe.context import Experiment, ProbeContext, all_failed, answered, send_all
from novaberg.probe.result import ExperimentResult, Verdict
from novaberg.probe.target import Sent

NAME = "latency"
CALLER = "probe_latency"
PROMPT = "Write three short sentences about the sea."


def request() -> ChatRequest:
    return ChatRequest(
        caller=CALLER,
        messages=[{"role": "user", "content": PROMPT}],
        think=False,
        temperature=0.0,
        max_tokens=128,
    )


def _tokens_per_s(s: Sent) -> float | None:
    r = s.response
    if r is None or r.eval_count <= 0:
        return None
    if r.eval_duration > 0:
        return r.eval_count / (r.eval_duration / 1e9)
    after_first = s.record.ms / 1000 - (s.first_token_s or 0.0)
    return r.eval_count / after_first if after_first > 0 else None


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    if len(values) == 1:
        return round(values[0], 1)
    return round(statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1], 1)


async def run(ctx: ProbeContext) -> ExperimentResult:
    sent = await send_all(ctx, [request()] * ctx.trials, stream=True)
    failed = all_failed(NAME, sent)
    if failed is not None:
        return failed
    got = answered(sent)
    first = [s.first_token_s * 1000 for s in got if s.first_token_s is not None]
    speeds = [v for v in (_tokens_per_s(s) for s in got) if v is not None]
    detail = {
        "first_token_ms_p50": _quantile(first, 0.5),
        "first_token_ms_p95": _quantile(first, 0.95),
        "call_ms_p50": _quantile([s.record.ms for s in got], 0.5),
        "tokens_per_s": round(statistics.fmean(speeds), 1) if speeds else None,
        "concurrency": ctx.target.concurrency,
    }
    result = ExperimentResult(
        NAME,
        ctx.trials,
        {"answered": len(got), "first_token_seen": len(first)},
        errors=len(sent) - len(got),
        detail=detail,
    )
    speed = f"{detail['tokens_per_s']} tokens/s" if speeds else "no token rate reported"
    result.verdicts = [
        Verdict(
            "latency",
            0,
            ctx.trials,
            f"first token after {detail['first_token_ms_p50']} ms (median, p95 "
            f"{detail['first_token_ms_p95']} ms) with {ctx.target.concurrency} requests at "
            f"once; {speed}",
        )
    ]
    return result


EXPERIMENT = Experiment(NAME, lambda ctx: ctx.trials, lambda ctx: None, run)
