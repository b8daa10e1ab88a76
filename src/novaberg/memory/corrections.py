"""Corrections said in conversation ("no, Munich, not Berlin", "ich habe keinen Hund mehr"):
which memory they are about, and what it says afterwards.

The router names the words that were wrong (and, for a correction, the right ones); the
enricher asks :func:`resolve` which of the user's current items hold the wrong words. Facts
go first (a short-term item a fact covers is no candidate anyway); exactly one item is the
target, several saying different things are ambiguous (Nova asks, nothing changes), none is
unmatched (Nova says she remembers nothing about it, nothing changes). The turn's own
transaction then applies it (:func:`apply`, from ``engine/turn_store.py``): the correction is
in memory before Nova's next answer, and a turn that fails changes nothing. The new text is
the old one with the wrong words replaced by the right ones.
"""

from __future__ import annotations

import logging

from novaberg.errors import UsageError
from novaberg.graph.channels import Correction, CorrectionOutcome, Resolved
from novaberg.memory.retrieval import query_terms
from novaberg.memory.store import MemoryStore
from novaberg.storage.sql import Connection
from novaberg.text import same_text

log = logging.getLogger("novaberg")
Outcome = CorrectionOutcome

__all__ = ["Outcome", "Resolved", "apply", "resolve", "swap"]


def resolve(store: MemoryStore, user: str, said: Correction) -> Resolved:
    """Blocking (database reads): what the router's ``correction`` is about."""
    kind, wrong = said.kind, said.wrong.strip()
    right = (said.right or "").strip()
    if not wrong:
        return Resolved("unmatched", wrong)
    found = store.fulltext(user, query_terms(wrong), ranked=50, facts=50)
    items = store.by_ids(user, [c.id for c in found])
    holding = [i for i in items.values() if i.current and wrong.lower() in i.text.lower()]
    facts = [i for i in holding if i.kind == "long_term"]
    targets = facts or holding
    distinct = {same_text(i.text): i for i in sorted(targets, key=lambda i: -i.id)}
    if not distinct:
        return Resolved("unmatched", wrong)
    if len(distinct) > 1:
        return Resolved("ambiguous", wrong, options=tuple(i.text for i in distinct.values()))
    target = next(iter(distinct.values()))
    if kind == "retract":
        return Resolved("retract", wrong, target.id, target.text)
    return Resolved("correct", wrong, target.id, target.text, swap(target.text, wrong, right))


def swap(text: str, wrong: str, right: str) -> str:
    """``text`` with every ``wrong`` (any case) replaced by ``right``; no pattern is built
    from the user's words."""
    low, needle = text.lower(), wrong.lower()
    if len(low) != len(text):  # a letter whose lower case is longer: exact case only
        return text.replace(wrong, right)
    out, at = [], 0
    while (hit := low.find(needle, at)) >= 0:
        out += [text[at:hit], right]
        at = hit + len(wrong)
    return "".join([*out, text[at:]])


def apply(
    c: Connection, user: str, found: Resolved, turn_id: int, message_id: int | None
) -> int | None:
    """In the turn's transaction: the correction or retraction the enricher resolved.
    Returns the new item's id for a correction. An item that stopped being current meanwhile
    is left alone."""
    memory_id = found.memory_id
    if found.outcome not in ("correct", "retract") or memory_id is None:
        return None
    try:
        if found.outcome == "retract":
            MemoryStore.retract_in(c, user, memory_id)
            return None
        return MemoryStore.correct_in(
            c, user, memory_id, found.new or "",
            source_turn_id=turn_id, source_message_id=message_id,
        )  # fmt: skip
    except (LookupError, UsageError) as exc:  # forgotten, or changed meanwhile
        log.info("turn %d: the correction was not applied (%s)", turn_id, exc)
        return None
