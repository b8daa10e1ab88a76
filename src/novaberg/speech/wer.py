"""Word error rate, for the speech tests and ``benchmarks/voice.py``: the word-level edit
distance between what was said and what was heard, over the number of words said. Words are
compared case-folded, without punctuation."""

from __future__ import annotations

import re

WORD = re.compile(r"[\w']+")


def words(text: str) -> list[str]:
    return WORD.findall(text.casefold())


def edits(said: list[str], heard: list[str]) -> int:
    """Substitutions, insertions and deletions that turn ``said`` into ``heard``."""
    previous = list(range(len(heard) + 1))
    for i, word in enumerate(said, 1):
        current = [i]
        for j, other in enumerate(heard, 1):
            current.append(
                min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (word != other))
            )
        previous = current
    return previous[-1]


def word_error_rate(pairs: list[tuple[str, str]]) -> float:
    """The rate over all ``(said, heard)`` pairs together."""
    total = sum(len(words(said)) for said, _ in pairs)
    wrong = sum(edits(words(said), words(heard)) for said, heard in pairs)
    return wrong / max(total, 1)
