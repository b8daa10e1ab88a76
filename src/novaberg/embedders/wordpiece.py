"""BERT's uncased WordPiece tokenizer, as Hugging Face's ``BertTokenizer`` does it.

Normalise (drop control characters, spaces around CJK ideographs, lower case, strip accents),
split on white space and punctuation, then split each word greedily into the longest pieces
of the vocabulary (``##`` marks a piece inside a word); a word that cannot be split, or is
longer than 100 characters, becomes ``[UNK]``. Pure Python: no ``tokenizers`` package.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

_MAX_WORD_CHARS = 100


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def normalize(text: str) -> str:
    """Clean, space out CJK, lower-case and strip accents (BERT uncased)."""
    out = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_whitespace(ch):
            out.append(" ")
        elif _is_cjk(cp):
            out.append(f" {ch} ")
        else:
            out.append(ch)
    lowered = unicodedata.normalize("NFD", "".join(out).lower())
    return "".join(ch for ch in lowered if unicodedata.category(ch) != "Mn")


def pre_tokenize(text: str) -> list[str]:
    """Words and single punctuation marks, in order."""
    words: list[str] = []
    for chunk in text.split():
        current: list[str] = []
        for ch in chunk:
            if _is_punctuation(ch):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(ch)
            else:
                current.append(ch)
        if current:
            words.append("".join(current))
    return words


@dataclass(frozen=True)
class Encoded:
    ids: list[int]
    """Token ids with ``[CLS]`` first and ``[SEP]`` last."""
    truncated: bool
    """Whether word pieces past the limit were dropped."""


class WordPiece:
    def __init__(self, vocab: Iterable[str]) -> None:
        self.vocab = {token: i for i, token in enumerate(vocab)}
        self.unk = self.vocab["[UNK]"]
        self.cls = self.vocab["[CLS]"]
        self.sep = self.vocab["[SEP]"]
        self.pad = self.vocab["[PAD]"]

    @classmethod
    def from_file(cls, path: Path) -> WordPiece:
        """Read ``vocab.txt``: one token a line, the line number is its id."""
        return cls(path.read_text(encoding="utf-8").splitlines())

    def word_pieces(self, word: str) -> list[int]:
        if len(word) > _MAX_WORD_CHARS:
            return [self.unk]
        pieces: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    break
                end -= 1
            if found is None:
                return [self.unk]
            pieces.append(found)
            start = end
        return pieces

    def encode(self, text: str, max_tokens: int) -> Encoded:
        """``[CLS]`` + word pieces + ``[SEP]``, at most ``max_tokens`` in all."""
        room = max_tokens - 2
        ids: list[int] = []
        truncated = False
        for word in pre_tokenize(normalize(text)):
            ids.extend(self.word_pieces(word))
            if len(ids) > room:
                truncated = True
                del ids[room:]
                break
        return Encoded([self.cls, *ids, self.sep], truncated)
