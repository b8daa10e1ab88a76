"""Inline ``<think>…</think>`` splitting for servers that put reasoning into the content."""

from __future__ import annotations

OPEN = "<think>"
CLOSE = "</think>"


class ThinkTagSplitter:
    """Splits a streamed text into (content, thinking) pieces at ``<think>`` tags.

    Feed it chunks in order; tags may be cut across chunk boundaries. A think block that
    never closes keeps everything after ``<think>`` as thinking (as Ollama's parser does).
    """

    def __init__(self) -> None:
        self._buffer = ""
        self._inside = False

    def feed(self, chunk: str) -> tuple[str, str]:
        self._buffer += chunk
        content: list[str] = []
        thinking: list[str] = []
        while self._buffer:
            tag = CLOSE if self._inside else OPEN
            index = self._buffer.find(tag)
            if index >= 0:
                (thinking if self._inside else content).append(self._buffer[:index])
                self._buffer = self._buffer[index + len(tag) :]
                self._inside = not self._inside
                continue
            keep = _partial_suffix(self._buffer, tag)
            emit = self._buffer[: len(self._buffer) - keep]
            (thinking if self._inside else content).append(emit)
            self._buffer = self._buffer[len(self._buffer) - keep :]
            break
        return "".join(content), "".join(thinking)

    def flush(self) -> tuple[str, str]:
        rest, self._buffer = self._buffer, ""
        return ("", rest) if self._inside else (rest, "")


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:size]):
            return size
    return 0


def split_think_tags(text: str) -> tuple[str, str]:
    """Split a whole text into (content, thinking)."""
    splitter = ThinkTagSplitter()
    content, thinking = splitter.feed(text)
    rest_content, rest_thinking = splitter.flush()
    return (content + rest_content).strip(), thinking + rest_thinking
