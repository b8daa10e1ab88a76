"""Tribunal: judges vote ``ok`` or ``revise`` on the answer, each from one perspective.

Every judge gets the same SITUATION/SUBJECT prompt (``prompts/evaluation.py``) with its own role
and negative examples, sends ``think: false`` and must return ``{"vote", "reason"}``. The judges
of a round run concurrently through the model queue. Output that does not validate is retried
once; then the vote counts as ``ok`` and says it was malformed (a broken judge must not block
an answer, and must not pass unnoticed either).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.config import Settings
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.nodes.structured import ask_structured, schema_of
from novaberg.prompts.budget import judging_prompt
from novaberg.prompts.evaluation import Situation, Subject
from novaberg.prompts.judges import BUILTIN_JUDGES, JudgeSpec, custom_judge


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


def judge_messages(state: TurnState, ctx: TurnContext, judge: JudgeSpec) -> list[dict[str, Any]]:
    language = ctx.settings.language
    situation = Situation.from_state(state)
    subject = Subject(state["user_text"], state["reply"])
    instruction = judge.instruction(language)
    caller, schema = f"judge_{judge.name}", schema_of(Vote)
    return judging_prompt(ctx, caller, instruction, situation, subject, json_schema=schema)


async def _vote(state: TurnState, ctx: TurnContext, judge: JudgeSpec) -> dict[str, Any]:
    parsed = await ask_structured(
        ctx, f"judge_{judge.name}", judge_messages(state, ctx, judge), Vote
    )
    if parsed is None:
        return {"judge": judge.name, "vote": "ok", "reason": "", "malformed": True}
    return {
        "judge": judge.name,
        "vote": parsed.vote,
        "reason": parsed.reason.strip(),
        "malformed": False,
    }


async def tribunal(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    judges = configured_judges(ctx.settings)
    if not judges:
        return {}  # no tribunal configured: the channel stays null
    votes = list(await asyncio.gather(*(_vote(state, ctx, j) for j in judges)))
    previous = state.get("tribunal") or {}
    history = [*previous.get("history", []), votes]
    corrections = (state.get("corrector") or {}).get("rounds", 0)
    correcting = (
        any(v["vote"] == "revise" for v in votes)
        and corrections < ctx.settings.tribunal.max_corrections
    )
    return {
        "tribunal": {
            "rounds": len(history),
            "votes": votes,
            "history": history,
            "correcting": correcting,
        }
    }


def route_after_tribunal(state: TurnState) -> str:
    """To the corrector when a judge asked for a revision and rounds are left, else on."""
    return "corrector" if (state.get("tribunal") or {}).get("correcting") else ""
