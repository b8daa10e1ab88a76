"""Structured (JSON) model outputs, for nodes and background jobs alike: ask with
``think: false`` and a schema, validate, retry once.

A constraint on the server side is never trusted alone (ollama#15260: ``think`` can make a
model ignore ``format``). Output that does not validate marks its call record ``malformed``;
after one retry the caller gets ``None`` (a node uses its safe default, a job fails).
"""

from __future__ import annotations

import functools
import json
import logging
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from novaberg.backends.base import ChatMessage, ChatRequest
from novaberg.context import CallContext
from novaberg.queue import FOREGROUND

log = logging.getLogger("novaberg")
T = TypeVar("T", bound=BaseModel)


@functools.cache
def schema_of(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an output model, built once (pydantic takes ~1 ms per build),
    without pydantic's ``title`` annotations: they constrain nothing, and each request
    carries the schema (the router's is about a fifth smaller)."""
    untitled: dict[str, Any] = _untitled(model.model_json_schema())
    return untitled


def _untitled(node: Any) -> Any:
    """``node`` without ``"title": "…"`` annotations (a property *named* title stays: its
    value is a schema, not a string)."""
    if isinstance(node, dict):
        return {
            k: _untitled(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_untitled(v) for v in node]
    return node


def parse_json_object(text: str, model: type[T]) -> T | None:
    """Validate ``text`` as ``model``; tolerate a fenced block or text around one object."""
    candidate = text.strip()
    if candidate.startswith("```"):
        candidate = candidate.strip("`").removeprefix("json").strip()
    start, end = candidate.find("{"), candidate.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        return model.model_validate(json.loads(candidate[start : end + 1]))
    except (json.JSONDecodeError, ValidationError):
        return None


async def ask_structured(
    ctx: CallContext,
    caller: str,
    messages: list[ChatMessage],
    model: type[T],
    *,
    attempts: int = 2,
    max_tokens: int | None = None,
    priority: int = FOREGROUND,
) -> T | None:
    """Ask for a JSON object matching ``model``; ``None`` when no attempt gave a valid one.

    ``max_tokens``: ``None`` takes the caller's limit from ``prompts/budget.py``."""
    request = ChatRequest(
        caller=caller,
        messages=messages,
        think=False,
        json_schema=schema_of(model),
        temperature=0.0,
        max_tokens=max_tokens,
    )
    for _ in range(attempts):
        result = await ctx.llm(request, priority=priority)
        parsed = parse_json_object(result.response.content, model)
        if parsed is not None:
            return parsed
        result.record.outcome = "malformed"
        log.warning("%s returned unusable JSON (%d chars)", caller, len(result.response.content))
    return None
