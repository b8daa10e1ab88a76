"""``think_flag``: does the model think when ``think`` is omitted, and does it honour
``think: false``? (Since Ollama v0.12.4 a thinking model thinks when the flag is omitted, which
is why Novaberg sends it explicitly on every call; some models think whatever the flag says.)
The capabilities the server reports are part of the result.
"""

from __future__ import annotations

from novaberg.backends.base import ChatRequest
from novaberg.probe.context import Experiment, ProbeContext, all_failed, answered, send_all
from novaberg.probe.result import ExperimentResult, verdict
from novaberg.probe.target import Sent

NAME = "think_flag"
CALLER = "probe_think_flag"
QUESTION = "In one sentence: why is the sky blue?"


def _skip(ctx: ProbeContext) -> str | None:
    known = ctx.target.can("thinking")
    if known is None:
        return "this backend's protocol has no think flag (Novaberg sends none to it)"
    if not known:
        return "the model does not report the thinking capability (/api/show)"
    return None


def request(think: bool | None) -> ChatRequest:
    return ChatRequest(
        caller=CALLER,
        messages=[{"role": "user", "content": QUESTION}],
        think=think,
        temperature=0.0,
        max_tokens=256,
    )


def _thought(sent: list[Sent]) -> int:
    return sum(1 for s in answered(sent) if s.response and s.response.thinking.strip())


async def run(ctx: ProbeContext) -> ExperimentResult:
    n = ctx.trials
    sent = await send_all(ctx, [request(None)] * n + [request(False)] * n)
    failed = all_failed(NAME, sent)
    if failed is not None:
        return failed
    omitted, off = sent[:n], sent[n:]
    counts = {"thinks_when_omitted": _thought(omitted), "thinks_when_false": _thought(off)}
    result = ExperimentResult(
        NAME,
        n,
        counts,
        errors=len(sent) - len(answered(sent)),
        detail={"capabilities": list(ctx.target.capabilities or ())},
    )
    result.verdicts = [
        verdict(
            "thinking when think is omitted",
            counts["thinks_when_omitted"],
            len(answered(omitted)),
            "Novaberg sends think on every call to this model (false unless a node reasons), "
            "so this default never applies",
        ),
        verdict(
            "thinking despite think: false",
            counts["thinks_when_false"],
            len(answered(off)),
            "the model ignores the flag: its calls are slower; Novaberg keeps thinking out of "
            "every answer and validates structured output itself",
            clean="think: false is honoured",
        ),
    ]
    return result


EXPERIMENT = Experiment(NAME, lambda ctx: 2 * ctx.trials, _skip, run)
