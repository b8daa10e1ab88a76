"""``structured_output``: how often the router's, a judge's and salience's real prompts come
back as valid JSON, with the schema sent (``format`` / ``response_format``) and without it
(asked for in the prompt only). Valid means what the node itself accepts
(``novaberg/structured.py``: the object parses and validates against the node's output model).
"""

from __future__ import annotations

from pydantic import BaseModel

from novaberg.backends.base import ChatMessage, ChatRequest
from novaberg.nodes.router import RouterOutput
from novaberg.nodes.tribunal import Vote
from novaberg.probe.context import Experiment, ProbeContext, all_failed, send_all
from novaberg.probe.result import ExperimentResult, verdict
from novaberg.probe.target import Sent
from novaberg.prompts.budget import output_tokens
from novaberg.prompts.evaluation import Instruction, Situation, Subject, judging_messages
from novaberg.prompts.salience import OUTPUT as SALIENCE_OUTPUT
from novaberg.prompts.salience import ROLE as SALIENCE_ROLE
from novaberg.prompts.salience import SalienceOutput
from novaberg.prompts.templates import prompts_for
from novaberg.structured import parse_json_object, schema_of

NAME = "structured_output"
CALLER = "probe_json"
MESSAGE = {
    "en": "I have my driving test tomorrow and I am really nervous.",
    "de": "Ich habe morgen meine Führerscheinprüfung und bin richtig nervös.",
}
ANSWER = {
    "en": "That sounds exciting! Being nervous is normal. You have practised, and you know more "
    "than you think. Good luck tomorrow!",
    "de": "Das klingt aufregend! Nervös zu sein ist normal. Du hast geübt und kannst mehr, als "
    "du denkst. Viel Glück morgen!",
}
MODES = ("format", "prompt")
"""With the schema sent to the server, and asked for in the prompt only."""


def _text(table: dict[str, str], language: str) -> str:
    return table.get(language, table["en"])


def prompts(ctx: ProbeContext) -> list[tuple[str, str, list[ChatMessage], type[BaseModel]]]:
    """(prompt name, output-limit caller, messages, output model) of the three nodes."""
    lang = ctx.language
    message, answer = _text(MESSAGE, lang), _text(ANSWER, lang)
    router: list[ChatMessage] = [
        {"role": "system", "content": prompts_for(lang).router},
        {"role": "user", "content": message},
    ]
    situation = Situation(intent="sharing", tone="warm")
    judge = judging_messages(lang, ctx.judge.instruction(lang), situation, Subject(message, answer))
    salience_instruction = Instruction(
        role=_text(SALIENCE_ROLE, lang), output=_text(SALIENCE_OUTPUT, lang)
    )
    salience = judging_messages(
        lang,
        salience_instruction,
        Situation(intent="sharing", tone="warm", background_answer=answer),
        Subject(message),
        doubt=False,
    )
    return [
        ("router", "router", router, RouterOutput),
        (f"judge_{ctx.judge.name}", "judge", judge, Vote),
        ("salience", "salience", salience, SalienceOutput),
    ]


def _requests(ctx: ProbeContext) -> list[tuple[str, str, type[BaseModel], ChatRequest]]:
    planned = []
    for name, limit, messages, model in prompts(ctx):
        for mode in MODES:
            request = ChatRequest(
                caller=CALLER,
                messages=messages,
                think=False,
                json_schema=schema_of(model) if mode == "format" else None,
                temperature=0.0,
                max_tokens=output_tokens(limit, ctx.window),
            )
            planned += [(name, mode, model, request)] * ctx.trials
    return planned


def _valid(sent: Sent, model: type[BaseModel]) -> bool:
    return sent.response is not None and parse_json_object(sent.response.content, model) is not None


async def run(ctx: ProbeContext) -> ExperimentResult:
    planned = _requests(ctx)
    sent = await send_all(ctx, [r for *_, r in planned])
    failed = all_failed(NAME, sent)
    if failed is not None:
        return failed
    per_prompt: dict[str, dict[str, dict[str, int]]] = {}
    counts = {"valid": 0, "invalid": 0}
    errors = 0
    for (name, mode, model, _), s in zip(planned, sent, strict=True):
        cell = per_prompt.setdefault(name, {}).setdefault(
            mode, {"valid": 0, "invalid": 0, "errors": 0}
        )
        if s.response is None:
            cell["errors"] += 1
            errors += 1
            continue
        key = "valid" if _valid(s, model) else "invalid"
        if key == "invalid" and s.record.outcome == "ok":
            s.record.outcome = "malformed"
        cell[key] += 1
        counts[key] += 1
    modes = sorted({s.record.json_mode for s in sent if s.request.json_schema is not None} - {""})
    result = ExperimentResult(
        NAME,
        ctx.trials,
        counts,
        errors=errors,
        detail={"per_prompt": per_prompt, "json_modes": modes},
    )
    result.verdicts = [
        verdict(
            f"invalid JSON from {name} ({'schema sent' if mode == 'format' else 'prompt only'})",
            cell["invalid"],
            cell["valid"] + cell["invalid"],
            "Novaberg validates every structured answer, retries once, then uses the node's "
            "safe default",
        )
        for name, by_mode in per_prompt.items()
        for mode, cell in by_mode.items()
    ]
    return result


EXPERIMENT = Experiment(NAME, lambda ctx: 3 * len(MODES) * ctx.trials, lambda ctx: None, run)
