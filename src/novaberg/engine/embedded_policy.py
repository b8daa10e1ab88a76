"""The embedded-mode policy: what the engine switches off on the tiny embedded model."""

from __future__ import annotations

from novaberg.config import Settings


def embedded_defaults(settings: Settings, notices: list[str]) -> Settings:
    """On the tiny embedded model, the tribunal and the thinker are off unless forced: it
    cannot judge or follow the tool protocol, and every structured call costs seconds.

    Returns a changed copy (``settings`` stays as it was) and appends a notice per change."""
    adjusted = settings.model_copy(deep=True)
    if adjusted.tribunal.judges and not adjusted.tribunal.on_embedded:
        adjusted.tribunal.judges = []
        notices.append(
            "The tribunal is off on the embedded model (too small to judge, and each vote "
            "costs seconds); set tribunal.on_embedded = true to judge anyway."
        )
    if adjusted.memory.jobs and not adjusted.memory.on_embedded:
        adjusted.memory.jobs = False
        notices.append(
            "Memory jobs (consolidation, profile, timeline) are off on the embedded model: "
            "salient items are still kept and retrieved; set memory.on_embedded = true to "
            "run them anyway."
        )
    if adjusted.proactive.enabled:
        adjusted.proactive.enabled = False
        notices.append(
            "Proactive messages (reminders) are off on the embedded model: what is scheduled "
            "waits for a server backend (Ollama or an OpenAI-compatible one)."
        )
    if adjusted.thinker.mode == "auto":
        adjusted.thinker.mode = "never"
        notices.append(
            "The thinker is off on the embedded model (it cannot follow the tool protocol); "
            "set thinker.mode = always to run it anyway."
        )
    return adjusted
