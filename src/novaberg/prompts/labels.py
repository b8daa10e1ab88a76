"""The labels of the judging prompts, per language: the SITUATION and SUBJECT headers, the
names of the situation's parts and of the subject's (:mod:`novaberg.prompts.evaluation` writes
the blocks with them). They are texts only: :mod:`novaberg.prompts.neutral` reads them too, so
that foreign text can never forge one of these lines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Labels:
    situation_header: str
    subject_header: str
    review_header: str
    intent: str
    tone: str
    memory: str
    profile_core: str
    profile_adaptive: str
    timeline: str
    background_answer: str
    user_message: str
    answer: str
    judge_only_subject: str
    when_in_doubt: str
    not_a_problem: str


EN = Labels(
    situation_header="=== SITUATION (background, not to be judged) ===",
    subject_header="=== SUBJECT (judge only this) ===",
    review_header="=== REVIEWERS' REASONS (what to fix in the subject) ===",
    intent="Intent",
    tone="Desired tone",
    memory="What Nova remembers about the user",
    profile_core="User profile, stable",
    profile_adaptive="User profile, current",
    timeline="Timeline",
    background_answer="Nova's answer (background only)",
    user_message="User message:",
    answer="Answer under judgement:",
    judge_only_subject=(
        "Judge ONLY the subject. The situation explains it; it is never itself the problem."
    ),
    when_in_doubt="When in doubt: ok.",
    not_a_problem="These are NOT problems:",
)

DE = Labels(
    situation_header="=== LAGEBILD (Hintergrund, nicht zu bewerten) ===",
    subject_header="=== BEWERTUNGSOBJEKT (nur dies bewerten) ===",
    review_header="=== BEGRÜNDUNGEN DER PRÜFER (was am Bewertungsobjekt zu ändern ist) ===",
    intent="Absicht",
    tone="Gewünschter Ton",
    memory="Was Nova über die Person weiß",
    profile_core="Profil der Person, beständig",
    profile_adaptive="Profil der Person, aktuell",
    timeline="Zeitleiste",
    background_answer="Novas Antwort (nur Hintergrund)",
    user_message="Nachricht der Person:",
    answer="Zu bewertende Antwort:",
    judge_only_subject=(
        "Bewerte AUSSCHLIESSLICH das Bewertungsobjekt. Das Lagebild erklärt es; es ist nie "
        "selbst das Problem."
    ),
    when_in_doubt="Im Zweifel: ok.",
    not_a_problem="Das sind KEINE Probleme:",
)


def labels_for(language: str) -> Labels:
    return DE if language == "de" else EN
