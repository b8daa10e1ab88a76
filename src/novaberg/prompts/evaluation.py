"""The one prompt builder of every judging node: SITUATION and SUBJECT, kept apart.

An LLM cannot "not look" at what it is shown (../shared/seeds/002: judges warned about privacy
for data the user gave themselves, salience averaged a stressed message with a calm answer, the
corrector drifted toward a worry from the profile). So every judge, the corrector and salience
get two visibly separated blocks: the SITUATION explains, the SUBJECT is judged, and it comes
LAST. Only this module writes those blocks.

Every text placed inside a block that is not ours (memory, profile, timeline, the user's message,
the answer, the reviewers' reasons, the router's labels) goes through
:func:`~novaberg.prompts.neutral.neutralise` first: whatever is stored, the prompt holds exactly
one SITUATION header and one SUBJECT header, and a multi-line memory stays one list item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from novaberg.backends.base import ChatMessage
from novaberg.prompts.labels import Labels, labels_for
from novaberg.prompts.neutral import as_field, as_item, neutralise


@dataclass(frozen=True)
class Situation:
    """Background a judging node may know but must not judge."""

    intent: str = ""
    tone: str = ""
    memories: Sequence[str] = ()
    profile_core: str = ""
    profile_adaptive: str = ""
    timeline: Sequence[tuple[str, str]] = ()
    background_answer: str = ""
    frontend: str = ""
    """A front-end's own system prompt (a character card, a persona), handed on as setting
    when ``server.frontend_system_prompt`` is ``situation``: the responder's only; no judge
    is given it (:meth:`from_state` leaves it empty)."""
    attached: str = ""
    """What a front-end attached to the message (its sources: a file, a search, a tool's
    result): the responder's only, as :attr:`frontend`."""

    @classmethod
    def from_state(cls, state: Any, *, with_answer: bool = False) -> Situation:
        route = state.get("router")
        context = state.get("context")
        memories = context.memories if context is not None else ()
        profile = (context.profile if context is not None else None) or {}
        timeline = context.timeline if context is not None else ()
        return cls(
            intent=route.intent if route is not None else "",
            tone=route.tone if route is not None else "",
            memories=tuple(m.text for m in memories),
            profile_core=profile.get("core", ""),
            profile_adaptive=profile.get("adaptive", ""),
            timeline=tuple((t.date, t.text) for t in timeline),
            background_answer=str(state.get("reply") or "") if with_answer else "",
        )


@dataclass(frozen=True)
class Subject:
    """What is judged: the user's message, and the answer when there is one to judge."""

    user_message: str
    answer: str | None = None


def situation_block(labels: Labels, situation: Situation) -> str:
    lines = [labels.situation_header]
    if situation.background_answer:
        lines += [f"{labels.background_answer}:", neutralise(situation.background_answer)]
    if situation.intent or situation.tone:
        intent = as_field(labels.intent, situation.intent or "-")
        lines.append(f"{intent}; {as_field(labels.tone, situation.tone or '-')}")
    if situation.memories:
        lines.append(f"{labels.memory}:")
        lines += [as_item(m) for m in situation.memories]
    if situation.profile_core:
        lines.append(as_field(labels.profile_core, situation.profile_core))
    if situation.profile_adaptive:
        lines.append(as_field(labels.profile_adaptive, situation.profile_adaptive))
    if situation.timeline:
        lines.append(f"{labels.timeline}:")
        lines += [as_item(text, f"- {neutralise(day)}: ") for day, text in situation.timeline]
    return "\n".join(lines)


def subject_block(labels: Labels, subject: Subject) -> str:
    lines = [labels.subject_header, labels.user_message, neutralise(subject.user_message)]
    if subject.answer is not None:
        lines += ["", labels.answer, neutralise(subject.answer)]
    return "\n".join(lines)


def evaluation_prompt(
    labels: Labels, situation: Situation, subject: Subject, review: Sequence[str] = ()
) -> str:
    """Situation first, then (for the corrector) the reviewers' reasons, the subject LAST."""
    blocks = [situation_block(labels, situation)]
    if review:
        blocks.append("\n".join([labels.review_header, *(as_item(r) for r in review)]))
    blocks.append(subject_block(labels, subject))
    return "\n\n".join(blocks)


@dataclass(frozen=True)
class Instruction:
    """The system text of a judging node: its role, negative examples, the output format."""

    role: str
    not_a_problem: Sequence[str] = field(default_factory=tuple)
    output: str = ""


def judging_messages(
    language: str,
    instruction: Instruction,
    situation: Situation,
    subject: Subject,
    *,
    review: Sequence[str] = (),
    doubt: bool = True,
) -> list[ChatMessage]:
    """The chat messages of a judging node: its instruction as the system message, the
    situation/subject prompt as the user message."""
    labels = labels_for(language)
    return [
        {"role": "system", "content": evaluator_system(labels, instruction, doubt=doubt)},
        {"role": "user", "content": evaluation_prompt(labels, situation, subject, review)},
    ]


def evaluator_system(labels: Labels, instruction: Instruction, *, doubt: bool = True) -> str:
    parts = [instruction.role, labels.judge_only_subject]
    if instruction.not_a_problem:
        parts.append(
            "\n".join([labels.not_a_problem, *(f"- {n}" for n in instruction.not_a_problem)])
        )
    if doubt:
        parts.append(labels.when_in_doubt)
    if instruction.output:
        parts.append(instruction.output)
    return "\n\n".join(parts)
