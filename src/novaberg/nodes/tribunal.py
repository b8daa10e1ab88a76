"""Tribunal: judges vote ``ok`` or ``revise`` on the answer, each from one perspective.

Every judge gets the same SITUATION/SUBJECT prompt (``prompts/evaluation.py``) with its own role
and negative examples, sends ``think: false`` and must return ``{"vote", "reason"}``. The judges
of a round run concurrently through the model queue. Output that does not validate is retried
once; then the vote counts as ``ok`` and says it was malformed (a broken judge must not block
an answer, and must not pass unnoticed either).

A judge whose call fails after the queue's retries (HTTP errors, timeouts, no backend)
abstains: its vote is ``"abstained"`` with ``abstained: true`` and the reason, counted neither
as ok nor as revise, the trace gets a notice naming the judge, and the others' votes decide. A
judge that failed is not asked again in a later round of the same turn. When the corrector
failed, the answer is unchanged: no second vote, the corrections end there.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.backends.base import ChatMessage
from novaberg.config import Settings
from novaberg.errors import BackendError
from novaberg.graph.channels import Ballot, Court
from novaberg.graph.failure import describe, record_failure
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts.budget import judging_prompt
from novaberg.prompts.evaluation import Situation, Subject
from novaberg.prompts.judges import BUILTIN_JUDGES, JudgeSpec, custom_judge
from novaberg.structured import ask_structured, schema_of


class Vote(BaseModel):
    model_config = ConfigDict(extra="ignore")
    vote: Literal["ok", "revise"]
    reason: str = Field(default="", max_length=600)


def configured_judges(settings: Settings) -> list[JudgeSpec]:
    specs = []
    for name in settings.tribunal.judges:
        custom = settings.tribunal.custom.get(name)
        specs.append(
            custom_judge(name, custom.focus, custom.not_a_problem)
            if custom
            else BUILTIN_JUDGES[name]
        )
    return specs


def judge_messages(state: TurnState, ctx: TurnContext, judge: JudgeSpec) -> list[ChatMessage]:
    language = ctx.settings.language
    situation = Situation.from_state(state)
    subject = Subject(state["user_text"], state["reply"])
    instruction = judge.instruction(language)
    caller, schema = f"judge_{judge.name}", schema_of(Vote)
    return judging_prompt(ctx, caller, instruction, situation, subject, json_schema=schema)


def abstention(judge: str, reason: str) -> Ballot:
    return Ballot(judge=judge, vote="abstained", reason=reason, abstained=True)


async def _vote(
    state: TurnState, ctx: TurnContext, judge: JudgeSpec, failed_before: bool
) -> Ballot:
    if failed_before:
        return abstention(judge.name, "no vote: failed earlier in this turn")
    caller = f"judge_{judge.name}"
    try:
        parsed = await _ask(state, ctx, judge)
    except BackendError as exc:
        record_failure(ctx, caller, exc, "it abstained; the other judges' votes decide")
        return abstention(judge.name, f"no vote: {describe(exc)}")
    if parsed is None:
        return Ballot(judge=judge.name, vote="ok", reason="", malformed=True)
    return Ballot(judge=judge.name, vote=parsed.vote, reason=parsed.reason.strip())


async def _ask(state: TurnState, ctx: TurnContext, judge: JudgeSpec) -> Vote | None:
    caller = f"judge_{judge.name}"
    return await ask_structured(ctx, caller, judge_messages(state, ctx, judge), Vote)


def has_judges(state: TurnState, ctx: TurnContext) -> bool:
    """Whether the tribunal will vote (it does nothing with no judge configured)."""
    return bool(configured_judges(ctx.settings))


async def tribunal(state: TurnState, ctx: TurnContext) -> TurnState:
    judges = configured_judges(ctx.settings)
    if not judges:
        return {}  # no tribunal configured: the channel stays null
    previous = state.get("tribunal")
    corrected = state.get("corrector")
    if previous is not None and corrected is not None and corrected.failed:
        # the answer did not change
        return {"tribunal": replace(previous, correcting=False)}
    before = previous.history if previous is not None else ()
    failed = {v.judge for round_ in before for v in round_ if v.abstained}
    votes = tuple(await asyncio.gather(*(_vote(state, ctx, j, j.name in failed) for j in judges)))
    history = (*before, votes)
    corrections = corrected.rounds if corrected is not None else 0
    correcting = (
        any(v.vote == "revise" for v in votes)
        and corrections < ctx.settings.tribunal.max_corrections
    )
    court = Court(rounds=len(history), votes=votes, history=history, correcting=correcting)
    return {"tribunal": court}


def route_after_tribunal(state: TurnState) -> str:
    """To the corrector when a judge asked for a revision and rounds are left, else on."""
    court = state.get("tribunal")
    return "corrector" if court is not None and court.correcting else ""
