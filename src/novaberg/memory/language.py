"""Which of Nova's languages a text is written in, cheaply, for choosing its embedder.

A user who writes both English and German gets each text embedded by the embedder made for its
language (``memory.embedder = auto``: :data:`~novaberg.memory.embedding.AUTO`). The test is
the function words each language cannot do without: a text is German when more of its words
are German function words than English ones (ß and umlauts count as one German word each),
English in the opposite case, and undecided otherwise (a name, a number, a word in neither
list): then the ``language`` setting decides. On the bilingual meaning suite
(``benchmarks/meaning.py``: 30 facts and 90 questions, English and German) this tells every
text's language right.
"""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["en", "de"]

_EN_WORDS = """
    the a an and or but is are was were be been am i you he she it we they my your his her our
    their me him us them this that these those of to in on at for with from by about what when
    where who why how which do does did have has had not no can could would should will
    there here than then just also very so if as into out up
"""
_EN = frozenset(_EN_WORDS.split())
_DE_WORDS = """
    der die das den dem des ein eine einen einem einer eines und oder aber ist sind war waren
    bin bist sein ich du er sie es wir ihr mich mir dich dir uns euch mein meine meinen meinem
    meiner dein deine sich nicht kein keine mit von vom zum zur zu im ins am auf aus bei nach
    für über unter wie was wer wo wann warum welche welcher welches hat habe hast haben wird
    werden kann können auch noch schon nur sehr dann denn doch mal gern gerne heute morgen
"""
_DE = frozenset(_DE_WORDS.split())
_WORD = re.compile(r"\w+", re.UNICODE)
_GERMAN_LETTERS = re.compile(r"[äöüß]", re.IGNORECASE)


def language_of(text: str) -> Language | None:
    """``"en"`` or ``"de"`` by the function words of ``text``; ``None`` when they do not
    decide."""
    words = _WORD.findall(text.lower())
    english = sum(w in _EN for w in words)
    german = sum(w in _DE for w in words) + sum(
        1 for w in words if _GERMAN_LETTERS.search(w) and w not in _DE
    )
    if german > english:
        return "de"
    if english > german:
        return "en"
    return None
