"""``truncation``: what the server does with a prompt longer than the context Novaberg asks for.

Ollama cuts such a prompt from the head silently (keeping its first few tokens and its end)
and answers anyway (../shared/OLLAMA.md, "Prompts longer than the context"); other servers
refuse it. The probe sends a prompt of about twice the window (``limits.context_tokens``, which
Ollama gets as ``num_ctx``) with a code word at its head and the question for it at its end:

* ``refused``: the server said the prompt does not fit (:class:`~novaberg.errors.ContextOverflow`);
* ``cut``: it answered, but read far fewer prompt tokens than were sent (the project's own
  check, ``backends/guards.py``: outcome ``truncated``);
* ``marker_kept`` / ``marker_lost``: whether the answer still knew the code word.

The effective context is the most prompt tokens the server read, beside what ``/api/show``
claims the model could take and the context it is loaded with (``/api/ps``).
"""

from __future__ import annotations

from typing import Any

from novaberg.backends.base import ChatRequest
from novaberg.backends.guards import CHARS_PER_TOKEN
from novaberg.errors import ContextOverflow
from novaberg.probe.context import Experiment, ProbeContext, all_failed, answered, send_all
from novaberg.probe.result import ExperimentResult, Verdict, verdict

NAME = "truncation"
CALLER = "probe_truncation"
MAX_TRIALS = 3
"""Each trial sends twice the window: a few say what the server does, more only cost time."""
OVERSIZE = 2
MARKER = "KESTREL-2741"
HEAD = (
    f"The code word is {MARKER}. Remember it: at the end you will be asked for it, and then "
    "you reply with the code word only."
)
QUESTION = (
    "What is the code word you were given at the very beginning? Reply with the code word only."
)


def trials(ctx: ProbeContext) -> int:
    return min(ctx.trials, MAX_TRIALS)


def filler(chars: int) -> str:
    """Numbered lines of plain words, at least ``chars`` characters."""
    lines: list[str] = []
    size = 0
    while size < chars:
        lines.append(f"Line {len(lines) + 1}: the quick brown fox jumps over the lazy dog.")
        size += len(lines[-1]) + 1
    return "\n".join(lines)


def request(ctx: ProbeContext) -> ChatRequest:
    text = f"{filler(OVERSIZE * ctx.window * CHARS_PER_TOKEN)}\n\n{QUESTION}"
    return ChatRequest(
        caller=CALLER,
        messages=[{"role": "system", "content": HEAD}, {"role": "user", "content": text}],
        think=False,
        temperature=0.0,
        max_tokens=32,
    )


async def run(ctx: ProbeContext) -> ExperimentResult:
    n = trials(ctx)
    sent = await send_all(ctx, [request(ctx)] * n)
    refused = sum(1 for s in sent if isinstance(s.error, ContextOverflow))
    got = [s.response for s in answered(sent) if s.response is not None]
    failed = None if refused else all_failed(NAME, sent)
    if failed is not None:
        return failed
    counts = {
        "refused": refused,
        "cut": sum(1 for r in got if r.prompt_cut),
        "marker_kept": sum(1 for r in got if MARKER in r.content),
        "marker_lost": sum(1 for r in got if MARKER not in r.content),
    }
    claimed, loaded = await ctx.target.backend.context_claims(CALLER)
    read = [r.prompt_eval_count for r in got if r.prompt_eval_count]
    detail: dict[str, Any] = {
        "window": ctx.window,
        "prompt_estimate": max((r.prompt_estimate for r in got), default=None),
        "prompt_eval_count": max(read, default=None),
        "effective_context": max(read) if read and counts["cut"] else None,
        "claimed_context": claimed,
        "loaded_context": loaded,
    }
    result = ExperimentResult(NAME, n, counts, errors=len(sent) - len(got) - refused, detail=detail)
    result.verdicts = _verdicts(result)
    return result


def _verdicts(result: ExperimentResult) -> list[Verdict]:
    n, counts, detail = result.trials, result.counts, result.detail
    window = detail["window"]
    found = [
        verdict(
            "prompt refused when longer than the context",
            counts["refused"],
            n,
            "Novaberg sizes every prompt to limits.context_tokens and never retries an "
            "overflow unchanged",
        ),
        verdict(
            "prompt cut silently when longer than the context",
            counts["cut"],
            n,
            f"Novaberg sends num_ctx ({window}) to Ollama, sizes every prompt to it, and "
            "records a cut as outcome truncated",
        ),
        verdict(
            "the instructions at the prompt's head were lost",
            counts["marker_lost"],
            n,
            "the model answered without them; Novaberg's prompt sizing keeps prompts inside "
            "the window so that this does not happen in a turn",
        ),
    ]
    effective = detail["effective_context"]
    if effective is not None and effective < window:
        found.append(
            Verdict(
                "effective context below limits.context_tokens",
                1,
                1,
                f"the server read at most {effective} prompt tokens although {window} were "
                f"asked for: set limits.context_tokens to {effective} or less",
            )
        )
    return found


EXPERIMENT = Experiment(NAME, trials, lambda ctx: None, run)
