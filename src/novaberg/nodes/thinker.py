"""Thinker: a reasoning loop with tools that checks the draft and keeps or revises it.

Each iteration is one ``think: true`` call that declares every registered tool and must end
with one control line (``TOOL: …``, ``RESULT: OK``, ``RESULT: REVISED`` + answer; German
``ERGEBNIS:`` too; a native tool call counts as ``TOOL:``). What the model returned is read
through the normaliser of the backend and model that ANSWERED (``thinking.py``):

* case 1 (content empty, control line at the end of thinking): moved, no extra call;
* case 2 (content empty, prose only): a follow-up call, ``think: false``, caller
  ``thinker_nachfass``, hands over the reasoning and asks only for the control line — at most
  two per turn, not counted against ``max_iterations``;
* both follow-ups fail: the last resort — the draft stays, a neutral gesture is appended, and a
  self-trigger event asks for a second full pass whose answer reaches the user as a follow-up
  message. A self-triggered pass never self-triggers again.

Its calls failing after the queue's retries do not fail the turn: the draft stays as it is,
unchecked, and the trace says so (:data:`FALLBACK`, ``graph/failure.py``).
"""

from __future__ import annotations

import json
import logging

from novaberg.backends.base import ChatMessage, ChatRequest
from novaberg.errors import error_kind
from novaberg.graph.channels import ThinkerRun, TurnEvent
from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts import thinker as texts
from novaberg.prompts.budget import bounded_reply
from novaberg.prompts.neutral import neutralise
from novaberg.storage.events import EventPayload
from novaberg.thinking import Control, normalizer_for, parse_control
from novaberg.tools.registry import ToolEnv

log = logging.getLogger("novaberg")
MAX_FOLLOW_UPS = 2


def should_run(state: TurnState, ctx: TurnContext) -> bool:
    mode = ctx.settings.thinker.mode
    route = state.get("router")
    needs_check = route is not None and route.needs_check
    return mode == "always" or (mode == "auto" and needs_check)


def _text(table: dict[str, str], language: str) -> str:
    return table.get(language, table["en"])


class _Loop:
    """One turn's reasoning: the conversation with the model and the counters."""

    def __init__(self, state: TurnState, ctx: TurnContext) -> None:
        self.state, self.ctx = state, ctx
        self.language = ctx.settings.language
        self.draft = state.get("reply") or ""
        system = _text(texts.SYSTEM, self.language).replace("{tools}", ", ".join(ctx.tools.names))
        task = _text(texts.TASK, self.language).format(
            message=neutralise(state["user_text"]), draft=neutralise(self.draft)
        )
        self.messages: list[ChatMessage] = [
            {"role": "system", "content": system},
            {"role": "user", "content": task},
        ]
        self.iterations = 0
        self.follow_ups = 0
        self.tools_used: list[str] = []
        self.env = ToolEnv(
            db=ctx.db,
            user_id=state["user_id"],
            settings=ctx.settings,
            queue=ctx.queue,
            trace=ctx.trace,
        )

    async def decide(self) -> Control | None:
        """One thinking call, read through the answering model's normaliser."""
        self.iterations += 1
        request = ChatRequest(
            caller="thinker", messages=self.messages, think=True, tools=self.ctx.tools.specs()
        )
        result = await self.ctx.llm(request)
        response = result.response
        normalizer = normalizer_for(response.backend, response.model)
        result.record.normalizer = normalizer.name
        if response.tool_calls:
            call = response.tool_calls[0]
            return Control(
                "tool",
                tool=call.name,
                arguments=call.arguments,
                raw=f"TOOL: {call.name}({json.dumps(call.arguments)})",
            )
        normalized = normalizer.normalize(response)
        if normalized.outcome != "ok" and result.record.outcome in ("ok", "empty_answer"):
            result.record.outcome = normalized.outcome
        control = parse_control(normalized.content)
        if control is None and result.record.outcome == "ok":
            result.record.outcome = "malformed"  # text, but no control line: not usable
        material = response.thinking or response.content
        while control is None and material.strip() and self.follow_ups < MAX_FOLLOW_UPS:
            control = await self.follow_up(material)
        return control

    async def follow_up(self, reasoning: str) -> Control | None:
        """Case 2: ask only for the decision, with the reasoning as material."""
        self.follow_ups += 1
        messages: list[ChatMessage] = [
            {"role": "system", "content": _text(texts.FOLLOW_UP, self.language)},
            self.messages[1],
            {
                "role": "user",
                "content": _text(texts.REASONING, self.language).format(
                    reasoning=neutralise(reasoning)
                ),
            },
        ]
        result = await self.ctx.llm(
            ChatRequest(caller="thinker_nachfass", messages=messages, think=False)
        )
        control = parse_control(result.response.content)
        if control is None and result.record.outcome == "ok":
            result.record.outcome = "malformed"
        return control

    async def use_tool(self, control: Control) -> None:
        outcome = await self.ctx.tools.call(control.tool, control.arguments, self.env)
        self.tools_used.append(control.tool)
        self.messages.append({"role": "assistant", "content": control.raw})
        self.messages.append(
            {"role": "tool", "tool_name": control.tool, "content": outcome.for_model()}
        )

    def summary(self, result: str) -> ThinkerRun:
        return ThinkerRun(
            iterations=self.iterations,
            followup_calls=self.follow_ups,
            result=result,
            tools=tuple(self.tools_used),
            # the memory items memory_search showed the thinker, as retrieval records them:
            # forget erases a turn that drew on a forgotten item
            recalled=tuple(dict.fromkeys(self.env.recalled)),
            recalled_messages=tuple(dict.fromkeys(self.env.recalled_messages)),
        )


async def thinker(state: TurnState, ctx: TurnContext) -> TurnState:
    if not should_run(state, ctx):
        return {}
    loop = _Loop(state, ctx)
    while loop.iterations < ctx.settings.thinker.max_iterations:
        control = await loop.decide()
        if control is None:
            return await _last_resort(state, ctx, loop)
        if control.kind == "tool":
            await loop.use_tool(control)
            continue
        if control.kind == "revised" and control.answer:
            revised = bounded_reply(ctx, "thinker", control.answer)
            return {"reply": revised, "thinker": loop.summary("revised")}
        return {"thinker": loop.summary("ok")}
    log.info("thinker reached max_iterations (%d); the draft stays", loop.iterations)
    return {"thinker": loop.summary("max_iterations")}


async def _last_resort(state: TurnState, ctx: TurnContext, loop: _Loop) -> TurnState:
    """No decision even after the follow-ups: keep the draft, promise a second look — but
    only if the second pass was really scheduled."""
    if state.get("origin") in ("self_trigger", "proactive"):
        # a second pass never self-triggers, nor does a message Nova writes first
        return {"thinker": loop.summary("unresolved")}
    try:
        event_id = await ctx.db.run(
            ctx.events.enqueue,
            state["conversation_id"],
            state["turn_id"],
            "self_trigger",
            EventPayload(user_text=state["user_text"], draft=loop.draft),
        )
    except Exception as exc:
        log.error(
            "self-trigger could NOT be enqueued (%s); the draft stays without a "
            "promise of a follow-up",
            error_kind(exc),
        )
        return {"thinker": loop.summary("unresolved")}
    gesture = _text(texts.GESTURE, ctx.settings.language)
    return {
        "reply": f"{loop.draft}\n\n{gesture}",
        "thinker": loop.summary("last_resort"),
        "events": [TurnEvent(type="self_trigger", id=event_id, status="pending")],
    }


def _draft_kept(state: TurnState, ctx: TurnContext) -> TurnState:
    """The thinker failed: its calls so far, counted from the trace; the draft stays."""
    first = [c.caller for c in ctx.trace.calls if c.attempt == 1]
    return {
        "thinker": ThinkerRun(
            iterations=first.count("thinker"),
            followup_calls=first.count("thinker_nachfass"),
            result="failed",
        )
    }


FALLBACK = Fallback(_draft_kept, "the draft stays unchecked")
