"""``think_split``: does the server put the thinker's decision where Novaberg looks for it?

N thinking calls with the thinker's own protocol (``prompts/thinker.py``: the system text, a
message and a draft to check, every built-in tool declared), each read with the project's
:class:`~novaberg.thinking.ThinkSplitNormalizer`, so the counts are what the thinker would see:
``clean`` (the content holds the answer, or a native tool call came), ``case1`` (content empty,
the control line at the end of thinking), ``case2`` (content empty, prose only). Mean content
and thinking lengths beside them (the seed's first measurement).
"""

from __future__ import annotations

from novaberg.backends.base import ChatRequest
from novaberg.probe.context import Experiment, ProbeContext, all_failed, answered, mean, send_all
from novaberg.probe.result import ExperimentResult, Verdict, verdict
from novaberg.prompts import thinker as texts
from novaberg.prompts.budget import output_tokens
from novaberg.thinking import ThinkSplitNormalizer, normalizer_for, parse_control
from novaberg.tools.builtin import builtin_registry

NAME = "think_split"
CALLER = "probe_think_split"
MESSAGE = {
    "en": "When was the Eiffel Tower finished?",
    "de": "Wann wurde der Eiffelturm fertiggestellt?",
}
DRAFT = {  # a wrong year, so that there is something to check
    "en": "The Eiffel Tower was finished in 1899, for the World's Fair.",
    "de": "Der Eiffelturm wurde 1899 fertiggestellt, zur Weltausstellung.",
}


def _skip(ctx: ProbeContext) -> str | None:
    if ctx.target.can("thinking") is False:
        return "the model does not report the thinking capability (/api/show)"
    return None


def request(ctx: ProbeContext) -> ChatRequest:
    lang = ctx.language if ctx.language in texts.SYSTEM else "en"
    registry = builtin_registry()
    tools = registry.specs() if ctx.target.can("tools") is not False else []
    system = texts.SYSTEM[lang].replace("{tools}", ", ".join(registry.names) if tools else "-")
    task = texts.TASK[lang].format(message=MESSAGE[lang], draft=DRAFT[lang])
    return ChatRequest(
        caller=CALLER,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": task}],
        think=True,
        tools=tools,
        max_tokens=output_tokens("thinker", ctx.window),
    )


async def run(ctx: ProbeContext) -> ExperimentResult:
    sent = await send_all(ctx, [request(ctx)] * ctx.trials)
    failed = all_failed(NAME, sent)
    if failed is not None:
        return failed
    counts = {"clean": 0, "case1": 0, "case2": 0}
    empty = no_control = 0
    handled_by: set[str] = set()
    for s in answered(sent):
        response = s.response
        assert response is not None
        used = normalizer_for(response.backend, response.model)
        handled_by.add(used.name)
        s.record.normalizer = used.name
        if response.tool_calls:
            counts["clean"] += 1
            continue
        normalized = ThinkSplitNormalizer().normalize(response)
        if normalized.outcome == "think_split_moved":
            counts["case1"] += 1
        elif normalized.outcome == "think_split_prose":
            counts["case2"] += 1
        elif normalized.outcome == "empty_answer":
            empty += 1
        else:
            counts["clean"] += 1
            no_control += parse_control(normalized.content) is None
        if normalized.outcome != "ok" and s.record.outcome in ("ok", "empty_answer"):
            s.record.outcome = normalized.outcome
    got = [s.response for s in answered(sent) if s.response is not None]
    result = ExperimentResult(
        NAME,
        ctx.trials,
        counts,
        errors=len(sent) - len(got),
        detail={
            "empty": empty,
            "no_control_line": no_control,
            "mean_content_chars": mean([len(r.content) for r in got]),
            "mean_thinking_chars": mean([len(r.thinking) for r in got]),
            "normalizer": ", ".join(sorted(handled_by)),
            "stopped_at_limit": sum(1 for r in got if r.done_reason == "length"),
            "output_limit": sent[0].request.max_tokens,
        },
    )
    result.verdicts = _verdicts(result, "think_split" in handled_by)
    return result


def _verdicts(result: ExperimentResult, split_handled: bool) -> list[Verdict]:
    n = result.trials
    if split_handled:
        case1 = (
            "Novaberg's ThinkSplitNormalizer moves the control line to the content, no extra call"
        )
        case2 = (
            "Novaberg's ThinkSplitNormalizer will handle it: a follow-up call "
            "(thinker_nachfass, think: false) asks for the decision"
        )
    else:
        case1 = case2 = (
            "this backend gets no ThinkSplitNormalizer; the thinker's follow-up call "
            "(thinker_nachfass) asks for the decision"
        )
    found = [
        verdict("case 1 (decision at the end of thinking)", result.counts["case1"], n, case1),
        verdict("case 2 (prose only in thinking)", result.counts["case2"], n, case2),
    ]
    empty = int(result.detail["empty"])
    if empty:
        found.append(
            verdict(
                "empty answer (no content, no thinking)", empty, n, "the thinker keeps the draft"
            )
        )
    no_control = int(result.detail["no_control_line"])
    if no_control:
        found.append(
            verdict(
                "content without a control line",
                no_control,
                n,
                "recorded as malformed; the follow-up call asks for the decision",
            )
        )
    stopped = int(result.detail["stopped_at_limit"])
    if stopped:
        found.append(
            verdict(
                f"stopped at the thinker's output limit ({result.detail['output_limit']} tokens)",
                stopped,
                n,
                "recorded as truncated; a long reasoner may need fewer thinking tokens",
            )
        )
    return found


EXPERIMENT = Experiment(NAME, lambda ctx: ctx.trials, _skip, run)
