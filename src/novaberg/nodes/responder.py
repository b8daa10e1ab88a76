"""Responder: writes Nova's draft answer. It generates, it does not judge: it sees everything."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import date

from novaberg.backends.base import ChatMessage, ChatRequest
from novaberg.echo import EchoFilter, EchoGuard
from novaberg.errors import ModelOutputError
from novaberg.graph.channels import Context, Resolved
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.proactive.due import RULE as PROACTIVE_RULE
from novaberg.proactive.reminders import confirmation
from novaberg.prompts.budget import (
    Budget,
    bounded_reply,
    capped_stream,
    cut_middle,
    estimate_tokens,
    fit_background,
    fit_history,
    fit_situation,
    messages_tokens,
    note,
)
from novaberg.prompts.evaluation import Situation
from novaberg.prompts.neutral import as_item, as_line, neutralise
from novaberg.prompts.templates import Prompts
from novaberg.prompts.thinker import SECOND_PASS

log = logging.getLogger("novaberg")


def _background(p: Prompts, situation: Situation) -> list[str]:
    """Memory, profile, timeline and a front-end's setting as parts of the system prompt (the
    user's words, so neutralised: they cannot forge a header or a control line)."""
    parts = []
    if situation.memories:
        parts.append(p.memory_intro + "\n" + "\n".join(as_item(m) for m in situation.memories))
    lines = [neutralise(text) for text in (situation.profile_core, situation.profile_adaptive)]
    if any(lines):
        parts.append(p.profile_intro + "\n" + "\n".join(line for line in lines if line))
    if situation.timeline:
        intro = p.timeline_intro.format(today=date.today().isoformat())
        items = [as_item(text, f"- {as_line(day)}: ") for day, text in situation.timeline]
        parts.append(intro + "\n" + "\n".join(items))
    if situation.frontend:
        parts.append(p.frontend_intro + "\n" + neutralise(situation.frontend))
    if situation.attached:
        parts.append(p.attached_intro + "\n" + neutralise(situation.attached))
    return parts


def correction_rule(p: Prompts, found: Resolved) -> str:
    """What Nova is told about a correction the user just made (their words, quoted as one
    line each: they cannot forge a section)."""

    def quote(text: str | None) -> str:
        return f'"{as_line(text or "")}"'

    if found.outcome == "correct":
        return p.corrected.format(old=quote(found.old), new=quote(found.new))
    if found.outcome == "retract":
        return p.retracted.format(old=quote(found.old))
    if found.outcome == "ambiguous":
        options = "; ".join(quote(o) for o in found.options)
        return p.ambiguous.format(wrong=quote(found.wrong), options=options)
    return p.unmatched.format(wrong=quote(found.wrong))


def build_messages(state: TurnState, ctx: TurnContext) -> list[ChatMessage]:
    """Persona, background, tone and the user's message, within the responder's budget
    (prompts/budget.py): the message whole, the background within limits.situation_tokens,
    the newest history within limits.history_tokens and what the window leaves."""
    p = ctx.prompts
    context = state.get("context") or Context()
    route = state.get("router")
    rules = []
    if route is not None and route.tone:
        rules.append(p.tone_line.format(tone=as_line(route.tone)))
    if state.get("origin") == "self_trigger":
        rules.append(SECOND_PASS.get(p.language, SECOND_PASS["en"]))
    if state.get("origin") == "proactive":
        rules.append(PROACTIVE_RULE.get(p.language, PROACTIVE_RULE["en"]))
    if context.correction:
        rules.append(correction_rule(p, context.correction))
    if context.reminder:
        rules.append(confirmation(context.reminder, p.language))
    message = state["user_text"]

    def assemble(situation: Situation, history: list[ChatMessage], text: str) -> list[ChatMessage]:
        system = "\n\n".join([p.persona, *_background(p, situation), *rules])
        return [
            {"role": "system", "content": system},
            *history,
            {"role": "user", "content": text},
        ]

    budget = Budget.of(ctx, "responder")
    everything = Situation.from_state(state)
    if ctx.shown is not None:
        everything = replace(
            everything, frontend=ctx.shown.system or "", attached=ctx.shown.attached
        )
    bare = fit_situation(everything, 0)[0]
    fixed = messages_tokens(assemble(bare, [], message))
    if fixed > budget.prompt:  # last resort: the message alone does not fit the window
        message = cut_middle(message, estimate_tokens(message) - (fixed - budget.prompt) - 4)
        note(ctx.trace, "responder", "the user's message cut from the middle to fit the window")
        fixed = messages_tokens(assemble(bare, [], message))
    room = max(0, budget.prompt - fixed)
    situation, cuts = fit_background(
        everything,
        min(budget.situation, room),
        lambda s: messages_tokens(assemble(s, [], message)) - fixed,
    )
    spent = messages_tokens(assemble(situation, [], message)) - fixed
    history, cut_history = fit_history(
        [line.message() for line in context.history], min(budget.history, room - spent)
    )
    for what in [*cuts, *([cut_history] if cut_history else [])]:
        note(ctx.trace, "responder", what)
    return assemble(situation, history, message)


def instruction_texts(prompts: Prompts) -> list[str]:
    """Nova's own instructions in the responder's system prompt, which a reply must never
    repeat (the echo guard); memory, profile and timeline are the user's and may be quoted."""
    today = date.today().isoformat()
    return [
        prompts.persona,
        prompts.memory_intro,
        prompts.profile_intro,
        prompts.timeline_intro.format(today=today),
        prompts.frontend_intro,
        prompts.attached_intro,
        SECOND_PASS.get(prompts.language, SECOND_PASS["en"]),
        PROACTIVE_RULE.get(prompts.language, PROACTIVE_RULE["en"]),
    ]


async def responder(state: TurnState, ctx: TurnContext) -> TurnState:
    request = ChatRequest(caller="responder", messages=build_messages(state, ctx), think=False)
    guard = EchoGuard(instruction_texts(ctx.prompts))
    rest = ""
    for attempt in range(2):
        stream = EchoFilter(guard, ctx.on_token)
        # capped before the echo filter, which re-reads all it holds at every piece
        feed = capped_stream(stream.feed, ctx.settings.limits.reply_chars)
        result = await ctx.llm(request, on_token=feed if ctx.on_token else None)
        text = result.response.content.strip()
        echo = guard.find(text)
        await stream.finish(echo)
        if echo is None and text:
            text = bounded_reply(ctx, "responder", text)
            return {"draft": text, "reply": text}
        if echo is not None:  # never shown or kept: regenerated once, then cut
            rest = echo.cut(text)
            step = "regenerated" if attempt == 0 else "cut" if rest else "nothing left"
            result.record.outcome = "malformed"
            result.record.error = (
                f"echo: the reply repeated {echo.words} words of the system prompt; {step}"
            )
            log.warning("responder: the reply repeated the system prompt; %s", step)
    if rest:
        rest = bounded_reply(ctx, "responder", rest)
        return {"draft": rest, "reply": rest}
    what = "an empty answer" if result.record.outcome == "empty_answer" else "only its instructions"
    raise ModelOutputError(
        f"{result.record.backend}/{result.record.model} returned {what} twice "
        "(recorded as empty_answer or malformed). Try again, or try another model "
        "(NOVABERG_MODEL; on the embedded backend NOVABERG_EMBEDDED_MODEL)."
    )
