"""Responder: writes Nova's draft answer. It generates, it does not judge: it sees everything."""

from __future__ import annotations

from datetime import date
from typing import Any

from novaberg.backends.base import ChatRequest
from novaberg.errors import ModelOutputError
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts.neutral import as_item, as_line, neutralise
from novaberg.prompts.thinker import SECOND_PASS


def build_messages(state: TurnState, ctx: TurnContext) -> list[dict[str, Any]]:
    p = ctx.prompts
    context = state.get("context") or {}
    route = state.get("router") or {}
    memories = context.get("memories") or []
    parts = [p.persona]
    if memories:
        parts.append(p.memory_intro + "\n" + "\n".join(as_item(m["text"]) for m in memories))
    profile = context.get("profile") or {}
    lines = [neutralise(profile[part]) for part in ("core", "adaptive") if profile.get(part)]
    if lines:
        parts.append(p.profile_intro + "\n" + "\n".join(lines))
    timeline = context.get("timeline") or []
    if timeline:
        intro = p.timeline_intro.format(today=date.today().isoformat())
        items = [as_item(t["text"], f"- {as_line(t['date'])}: ") for t in timeline]
        parts.append(intro + "\n" + "\n".join(items))
    if route.get("tone"):
        parts.append(p.tone_line.format(tone=as_line(str(route["tone"]))))
    if state.get("origin") == "self_trigger":
        parts.append(SECOND_PASS.get(p.language, SECOND_PASS["en"]))
    system = "\n\n".join(parts)
    return [
        {"role": "system", "content": system},
        *context.get("history", []),
        {"role": "user", "content": state["user_text"]},
    ]


async def responder(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    request = ChatRequest(caller="responder", messages=build_messages(state, ctx), think=False)
    for _ in range(2):
        result = await ctx.llm(request, on_token=ctx.on_token)
        text = result.response.content.strip()
        if text:
            return {"draft": text, "reply": text}
    raise ModelOutputError(
        f"{result.record.backend}/{result.record.model} returned an empty answer twice "
        "(recorded as empty_answer). Try again, or try another model (NOVABERG_MODEL)."
    )
