"""Classifying what a backend returned, before anyone trusts it.

Quirk knowledge about servers lives here, once:

* A response with empty content, no tool calls and ``eval_count > 0`` means the model
  generated something that the server swallowed (../shared/OLLAMA.md "Tool calls that vanish").
* Ollama cuts a prompt longer than its runtime context from the head, silently, and answers
  anyway; its ``prompt_eval_count`` then falls short of what was sent (OLLAMA.md "Prompts longer
  than the context"). :func:`prompt_was_cut` compares it with :func:`estimate_prompt_tokens`.
* Servers say "the prompt does not fit" in their own words (:func:`says_context_exceeded`), and
  refuse a structured-output shape they do not know with a validation error that names it
  (:func:`refuses_json_mode`: llama-cpp-python's server answers ``json_schema`` with HTTP 500).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from novaberg.backends.base import ChatMessage, ChatRequest, ChatResponse
from novaberg.telemetry import Outcome

CHARS_PER_TOKEN = 4
"""About four characters a token: no tokenizer is shared by every backend."""
MESSAGE_OVERHEAD_TOKENS = 4
"""What a chat template adds around each message (role markers, separators)."""
CUT_RATIO = 0.75
"""A server that read fewer than this share of a prompt estimated larger than the context window
it was given, and no more than that window, cut the prompt (the estimate may be a third high)."""
FAR_BELOW_RATIO = 0.5
"""A server that read fewer than half of a sizeable prompt cut it, whatever window it was given
(a server that caps or ignores ``num_ctx``)."""
SIZEABLE_PROMPT = 512
"""Below this many estimated tokens a short count is not taken as a cut."""


def estimate_prompt_tokens(messages: list[ChatMessage], tools: list[dict[str, Any]]) -> int:
    """A rough count of the prompt tokens a request carries (messages and tool schemas)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    chars += sum(len(str(m.get("thinking") or "")) for m in messages)
    if tools:
        chars += len(json.dumps(tools))
    return math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS * len(messages)


def prompt_was_cut(estimate: int, evaluated: int, window: int | None) -> bool:
    """Whether a server that was asked for a context of ``window`` tokens and reported reading
    ``evaluated`` prompt tokens dropped part of a prompt estimated at ``estimate`` tokens.

    Ollama's ``prompt_eval_count`` counts the whole prompt it read, cached tokens included
    (ollama#5371); an unknown count (0) proves nothing. The estimate is rough, so only a clear
    shortfall counts: a prompt estimated beyond the window read to no more than the window, or
    a sizeable prompt read to less than half.
    """
    if evaluated <= 0:
        return False
    if window and estimate > window and evaluated <= window and evaluated < CUT_RATIO * estimate:
        return True
    return estimate >= SIZEABLE_PROMPT and evaluated < FAR_BELOW_RATIO * estimate


_CONTEXT_EXCEEDED = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|exceeds? (the )?context window"
    r"|exceeds? the available context size|exceed_context_size|context window of \d+"
    r"|prompt is too long|input length .{0,200}exceeds",
    re.IGNORECASE,
)
_JSON_MODE_WORDS = re.compile(r"response_format|json_schema|json_object", re.IGNORECASE)


def says_context_exceeded(message: str) -> bool:
    """Whether a server's error message says the prompt did not fit the context window
    (llama-cpp-python, llama.cpp's server, vLLM, OpenAI, Ollama with ``truncate: false``)."""
    return bool(_CONTEXT_EXCEEDED.search(message))


def refuses_json_mode(status: int, message: str) -> bool:
    """Whether an HTTP error refuses the request's structured-output shape: a client error or
    a 500 whose message is about ``response_format``. A plain 500 (an overloaded or broken
    server) is not, and stays retryable."""
    if status < 400 or status in (401, 403, 404, 408, 429) or status > 500:
        return False
    return bool(_JSON_MODE_WORDS.search(message)) and not says_context_exceeded(message)


def classify(request: ChatRequest, response: ChatResponse) -> Outcome:
    """The outcome of a response as it came, before any node-level validation."""
    if response.prompt_cut or response.done_reason == "length":
        # The server read only part of the prompt, or stopped the answer at its output limit:
        # whatever came back is not the answer to the whole request.
        return "truncated"
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
