"""What a front-end attached to the user's message: Open WebUI's source context.

When a chat message comes with sources (an attached file, a web search, a knowledge base, a
tool's result), Open WebUI 0.12.4 sends its RAG template with them in front of the user's
words, in the last user message: ``### Task:\\nRespond to the user query using the provided
context …<context>\\n…sources…\\n</context>\\n`` and then the message itself (with
``RAG_SYSTEM_CONTEXT=true`` the template is a system message of its own instead). That is the
user speaking, not one of its tasks, so :func:`split_sources` takes it apart: the user's words
become the turn's message (stored, weighed, remembered as what they said), and the sources
reach the responder as what the app attached, data and not instructions.

Only the default template is known; a template an admin rewrote is not told from the message.
Of several ``</context>`` (a source may hold one), the last ends the sources: what a document
says can never become the user's words, at worst some of the user's words count as the
attachment. A user message of the template with no words after it (a file sent alone) is left
as it came by the server: no words of the user's, so no turn (one of Open WebUI's tasks).
"""

from __future__ import annotations

OPENWEBUI_SOURCES = "### Task:\nRespond to the user query using the provided context"
"""How Open WebUI's default RAG template begins."""
OPENING = "<context>\n"
CLOSING = "</context>"


def split_sources(text: str) -> tuple[str, str]:
    """``(the user's own words, the sources attached)`` of a message Open WebUI wrapped in its
    RAG template (no words: a system message of it, or a file sent alone); ``(text, "")``
    for any other message."""
    if not text.lstrip().startswith(OPENWEBUI_SOURCES):
        return text, ""
    start = text.find(OPENING)
    end = text.rfind(CLOSING)
    if start < 0 or end < start:
        return text, ""
    return text[end + len(CLOSING) :].strip(), text[start + len(OPENING) : end].strip()
