"""What a turn does when one of its parts fails: only the responder is essential.

A node's model calls go through the model queue, which retries what may succeed on a retry and
falls back along the backend chain; what still fails reaches the node as a
:class:`~novaberg.errors.BackendError`, and its call records already say ``outcome: error``
(or ``timeout``). Then:

* a stage with a :class:`Fallback` (router, thinker, corrector, salience) goes on with the
  fallback's update — the default route, the draft kept, the answer kept, nothing
  remembered — and the turn's trace gets a notice naming the node (:func:`record_failure`);
* a judge abstains (``nodes/tribunal.py``: one judge's failure must not silence the others);
* a stage without a fallback (the responder) is essential: its failure fails the turn, and the
  error says which part failed (:func:`essential_failed`).

Notices and log lines name the part and the kind of failure (HTTP status, timeout), never a
server's error text or anything the user or a model wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from novaberg.errors import BackendError, error_kind

if TYPE_CHECKING:
    from novaberg.graph.state import TurnState
    from novaberg.nodes.context import TurnContext

log = logging.getLogger("novaberg")


@dataclass(frozen=True)
class Fallback:
    """How the turn goes on when a node that is not essential fails after its retries."""

    update: Callable[[TurnState, TurnContext], TurnState]
    """The node's channels as the turn continues without it."""
    consequence: str
    """What the turn does instead, for the notice ("the default route is used")."""


def describe(exc: BackendError) -> str:
    """The kind of failure, in a few words that carry no server or user text."""
    return error_kind(exc)


def record_failure(ctx: TurnContext, part: str, exc: BackendError, consequence: str) -> str:
    """Put a notice naming ``part`` into the turn's trace (and the log); return the notice."""
    retried = " after its retries" if exc.retryable else ""  # the queue retries only those
    text = f"failed{retried} ({describe(exc)}); {consequence}"
    ctx.trace.notices.append(f"{part}: {text}")
    log.warning("%s %s", part, text)
    return text


def essential_failed(node: str, exc: BackendError) -> None:
    """Make ``exc`` say which essential part failed (same exception, same type)."""
    prefix = f"The {node} failed, so this turn has no answer: "
    if exc.args and isinstance(exc.args[0], str) and not exc.args[0].startswith(prefix):
        exc.args = (prefix + exc.args[0], *exc.args[1:])
