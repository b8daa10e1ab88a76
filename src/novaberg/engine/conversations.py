"""Which conversation a front-end's request continues, and whether it asks for a reply again
(the request's side, its headers, is :mod:`novaberg.server.conversations`).

The conversation: one the request names (Nova's id, checked to be the user's), else a
front-end's own chat id (a string, mapped to one conversation per user in
``conversation_aliases``: :func:`aliased_conversation`), else the user's conversation whose
stored messages match the history the request resends (the messages before its last user
message: :func:`matching_conversation`), else a new one (``Choice.new``).

The resent history is compared, never stored: Nova keeps her own (it is the responder's
recent history for that turn: :func:`shown_history`). The comparison takes
the user messages in order, and the assistant messages as a multiset of pieces, so that what
front-ends do to a reply does not break it: a reasoning block they fold into the text
(``<details type="reasoning">``, ``<think>``) is dropped, a follow-up Nova sent in the same
response (after ``---``) counts as its own piece wherever it was shown, and assistant messages
before the first user message (a character's greeting in SillyTavern) are not Nova's. A stored
follow-up (the reply of a self-triggered turn) may be missing from the resent history: one
that was not ready for its response reaches the client only with the next response, so a
client resends it from then on (at the start of that response), not before.

When no conversation matches exactly, front-ends have changed what they resend: SillyTavern
trims the head of a long chat to fit its context, a user edits or deletes a message, swipes back
to another reply, stops one half-way, a message Nova refused stays in the chat, a group chat
prefixes replies with "Name: ". Then the conversation that holds the most of the resent user
messages in the same order (at least half of them; assistant text is not compared) continues,
the newest among equals, and it is a regenerate when this message is its last user message
again. A history with no user message after a greeting (SillyTavern's swipe of a chat's first
reply) asks again for the first reply of the conversation that greeting began (named by a
hash of the greeting) when that holds just this message.

A regenerate: the same history and the same last message again, i.e. the conversation's
last user message is this message and the stored messages before it match the history. The
turn then runs again as a ``regenerate`` of that turn (:mod:`novaberg.engine`): the user's
message and its memory are not stored a second time, and the new reply replaces the old one.
A request with no history at all and no conversation header starts a new conversation (a
first message repeated is a new chat more often than a regenerate).
"""

from __future__ import annotations

import hashlib
import math
import re
import string
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from novaberg.errors import StorageError
from novaberg.storage import conversations as repository
from novaberg.storage.db import Database, Message, now

MAX_CANDIDATES = 50
"""The user's newest conversations holding the history's last user message that are compared
(older ones than that start a new conversation)."""

_RULE = re.compile(r"\n[ \t]*---[ \t]*\n")

# A reasoning block is ``<details ... type="reasoning" ...>...</details>`` (the type in either
# quotes, anywhere inside the tag) or ``<think>...</think>``, upper or lower case, up to its first
# close; one that does not close stays text. They are found in one pass over the text: a regular
# expression with ``[^>]*type=...[^>]*>.*?`` backtracks cubically on a repeated unclosed tag.
_FOLD = str.maketrans(
    string.ascii_uppercase + "\u0130\u0131\u212a\u017f", string.ascii_lowercase + "iiks"
)
"""ASCII letters to lower case, and the letters that ``re.IGNORECASE`` takes for ``i``,
``k`` and ``s`` (dotted and dotless I, KELVIN SIGN, LONG S): one character for one, so that
positions in the folded text are positions in the text."""
_THINK_OPEN, _THINK_CLOSE = re.compile("<think>"), re.compile("</think>")
_DETAILS_OPEN, _DETAILS_CLOSE = re.compile(r"<details\b"), re.compile("</details>")
_TAG_END = re.compile(">")
_REASONING_TYPE = re.compile(r"type=[\"']reasoning[\"']")
_NONE = (sys.maxsize, sys.maxsize)
"""No block (further on)."""

Said = tuple[str, str]
"""(role, text) of one message."""


@dataclass(frozen=True)
class Choice:
    conversation: int
    regenerate: int | None = None
    """The turn whose reply the request asks for again; ``None`` for a new turn."""
    new: bool = False
    """The conversation was made for this request (nothing stored matched)."""

    def notices(self, resent: int) -> tuple[str, ...]:
        """For the turn's trace: a new conversation is said, never silent (``resent``: how
        many messages the front-end resent before this one)."""
        if not self.new:
            return ()
        if resent == 0:
            return ("a new conversation",)
        return (
            f"a new conversation: no stored one matched the {resent} messages the front-end "
            "resent; the responder's history is the chat as resent",
        )


@dataclass(frozen=True)
class _Stored:
    role: str
    text: str
    turn_id: int
    followup: bool = False
    """The reply of a self-triggered turn (a follow-up)."""


class _Next:
    """Where a pattern next occurs in a text, asked for positions that only grow: what was
    searched is not searched again, so all the asking together reads the text once."""

    def __init__(self, pattern: re.Pattern[str], text: str) -> None:
        self._pattern = pattern
        self._text = text
        self._searched_from = sys.maxsize
        self._found = -1

    def at(self, start: int) -> int:
        """The first occurrence at or after ``start``; -1 when there is none."""
        if self._searched_from <= start and (self._found < 0 or start <= self._found):
            return self._found
        match = self._pattern.search(self._text, start)
        self._searched_from, self._found = start, match.start() if match else -1
        return self._found


class _Blocks:
    """The reasoning blocks of one (folded) text, the next of each kind from a position on."""

    def __init__(self, folded: str) -> None:
        self._think_open = _Next(_THINK_OPEN, folded)
        self._think_close = _Next(_THINK_CLOSE, folded)
        self._details_open = _Next(_DETAILS_OPEN, folded)
        self._details_close = _Next(_DETAILS_CLOSE, folded)
        self._tag_end = _Next(_TAG_END, folded)
        self._reasoning_type = _Next(_REASONING_TYPE, folded)

    def think(self, start: int) -> tuple[int, int]:
        """(start, end) of the first ``<think>`` block at or after ``start``."""
        opened = self._think_open.at(start)
        if opened < 0:
            return _NONE
        closed = self._think_close.at(opened + len("<think>"))
        return _NONE if closed < 0 else (opened, closed + len("</think>"))

    def details(self, start: int) -> tuple[int, int]:
        """(start, end) of the first ``<details type="reasoning">`` block at or after
        ``start``."""
        while (opened := self._details_open.at(start)) >= 0:
            tag_end = self._tag_end.at(opened + len("<details"))
            typed = self._reasoning_type.at(opened + len("<details"))
            if tag_end < 0 or typed < 0:
                return _NONE  # no later tag ends, or none is of the reasoning type
            if typed < tag_end:
                closed = self._details_close.at(tag_end + 1)
                return _NONE if closed < 0 else (opened, closed + len("</details>"))
            start = tag_end + 1  # the tags opened before this ">" end there, untyped too
        return _NONE


def strip_reasoning(text: str) -> str:
    """``text`` without its reasoning blocks (see above), in time linear in its length."""
    blocks = _Blocks(text.translate(_FOLD))
    kept: list[str] = []
    position = 0
    think = details = (-1, -1)
    while True:
        if think[0] < position:
            think = blocks.think(position)
        if details[0] < position:
            details = blocks.details(position)
        start, end = min(think, details)
        if start == _NONE[0]:
            break
        kept.append(text[position:start])
        position = end
    kept.append(text[position:])
    return "".join(kept)


def _pieces(text: str) -> list[str]:
    cleaned = strip_reasoning(text)
    return [p.strip() for p in _RULE.split(cleaned) if p.strip()]


def history_key(messages: Sequence[Said]) -> tuple[tuple[str, ...], Counter[str]]:
    """What two histories must share to be the same conversation (see the module text)."""
    users: list[str] = []
    pieces: Counter[str] = Counter()
    for role, text in messages:
        if role == "user":
            users.append(text.strip())
        elif role == "assistant" and users:
            pieces.update(_pieces(text))
    return tuple(users), pieces


def stored_messages(db: Database, conversation: int) -> list[_Stored]:
    """The conversation's messages as GET /api/conversations/{id}/messages shows them."""
    return [
        _Stored(r.role, r.content, r.turn_id, r.origin == "self_trigger")
        for r in repository.said_in(db, conversation)
    ]


def _said(stored: Sequence[_Stored]) -> list[Said]:
    return [(s.role, s.text) for s in stored]


def _matches(stored: Sequence[_Stored], history: Sequence[Said]) -> bool:
    """Whether ``history`` is what was stored, each follow-up shown or not (see the module
    text): the same user messages, and every stored reply's pieces, plus none or some of the
    follow-ups' pieces."""
    users, pieces = history_key(history)
    stored_users, required = history_key(_said([s for s in stored if not s.followup]))
    optional = Counter(p for s in stored if s.followup for p in _pieces(s.text))
    return users == stored_users and not required - pieces and not pieces - required - optional


def _regenerated_turn(
    stored: Sequence[_Stored], history: Sequence[Said], message: str
) -> int | None:
    """The turn of the last user message when it is ``message`` and what came before it
    matches ``history``."""
    last = next((i for i in range(len(stored) - 1, -1, -1) if stored[i].role == "user"), None)
    if last is None or stored[last].text.strip() != message.strip():
        return None
    if not _matches(stored[:last], history):
        return None
    return stored[last].turn_id


def in_conversation(
    db: Database, conversation: int, history: Sequence[Said], message: str, *, new: bool = False
) -> Choice:
    """A named conversation: it continues; a regenerate when the request is one."""
    stored = stored_messages(db, conversation)
    if _matches(stored, history):
        return Choice(conversation, new=new)
    return Choice(conversation, _regenerated_turn(stored, history, message), new=new)


TAIL_USERS = 3
"""A candidate conversation holds one of the resent history's last this many user messages."""
SHARED_SHARE = 0.5
"""The share of the resent user messages a conversation must hold, in order, to be the one a
history continues when it does not match exactly (see :func:`matching_conversation`)."""
MAX_COMPARED = 64
"""The most recent user messages of each side compared for that share."""


def _shared(resent: Sequence[str], stored: Sequence[str]) -> int:
    """How many of the ``resent`` user messages ``stored`` holds in the same order (the
    longest common subsequence of the last :data:`MAX_COMPARED` of each)."""
    a, b = resent[-MAX_COMPARED:], stored[-MAX_COMPARED:]
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def _enough(shared: int, resent: Sequence[str]) -> bool:
    return shared >= max(1, math.ceil(len(resent) * SHARED_SHARE))


def _resembling(
    stored: Sequence[_Stored], users: Sequence[str], message: str
) -> tuple[int, int | None] | None:
    """(how many user messages are shared, the turn it regenerates or ``None``) when the
    history ``users`` continues (or asks again for the last reply of) these stored messages
    without matching them exactly; else ``None``."""
    said = [(s.text.strip(), s.turn_id) for s in stored if s.role == "user" and not s.followup]
    texts = [text for text, _ in said]
    if not texts:
        return None
    asked_again = texts[-1] == message.strip() and (not users or users[-1] != texts[-1])
    if asked_again:
        shared = _shared(users, texts[:-1])
        return (shared, said[-1][1]) if _enough(shared, users) else None
    shared = _shared(users, texts)
    return (shared, None) if _enough(shared, users) else None


GREETING_ALIAS = "greeting\n"
"""The alias of the conversation a greeted chat began (:func:`greeting_alias`): a newline
cannot be part of a chat id sent in a header, so it never meets a front-end's own."""


def greeting_alias(history: Sequence[Said]) -> str | None:
    """What names the chat a greeting began: a hash of the assistant messages before the first
    user message (a SillyTavern character's greeting, never stored itself); ``None`` without
    one."""
    greeting = []
    for role, text in history:
        if role == "user":
            break
        if role == "assistant":
            greeting.append(text.strip())
    if not greeting:
        return None
    digest = hashlib.sha256("\n".join(greeting).encode("utf-8")).hexdigest()
    return GREETING_ALIAS + digest


def _first_reply_again(db: Database, user: str, message: str, alias: str) -> Choice | None:
    """A request with no user message before its own, after a greeting (a SillyTavern swipe of
    a chat's first reply): a regenerate of the conversation this greeting began when that holds
    just this one message, else ``None`` (another chat that opened with the same words, after
    another greeting, is a chat of its own)."""
    began = repository.aliased(db, user, alias)
    if began is None:
        return None
    said = [s for s in stored_messages(db, began) if s.role == "user" and not s.followup]
    if len(said) == 1 and said[0].text.strip() == message.strip():
        return Choice(began, said[0].turn_id)
    return None


def _greeted_conversation(db: Database, user: str, alias: str) -> int:
    """A new conversation, named by the greeting that began it (the newest such chat)."""
    stamp = now()
    with db.transaction() as c:
        created = repository.create(c, user, stamp)
        repository.add_alias(c, user, alias, created, stamp, replace=True)
    return created


def matching_conversation(db: Database, user: str, history: Sequence[Said], message: str) -> Choice:
    """The conversation a history without a chat id continues; else a new one.

    First the user's newest conversation whose stored messages are ``history`` (it
    continues) or are ``history`` followed by this very message (a regenerate). Then, as
    front-ends change what they resend (a trimmed head, an edited or deleted message, a
    swiped-back or stopped reply, a group chat's "Name: " replies, a message Nova refused),
    the conversation that holds the most of the resent user messages in order, at least
    :data:`SHARED_SHARE` of them, the newest among equals; a regenerate when this message is
    its last user message again. A history of no user message after a greeting asks again for
    the first reply of the conversation that greeting began, when that holds just this
    message."""
    users, _ = history_key(history)
    if not users:
        alias = greeting_alias(history)
        if alias is None:
            return Choice(db.new_conversation(user), new=True)
        again = _first_reply_again(db, user, message, alias)
        return again or Choice(_greeted_conversation(db, user, alias), new=True)
    tail = list(dict.fromkeys(users[-TAIL_USERS:]))
    best: tuple[int, Choice] | None = None
    for conversation in repository.holding_user_message(db, user, tail, MAX_CANDIDATES):
        messages = stored_messages(db, conversation)
        if _matches(messages, history):
            return Choice(conversation)
        regenerated = _regenerated_turn(messages, history, message)
        if regenerated is not None:
            return Choice(conversation, regenerated)
        near = _resembling(messages, users, message)
        if near is not None and (best is None or near[0] > best[0]):  # newest first: ties stay
            best = (near[0], Choice(conversation, near[1]))
    return best[1] if best is not None else Choice(db.new_conversation(user), new=True)


def aliased_conversation(db: Database, user: str, external: str) -> tuple[int, bool]:
    """The user's conversation for a front-end's chat id, and whether it is new (the first
    time)."""
    found = repository.aliased(db, user, external)
    if found is not None:
        return found, False
    stamp = now()
    with db.transaction() as c:  # two first requests at once: one alias wins, both use it
        created = repository.create(c, user, stamp)
        repository.add_alias(c, user, external, created, stamp, replace=False)
        chosen = repository.aliased(c, user, external)
    if chosen is None:  # the alias was just written in this transaction
        raise StorageError(f"The alias of conversation {created} was not stored.")
    return chosen, chosen == created


def shown_history(said: Sequence[Said], longest: int) -> tuple[Message, ...]:
    """The chat a front-end resent, as the responder's recent history: its user and
    assistant messages in order, reasoning blocks folded into a reply dropped, an assistant
    message before the first user message (a character's greeting: not Nova's words) left
    out, and so is a user message longer than ``longest`` characters (``max_message_chars``:
    one Nova refused, which the front-end keeps showing)."""
    shown: list[Message] = []
    for role, text in said:
        if role == "user":
            if len(text.strip()) > longest:
                continue
            shown.append(Message("user", text.strip()))
        elif role == "assistant" and shown:
            reply = strip_reasoning(text).strip()
            if reply:
                shown.append(Message("assistant", reply))
    return tuple(shown)


def said_before(db: Database, conversation: int, sentence: str) -> bool:
    """Whether one of Nova's stored replies in the conversation holds ``sentence``."""
    return any(
        s.role == "assistant" and sentence in s.text for s in stored_messages(db, conversation)
    )
