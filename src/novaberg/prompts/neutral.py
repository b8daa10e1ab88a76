"""Foreign text made inert before it is placed inside a prompt: one rule, in one place.

Our prompts have structure: section headers (``=== SUBJECT (judge only this) ===``, the
German ``=== BEWERTUNGSOBJEKT … ===``, the reviewers' header), labels that open a part of a
block (``User message:``, ``Answer under judgement:``), the thinker's control lines
(``TOOL: name({…})``, ``RESULT: OK``, ``ERGEBNIS: REVISED``), the markers around tool output
(``<<<TOOL result …>>>``), and "- item" lists. Text that is not ours — a stored memory, the
profile, a timeline entry, tool output, the user's message, a model's draft, reasons or
reasoning — can contain any of these. Copied as it is, it would forge a second SUBJECT block or
a decision of the thinker. So every builder passes such text through :func:`neutralise`:

* a run of three or more of ``=``, ``<``, ``>`` (and their full-width and box-drawing
  look-alikes, with invisible characters between them) is spaced out: ``=== X ===`` becomes
  ``= = = X = = =``, ``<<<TOOL`` becomes ``< < <TOOL``; no header or marker survives;
* a chat-template token (``<|im_start|>``, ``<start_of_turn>``, ``<tool_call>``, ``<think>``)
  gets a space after its ``<``, so it stays text;
* a line that, read without invisible characters, leading spaces and markdown emphasis, opens
  with a control word (``TOOL:``, ``RESULT:``, ``ERGEBNIS:``) or one of our labels is quoted
  with ``> ``: it can never be at the start of a line in control or label form;
* every line break (CR, CR LF, U+2028, U+2029, NEL, VT, FF) becomes ``\\n``, so what a model
  could read as a new line is a line here too, and the rules above see it.

The text stays readable; only its power to be structure is gone. :func:`as_item` and
:func:`as_field` keep a multi-line text inside one list item or one field (continuation lines
indented), so a memory cannot end the list and start something else.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from novaberg.prompts import labels, thinker

QUOTE = "> "
INDENT = "  "

_RUN_CHARS = "=<>\uff1d\ufe66\ua78a\u2550\uff1c\uff1e\ufe64\ufe65\u2039\u203a"
_INVISIBLE = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff"
# Linear on any text: what a repeat takes is never given back (``*+``, possessive; giving it
# back could not help, what follows each repeat is none of its characters), and the blanks of
# a template token are taken by one repeat only (``\s*/?\s*`` tried every split: quadratic).
_RUN = re.compile(f"[{_RUN_CHARS}](?:[{_INVISIBLE}]*+[{_RUN_CHARS}]){{2,}}")
_STRUCTURE_CHAR = re.compile(f"[{_RUN_CHARS}]")
_TEMPLATE_TOKEN = re.compile(
    r"<(?=\s*+(?:\||(?:/\s*+)?(?:tool_call|tool_response|tool_result|think|start_of_turn|"
    r"end_of_turn|s|bos|eos|system|user|assistant)\s*+>))",
    re.IGNORECASE,
)
_TEMPLATE_CLOSE = re.compile(r"\|>")
_CONTROL_WORD = re.compile(r"(?:tool|result|ergebnis)[\s*_`~]*:", re.IGNORECASE)
_LEADING_DECORATION = " \t*_#>`~|-+"


def neutralise(text: str) -> str:
    """``text`` with nothing left that could be read as a header, label, control line, tool
    marker or chat-template token of our prompts (see the module docstring for the rule)."""
    if not text:
        return ""
    text = "\n".join(text.splitlines())  # every kind of line break becomes "\n"
    text = _RUN.sub(_spaced, text)
    text = _TEMPLATE_TOKEN.sub("< ", text)
    text = _TEMPLATE_CLOSE.sub("| >", text)
    return "\n".join(
        QUOTE + line if _is_structure_line(line) else line for line in text.split("\n")
    )


def as_item(text: str, bullet: str = "- ") -> str:
    """One list item: the neutralised text, its continuation lines indented under the bullet."""
    return bullet + _indented(neutralise(text))


def as_field(label: str, text: str) -> str:
    """``label: text`` with the neutralised text; continuation lines indented."""
    return f"{label}: {_indented(neutralise(text))}"


def as_line(text: str) -> str:
    """The neutralised text on one line (for a value inside a sentence, such as a tone)."""
    return " ".join(neutralise(text).split())


def _indented(text: str) -> str:
    return text.replace("\n", "\n" + INDENT)


def _spaced(match: re.Match[str]) -> str:
    return " ".join(_STRUCTURE_CHAR.findall(match.group(0)))


def _is_structure_line(line: str) -> bool:
    folded = _fold(line).lstrip(_LEADING_DECORATION)
    if not folded:
        return False
    if _CONTROL_WORD.match(folded):
        return True
    return folded.startswith(_label_starts())


def _fold(line: str) -> str:
    """The line as a reader sees it: compatibility forms folded, invisible characters gone."""
    folded = unicodedata.normalize("NFKC", line)
    if not folded.isascii():  # no ASCII character is invisible (category Cf)
        folded = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    return folded.casefold()


@functools.cache
def _label_starts() -> tuple[str, ...]:
    """The label lines of every prompt builder, folded: the judging prompts' (their texts in
    :mod:`~novaberg.prompts.labels`, not in the builder, which imports this module) and the
    thinker's."""
    found: list[str] = []
    for table in (labels.EN, labels.DE):
        found += [table.user_message, table.answer, f"{table.background_answer}:"]
        found += [
            f"{name}:"
            for name in (
                table.intent,
                table.memory,
                table.profile_core,
                table.profile_adaptive,
                table.timeline,
            )
        ]
    found += thinker.LABELS
    return tuple(sorted({_fold(label) for label in found}))
