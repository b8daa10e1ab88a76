"""The think/content split, handled in one named place.

With ``think`` on, Ollama puts a model's output non-deterministically into ``content`` or
``thinking`` (ollama#10976, LiteLLM#18922; ../shared/seeds/000): sometimes content holds the
control line (fine); sometimes content is EMPTY and thinking holds everything, either with the
control line at its end (case 1) or prose only (case 2).

:class:`ThinkingNormalizer` is the no-op base: content is taken as it is.
:class:`ThinkSplitNormalizer` handles the split: case 1 moves the control line from thinking to
content (no extra call), case 2 is reported so the thinker can ask a follow-up call.
:func:`normalizer_for` chooses by the ANSWERING backend and model of each response, never the
configured one: a fallback server that answered does not get Ollama's clean-up. When Ollama
fixes #10976, one class goes, not a scattered ``if content_len == 0``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal

from novaberg.backends.base import ChatResponse

ControlKind = Literal["tool", "ok", "revised"]

_CONTROL = re.compile(  # [^\S\n]: a line's leading blanks; \s* across lines is quadratic
    r"^[^\S\n]*(?:(?P<tool>TOOL)\s*:\s*(?P<name>[A-Za-z_][\w.-]*)\s*\((?P<args>.*)\)\s*$"
    r"|(?P<result>RESULT|ERGEBNIS)\s*:\s*(?P<verdict>OK|REVISED|ÜBERARBEITET|UEBERARBEITET)\b)",
    re.IGNORECASE | re.MULTILINE,
)


@dataclass(frozen=True)
class Control:
    """One decision of the thinker protocol."""

    kind: ControlKind
    tool: str = ""
    arguments: dict[str, Any] | None = None
    answer: str = ""
    raw: str = ""


def parse_control(text: str) -> Control | None:
    """The LAST control line in ``text`` (with a revised answer: the text after it)."""
    matches = list(_CONTROL.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    if match.group("tool"):
        try:
            arguments = json.loads(match.group("args") or "{}")
        except json.JSONDecodeError:
            arguments = None  # the caller reports invalid arguments to the model
        if arguments is not None and not isinstance(arguments, dict):
            arguments = None
        return Control(
            "tool", tool=match.group("name"), arguments=arguments, raw=match.group(0).strip()
        )
    if match.group("verdict").upper() == "OK":
        return Control("ok", raw=match.group(0).strip())
    return Control("revised", answer=text[match.end() :].strip(), raw=match.group(0).strip())


Outcome = Literal["ok", "think_split_moved", "think_split_prose", "empty_answer"]


@dataclass(frozen=True)
class Normalized:
    """What the thinker reads: the content to parse, and how it was obtained."""

    content: str
    outcome: Outcome
    normalizer: str


class ThinkingNormalizer:
    """No-op: the content is what it is (an empty content is an empty answer)."""

    name = "noop"

    def normalize(self, response: ChatResponse) -> Normalized:
        outcome: Outcome = "ok" if response.content.strip() else "empty_answer"
        return Normalized(response.content, outcome, self.name)


class ThinkSplitNormalizer(ThinkingNormalizer):
    """Ollama's think/content split: case 1 moved, case 2 reported."""

    name = "think_split"

    def normalize(self, response: ChatResponse) -> Normalized:
        if response.content.strip() or not response.thinking.strip():
            return super().normalize(response)
        matches = list(_CONTROL.finditer(response.thinking))
        if matches:  # case 1: the decision is at the end of thinking
            moved = response.thinking[matches[-1].start() :].strip()
            return Normalized(moved, "think_split_moved", self.name)
        return Normalized("", "think_split_prose", self.name)  # case 2: prose only


def normalizer_for(backend: str, model: str) -> ThinkingNormalizer:
    """The normaliser for the backend and model that ANSWERED (``ChatResponse.backend/model``).

    Every model served by Ollama shows the split (gemma and qwen3 alike: it is Ollama's
    parser, not the model), so the key is the answering backend; ``model`` is part of the key
    so a model-specific exception has one place to go.
    """
    del model  # no model-specific exceptions known yet
    return ThinkSplitNormalizer() if backend == "ollama" else ThinkingNormalizer()
