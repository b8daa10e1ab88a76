"""The memory jobs' prompt texts, per language (``language`` setting: ``en`` or ``de``).

The model sees only the user's memories (never tool output or thinking); the JSON keys stay
English in every language, since they are what the jobs parse.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class JobPrompts:
    language: str
    consolidate: str
    existing_facts: str
    new_item: str
    timeline: str
    profile_adaptive: str
    profile_core: str
    memories: str
    none: str


EN = JobPrompts(
    language="en",
    consolidate=(
        "You keep the long-term facts Nova knows about her user. Compare the NEW ITEM with the "
        'EXISTING FACTS. Answer with ONE JSON object {"action", "fact_id", "fact", "words"}: '
        '"same" if an existing fact already says it (fact_id: that fact), "update" if it '
        "changes an existing fact, e.g. a new name, city, job or plan (fact_id: the fact it "
        'replaces), "new" otherwise (fact_id: null). "fact": the durable fact as one short '
        'sentence about the user in the third person (for same: ""). "words": up to 8 single '
        "words, in English, that a later question about this fact would use although the "
        "fact does not: its topics, categories and synonyms (for a dog: pet, animal; for "
        "coriander: herb, food, taste); [] for same."
    ),
    existing_facts="EXISTING FACTS",
    new_item="NEW ITEM",
    timeline=(
        "Find the dated events in the user's message: appointments, birthdays, plans, "
        'deadlines. Answer with ONE JSON object {"events": [{"what": short description, '
        '"when": the exact words of the message that say when}]}; {"events": []} if there '
        "is none."
    ),
    profile_adaptive=(
        "Describe the user's CURRENT moods and concerns (the adaptive profile) in at most 5 "
        "short statements. Use only what the memories below say; each statement lists the ids "
        "of the memories it rests on; concern is true for a worry or open matter (an exam, an "
        'interview) worth asking about in a few days. Answer with ONE JSON object {"statements": '
        '[{"text", "sources": [ids], "concern": true or false}]}.'
    ),
    profile_core=(
        "Describe the user's STABLE traits, interests and circumstances (the core profile) in "
        "at most 8 short statements. Use only what the memories below say; each statement "
        'lists the ids of the memories it rests on. Answer with ONE JSON object {"statements": '
        '[{"text", "sources": [ids]}]}.'
    ),
    memories="MEMORIES",
    none="(none)",
)

DE = JobPrompts(
    language="de",
    consolidate=(
        "Du verwaltest die dauerhaften Fakten, die Nova über die Person weiß. Vergleiche den "
        "NEUEN EINTRAG mit den BEKANNTEN FAKTEN. Antworte mit GENAU EINEM JSON-Objekt "
        '{"action", "fact_id", "fact", "words"}: "same", wenn ein bekannter Fakt es schon sagt '
        '(fact_id: dieser Fakt), "update", wenn er einen bekannten Fakt ändert, etwa einen '
        'neuen Namen, Wohnort, Beruf oder Plan (fact_id: der ersetzte Fakt), sonst "new" '
        '(fact_id: null). "fact": der dauerhafte Fakt als ein kurzer Satz über die Person in '
        'der dritten Person, auf Deutsch (bei same: ""). "words": bis zu 8 einzelne Wörter '
        "auf Deutsch, die eine spätere Frage nach diesem Fakt benutzen würde, obwohl der Fakt "
        "sie nicht enthält: Themen, Oberbegriffe, Synonyme (für einen Hund: Haustier, Tier; "
        "für Mama: Mutter, Familie); [] bei same."
    ),
    existing_facts="BEKANNTE FAKTEN",
    new_item="NEUER EINTRAG",
    timeline=(
        "Finde die datierten Ereignisse in der Nachricht der Person: Termine, Geburtstage, "
        'Pläne, Fristen. Antworte mit GENAU EINEM JSON-Objekt {"events": [{"what": kurze '
        'Beschreibung auf Deutsch, "when": die genauen Worte der Nachricht, die sagen wann}]}; '
        '{"events": []}, wenn es keines gibt.'
    ),
    profile_adaptive=(
        "Beschreibe die AKTUELLEN Stimmungen und Anliegen der Person (das adaptive Profil) in "
        "höchstens 5 kurzen Aussagen auf Deutsch. Nutze nur, was die Erinnerungen unten sagen; "
        "jede Aussage nennt die Nummern der Erinnerungen, auf denen sie beruht; concern ist true "
        "für eine Sorge oder offene Sache (eine Prüfung, ein Vorstellungsgespräch), nach der man "
        'in ein paar Tagen fragen sollte. Antworte mit GENAU EINEM JSON-Objekt {"statements": '
        '[{"text", "sources": [Nummern], "concern": true oder false}]}.'
    ),
    profile_core=(
        "Beschreibe die BESTÄNDIGEN Eigenschaften, Interessen und Lebensumstände der Person "
        "(das Kernprofil) in höchstens 8 kurzen Aussagen auf Deutsch. Nutze nur, was die "
        "Erinnerungen unten sagen; jede Aussage nennt die Nummern der Erinnerungen, auf denen "
        'sie beruht. Antworte mit GENAU EINEM JSON-Objekt {"statements": [{"text", '
        '"sources": [Nummern]}]}.'
    ),
    memories="ERINNERUNGEN",
    none="(keine)",
)

BY_LANGUAGE = {p.language: p for p in (EN, DE)}


def job_prompts(language: str) -> JobPrompts:
    """The texts for ``language``; English for a language without its own."""
    return BY_LANGUAGE.get(language, EN)
