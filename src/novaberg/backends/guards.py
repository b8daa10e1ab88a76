"""Classifying what a backend returned, before anyone trusts it.

Quirk knowledge about empty answers lives here, once (../shared/OLLAMA.md "Tool calls that
vanish"): a response with empty content, no tool calls and ``eval_count > 0`` means the model
generated something that the server swallowed.
"""

from __future__ import annotations

from novaberg.backends.base import ChatRequest, ChatResponse
from novaberg.telemetry import Outcome


def classify(request: ChatRequest, response: ChatResponse) -> Outcome:
    """The outcome of a response as it came, before any node-level validation."""
    if response.content.strip() or response.tool_calls:
        return "ok"
    if request.tools and response.eval_count > 0 and not response.thinking.strip():
        # Generated tokens, nothing visible: a call to an undeclared name was swallowed
        # (ollama#19187). With text in thinking it is the think/content split instead, which
        # the thinker's normaliser reads (case 1 or 2).
        return "dropped_tool_call"
    # Content empty, perhaps everything in thinking: only the thinker's normaliser can tell a
    # moved control line (case 1) from prose (case 2); until it has looked, this is empty.
    return "empty_answer"
