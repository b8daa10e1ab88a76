"""What the test server answers: scripted replies and the faults it can inject.

A :class:`Reply` describes one answer; its fields inject the faults documented in
../shared/OLLAMA.md. The presets name the faults this project defends against.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

ReasoningStyle = Literal["reasoning", "reasoning_content", "think_tags"]


class Reply(BaseModel):
    """One scripted answer of the test server (both protocols)."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    thinking: str = ""
    tool_calls: list[dict[str, Any]] = Field(
        default_factory=list,
        description='[{"name": ..., "arguments": {...}}]; a name missing from the request\'s '
        "tools is swallowed as Ollama does (empty answer, eval_count > 0)",
    )
    eval_count: int | None = Field(None, description="default: a count of the generated words")
    prompt_eval_count: int | None = Field(
        None, description="default: the server's count of the prompt tokens it read (after a cut)"
    )
    context_limit: int | None = Field(
        None,
        ge=8,
        description="the runtime context for this request, whatever num_ctx says (a server that "
        "caps it): a longer prompt is cut from the head silently, as Ollama does",
    )
    done_reason: str = "stop"
    delay_s: float = Field(0.0, ge=0, description="before the first byte")
    chunk_delay_s: float = Field(0.0, ge=0, description="between streamed chunks")
    status: int | None = Field(None, description="answer with this HTTP error instead")
    error: str = Field("", description="the error text for status or error_after_chunks")
    error_after_chunks: int | None = Field(
        None, description='send an {"error"} line (status 200) after this many chunks'
    )
    cut_after_chunks: int | None = Field(
        None, description="end the stream after this many chunks, before the done chunk"
    )
    reasoning_style: ReasoningStyle | None = Field(
        None, description="/v1 only: how thinking is returned (default: the server's)"
    )
    thinks: bool | None = Field(
        None,
        description="None: think as Ollama does (when think is true, or omitted for a thinking "
        "model); True: think even when the request says think: false (a model that ignores the "
        "flag); False: never think",
    )

    # -- presets: the documented faults --------------------------------------------------
    @classmethod
    def thinking_swallowed_answer(cls, thinking: str, control_line: str = "") -> Reply:
        """Content empty, everything in thinking: case 1 with a control line, case 2 without."""
        text = f"{thinking}\n{control_line}" if control_line else thinking
        return cls(content="", thinking=text)

    @classmethod
    def dropped_tool_call(cls, name: str, arguments: dict[str, Any] | None = None) -> Reply:
        """A call to ``name``: swallowed into an empty answer unless the request lists it."""
        return cls(tool_calls=[{"name": name, "arguments": arguments or {}}])

    @classmethod
    def http_error(cls, status: int, error: str = "") -> Reply:
        return cls(status=status, error=error or _DEFAULT_ERRORS.get(status, "error"))

    @classmethod
    def error_mid_stream(cls, content: str, after_chunks: int = 1, error: str = "") -> Reply:
        return cls(
            content=content,
            error_after_chunks=after_chunks,
            error=error or "an error was encountered while running the model",
        )

    @classmethod
    def cut_stream(cls, content: str, after_chunks: int = 1) -> Reply:
        return cls(content=content, cut_after_chunks=after_chunks)

    @classmethod
    def context_cut(cls, content: str, context: int) -> Reply:
        """Answer as Ollama does when the prompt is longer than a runtime context of
        ``context`` tokens: keep its first 4 tokens and its end, drop the rest, say nothing."""
        return cls(content=content, context_limit=context)


class Match(BaseModel):
    """Which requests a script is for, besides their caller: every field that is set must hold.

    Lets a test script two conditions of one caller apart (the probe sends a tool-bearing
    request with and without a tool declared, JSON requests with and without ``format``)."""

    model_config = ConfigDict(extra="forbid")

    declares: str | None = Field(None, description="the request's tools name this function")
    lacks: str | None = Field(None, description="the request's tools do not name this function")
    think: bool | Literal["omitted"] | None = Field(
        None, description='the request\'s think flag: true, false, or "omitted"'
    )
    format: bool | None = Field(
        None, description="the request asks for JSON (format, or response_format) or not"
    )
    contains: str | None = Field(None, description="a message of the request contains this text")

    def matches(self, body: dict[str, Any]) -> bool:
        names = {(t.get("function") or {}).get("name") for t in body.get("tools") or []}
        if self.declares is not None and self.declares not in names:
            return False
        if self.lacks is not None and self.lacks in names:
            return False
        if self.think is not None:
            sent = body.get("think")
            if ("omitted" if sent is None else sent) != self.think:
                return False
        if self.format is not None:
            asked = bool(body.get("format") or body.get("response_format"))
            if asked != self.format:
                return False
        if self.contains is not None:
            texts = (str(m.get("content") or "") for m in body.get("messages") or [])
            if not any(self.contains in t for t in texts):
                return False
        return True


def exact_mix(mix: Sequence[tuple[Reply | None, int]], seed: int = 0) -> list[Reply | None]:
    """Each reply as many times as given, in an order shuffled by ``seed`` (the same order for
    the same seed): a fault scripted at an exact rate, e.g. ``[(case2, 7), (clean, 13)]`` is
    case 2 in exactly 7 of the next 20 requests. ``None`` stands for the server's own answer."""
    replies = [reply for reply, times in mix for _ in range(times)]
    random.Random(seed).shuffle(replies)
    return replies


_DEFAULT_ERRORS = {
    400: "invalid request",
    404: "model not found",
    500: "error parsing tool call",
    503: "server busy, please try again. maximum pending requests exceeded",
}


def sample_for_schema(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """A minimal value that satisfies a JSON schema (for unscripted structured requests)."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return sample_for_schema(defs[schema["$ref"].split("/")[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return sample_for_schema(schema["anyOf"][0], defs)
    if "default" in schema:
        return schema["default"]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: sample_for_schema(v, defs) for k, v in props.items()}
    if kind == "array":
        return []
    if kind in ("number", "integer"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return "ok"
