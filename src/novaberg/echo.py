"""The system-prompt echo guard: a reply that repeats Nova's instructions is never shown or kept.

A small model that does not follow its chat template continues the prompt instead of answering
it (issue 13: Gemma 3 270M, a base model, answered with "You are Nova, a warm, curious and
honest companion …"). The guard compares word runs: :data:`ECHO_WORDS` consecutive words of the
reply (case and punctuation ignored) that also stand in that order in one of the instruction
texts are an echo. Only Nova's own instructions are compared, never the memory, profile or
history placed beside them in the prompt: quoting the user's own facts back is no echo.

:class:`EchoFilter` sits between a streaming backend and the screen: it holds back the trailing
words while they could still be the start of an echo, and once an echo is seen it passes
nothing more on, so an echo never reaches the screen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from novaberg.backends.base import TokenCallback, emit

ECHO_WORDS = 8
"""Words in a row shared with an instruction text that make a reply an echo. Nova may describe
herself in a phrase of her persona ("a warm, curious and honest companion", 6 words); eight
words in the same order are a copy."""

_WORD = re.compile(r"\w+")
_AFTER_CUT = re.compile(r"[^\w\s]*\s*")


def _words(text: str) -> list[str]:
    return [m.group().casefold() for m in _WORD.finditer(text)]


@dataclass(frozen=True)
class Echo:
    """Where a reply repeats the instructions."""

    words: int
    """Words of the reply inside echoed runs."""
    spans: tuple[tuple[int, int], ...]
    """Character ranges of the reply covered by echoed runs, in order, not overlapping."""

    def cut(self, reply: str) -> str:
        """The reply without its echoed runs (and the punctuation right after each)."""
        kept, position = [], 0
        for start, end in self.spans:
            kept.append(reply[position:start])
            tail = _AFTER_CUT.match(reply, end)
            position = tail.end() if tail else end
        kept.append(reply[position:])
        return re.sub(r"[ \t]{2,}", " ", "".join(kept)).strip()


class EchoGuard:
    """Finds runs of :data:`ECHO_WORDS` words that a reply shares with instruction texts."""

    def __init__(self, instructions: Iterable[str], words: int = ECHO_WORDS) -> None:
        self.n = words
        self._texts = [w for w in (_words(t) for t in instructions) if w]
        self._grams = {
            tuple(text[i : i + words]) for text in self._texts for i in range(len(text) - words + 1)
        }

    def find(self, reply: str) -> Echo | None:
        """The echoed runs of ``reply``, or ``None`` when it repeats no instruction."""
        matches = list(_WORD.finditer(reply))
        tokens = [m.group().casefold() for m in matches]
        echoed = [False] * len(tokens)
        for i in range(len(tokens) - self.n + 1):
            if tuple(tokens[i : i + self.n]) in self._grams:
                echoed[i : i + self.n] = [True] * self.n
        if not any(echoed):
            return None
        spans: list[tuple[int, int]] = []
        for i, flag in enumerate(echoed):
            if not flag:
                continue
            if i > 0 and echoed[i - 1]:
                spans[-1] = (spans[-1][0], matches[i].end())
            else:
                spans.append((matches[i].start(), matches[i].end()))
        return Echo(words=sum(echoed), spans=tuple(spans))

    def could_begin(self, tokens: list[str], last_is_partial: bool) -> bool:
        """Whether ``tokens`` stand in that order in an instruction text (the last one only
        needs to begin a word there when it may still grow): the start of a possible echo."""
        if not tokens:
            return False
        whole, last = tokens[:-1], tokens[-1]
        size = len(tokens)
        for text in self._texts:
            for i in range(len(text) - size + 1):
                if text[i : i + size - 1] != whole:
                    continue
                candidate = text[i + size - 1]
                if candidate == last or (last_is_partial and candidate.startswith(last)):
                    return True
        return False

    def held_from(self, text: str) -> int:
        """Where the part of a growing ``text`` begins that could still become an echo (the
        trailing words that stand in order in an instruction text); ``len(text)`` if none."""
        matches = list(_WORD.finditer(text))
        if not matches:
            return len(text)
        partial = matches[-1].end() == len(text)
        tokens = [m.group().casefold() for m in matches]
        held = len(text)
        for size in range(1, min(self.n, len(tokens)) + 1):
            if not self.could_begin(tokens[-size:], partial):
                break  # a longer tail contains this one: it cannot match either
            held = matches[-size].start()
        return held


class EchoFilter:
    """Passes streamed pieces on to ``downstream`` only once they cannot be part of an echo.

    Feed it every piece (:meth:`feed`); after the answer is complete, :meth:`finish` releases
    what was held back, unless the whole answer was found to be an echo."""

    def __init__(self, guard: EchoGuard, downstream: TokenCallback | None) -> None:
        self.guard = guard
        self.downstream = downstream
        self.text = ""
        self.released = 0
        self.echoed = False

    async def feed(self, piece: str) -> None:
        self.text += piece
        if self.echoed:
            return
        # a word at the very end may still grow; read backwards (``\w+\Z`` searched for is
        # quadratic on a long word that ends before the text does)
        growing = _WORD.match(self.text[::-1])
        complete = self.text[: len(self.text) - growing.end()] if growing else self.text
        if self.guard.find(complete) is not None:
            self.echoed = True
            return
        await self._release(self.guard.held_from(self.text))

    async def finish(self, echo: Echo | None) -> None:
        """The answer is complete: release the rest unless it was an echo."""
        if echo is None and not self.echoed:
            await self._release(len(self.text))

    async def _release(self, upto: int) -> None:
        if upto > self.released:
            piece, self.released = self.text[self.released : upto], upto
            await emit(self.downstream, piece)
