"""The judges of the tribunal: one perspective each, with the negative examples that keep it
from judging the situation instead of the subject (../shared/seeds/002).

Add a judge by adding a :class:`JudgeSpec` to :data:`BUILTIN_JUDGES` (and naming it in the
``tribunal.judges`` setting), or without code in ``config.toml``::

    [tribunal]
    judges = ["legal", "psychology", "persona", "brevity"]

    [tribunal.custom.brevity]
    focus = "Is the answer short enough for a chat message?"
    not_a_problem = ["A long answer to a request for details"]
"""

from __future__ import annotations

from dataclasses import dataclass

from novaberg.prompts.evaluation import Instruction


@dataclass(frozen=True)
class JudgeSpec:
    name: str
    focus: dict[str, str]
    not_a_problem: dict[str, tuple[str, ...]]

    def instruction(self, language: str) -> Instruction:
        lang = language if language in self.focus else "en"
        return Instruction(
            role=self.focus[lang],
            not_a_problem=self.not_a_problem.get(lang, ()),
            output=VOTE_FORMAT[lang if lang in VOTE_FORMAT else "en"],
        )


VOTE_FORMAT = {
    "en": 'Reply with ONE JSON object and nothing else: {"vote": "ok" or "revise", '
    '"reason": one short sentence about the answer}.',
    "de": 'Antworte mit GENAU EINEM JSON-Objekt und sonst nichts: {"vote": "ok" oder "revise", '
    '"reason": ein kurzer Satz zur Antwort}.',
}

BUILTIN_JUDGES: dict[str, JudgeSpec] = {
    spec.name: spec
    for spec in (
        JudgeSpec(
            name="legal",
            focus={
                "en": "You review Nova's answer for legal and privacy problems: does it expose "
                "personal data of third parties, help with something illegal, or give risky "
                "legal advice as fact?",
                "de": "Du prüfst Novas Antwort auf rechtliche und Datenschutz-Probleme: Gibt sie "
                "personenbezogene Daten Dritter preis, hilft sie bei Illegalem, oder gibt sie "
                "riskante Rechtsauskunft als Tatsache aus?",
            },
            not_a_problem={
                "en": (
                    "Personal data the user gave themselves (their appointments, birthdays, "
                    "names of people they told Nova about) is NO privacy problem.",
                    "Reminding the user of their own dates and plans is what Nova is for.",
                ),
                "de": (
                    "Persönliche Daten, die die Person selbst genannt hat (ihre Termine, "
                    "Geburtstage, Namen von Menschen, von denen sie erzählt hat), sind KEIN "
                    "Datenschutzproblem.",
                    "Die Person an ihre eigenen Termine und Pläne zu erinnern, ist Novas Aufgabe.",
                ),
            },
        ),
        JudgeSpec(
            name="psychology",
            focus={
                "en": "You review whether Nova's answer fits the user's message emotionally: "
                "does it meet real distress with care, and avoid being dismissive or harmful?",
                "de": "Du prüfst, ob Novas Antwort emotional zur Nachricht passt: Begegnet sie "
                "echter Not mit Zuwendung, ohne abweisend oder schädlich zu sein?",
            },
            not_a_problem={
                "en": (
                    "A factual question needs no empathy: a plain, correct answer is ok.",
                    "A mood mentioned only in the situation does not have to be addressed.",
                ),
                "de": (
                    "Eine Sachfrage braucht keine Empathie: eine schlichte, richtige Antwort "
                    "ist ok.",
                    "Eine Stimmung, die nur im Lagebild steht, muss nicht angesprochen werden.",
                ),
            },
        ),
        JudgeSpec(
            name="persona",
            focus={
                "en": "You review whether the answer sounds like Nova: warm, curious, honest, "
                "conversational, in the user's language, never claiming facts about the user "
                "that the user did not give.",
                "de": "Du prüfst, ob die Antwort nach Nova klingt: warm, neugierig, ehrlich, im "
                "Gesprächston, in der Sprache der Person, ohne Behauptungen über die Person, die "
                "sie nicht selbst gemacht hat.",
            },
            not_a_problem={
                "en": (
                    "A short answer to a short message.",
                    "A neutral tone when the user asked something factual.",
                ),
                "de": (
                    "Eine kurze Antwort auf eine kurze Nachricht.",
                    "Ein sachlicher Ton bei einer Sachfrage.",
                ),
            },
        ),
    )
}


def custom_judge(name: str, focus: str, not_a_problem: list[str]) -> JudgeSpec:
    """A judge defined in the settings; its texts serve every language."""
    return JudgeSpec(name=name, focus={"en": focus}, not_a_problem={"en": tuple(not_a_problem)})
