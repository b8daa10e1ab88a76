"""``dropped_tool_call``: the seed's experiment (../shared/seeds/001, ollama#19187).

The system prompt tells the model to look up every order with ``lookup_order`` and never to
answer from memory; the user asks about an order. Condition ``undeclared``: the request
declares only ``get_time``; condition ``declared``: it declares both. A dropped call is what
the project's guard (``backends/guards.py``) calls one: empty content, no tool calls, no
thinking, ``eval_count > 0``. The seed measured 28 of 32 dropped undeclared, 2 of 32 declared.
"""

from __future__ import annotations

from typing import Any

from novaberg.backends.base import ChatRequest
from novaberg.probe.context import Experiment, ProbeContext, all_failed, answered, send_all
from novaberg.probe.result import ExperimentResult, verdict
from novaberg.probe.target import Sent

NAME = "dropped_tool_call"
CALLER = "probe_tools"
ASKED_FOR = "lookup_order"
SYSTEM = (
    "You are the order assistant of a small shop. For EVERY question about an order, call the "
    f"function {ASKED_FOR} with the order number; never answer from memory."
)
QUESTION = "Where is my order 4711? It has not arrived yet."


def _tool(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties},
        },
    }


GET_TIME = _tool("get_time", "The current date and time.", {})
LOOKUP_ORDER = _tool(ASKED_FOR, "The status of an order.", {"order_id": {"type": "string"}})


def request(declared: bool) -> ChatRequest:
    return ChatRequest(
        caller=CALLER,
        messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}],
        think=False,
        tools=[GET_TIME, LOOKUP_ORDER] if declared else [GET_TIME],
        temperature=0.7,
        max_tokens=256,
    )


def _skip(ctx: ProbeContext) -> str | None:
    if ctx.target.can("tools") is False:
        return "the model does not report the tools capability (/api/show)"
    return None


def _tally(sent: list[Sent]) -> dict[str, int]:
    got = answered(sent)
    return {
        "dropped": sum(1 for s in got if s.record.outcome == "dropped_tool_call"),
        "called": sum(
            1 for s in got if s.response and any(c.name == ASKED_FOR for c in s.response.tool_calls)
        ),
        "answered_in_text": sum(
            1
            for s in got
            if s.response and s.response.content.strip() and not s.response.tool_calls
        ),
        "errors": len(sent) - len(got),
    }


async def run(ctx: ProbeContext) -> ExperimentResult:
    n = ctx.trials
    sent = await send_all(ctx, [request(False)] * n + [request(True)] * n)
    failed = all_failed(NAME, sent)
    if failed is not None:
        return failed
    undeclared, declared = _tally(sent[:n]), _tally(sent[n:])
    result = ExperimentResult(
        NAME,
        n,
        {"declared_dropped": declared["dropped"], "undeclared_dropped": undeclared["dropped"]},
        errors=undeclared["errors"] + declared["errors"],
        detail={"undeclared": undeclared, "declared": declared},
    )
    result.verdicts = [
        verdict(
            f"tool call dropped, {ASKED_FOR} not declared",
            undeclared["dropped"],
            n,
            "Novaberg declares every tool name in every tool-bearing request, and retries a "
            "dropped call once with the full list",
        ),
        verdict(
            f"tool call dropped, {ASKED_FOR} declared",
            declared["dropped"],
            n,
            "the model queue retries a dropped call once (and, when thinking was on, once more "
            "with think: false)",
        ),
    ]
    return result


EXPERIMENT = Experiment(NAME, lambda ctx: 2 * ctx.trials, _skip, run)
