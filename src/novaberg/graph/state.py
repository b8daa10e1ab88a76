"""The turn state: every channel a node may write, declared up front.

LangGraph drops a node's write to an undeclared key without a word (its StateGraph node
wrapper filters returned keys; upstream issue langgraph#8320). That is how the seed's
self-trigger vanished while the log said it was set. :func:`check_writes` makes such a write an
:class:`~novaberg.errors.UndeclaredChannelWrite` that stops the turn.

Each node's channel holds one frozen model (:mod:`novaberg.graph.channels`), and the write guard
refuses a value of another type, so a wrong shape stops the turn where it was written, not in a
node after it.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict, cast

from novaberg.errors import GraphError, UndeclaredChannelWrite
from novaberg.graph.channels import (
    Context,
    Correcting,
    Court,
    MemoryPlan,
    Route,
    Salience,
    ThinkerRun,
    TurnEvent,
)


class TurnState(TypedDict, total=False):
    # input, set by the engine
    user_text: str
    user_id: str
    conversation_id: int
    turn_id: int
    origin: str
    router: Route
    context: Context
    # responder's draft, and the answer the user gets
    draft: str
    reply: str
    thinker: ThinkerRun | None
    tribunal: Court | None
    corrector: Correcting | None
    salience: Salience | None
    # the memory item the turn will store with it
    memory_item: MemoryPlan | None
    # events raised during the turn (self-triggers, background jobs); appended, never replaced
    events: Annotated[list[TurnEvent], operator.add]


DECLARED_CHANNELS: frozenset[str] = frozenset(TurnState.__annotations__)

TYPED_CHANNELS: dict[str, type] = {
    "router": Route,
    "context": Context,
    "thinker": ThinkerRun,
    "tribunal": Court,
    "corrector": Correcting,
    "salience": Salience,
    "memory_item": MemoryPlan,
}
"""The channels whose values are models (:mod:`novaberg.graph.channels`): a write of another
type stops the turn. ``router`` and ``context`` are never ``None`` once written; the others may
be. ``events`` is a list of :class:`~novaberg.graph.channels.TurnEvent`."""

NEVER_NONE = frozenset({"router", "context"})


def check_writes(node: str, update: Any, declared: frozenset[str] = DECLARED_CHANNELS) -> TurnState:
    """Return ``update`` if every key is a declared channel and every typed channel holds its
    model; raise otherwise."""
    if update is None:
        return {}
    if not isinstance(update, dict):
        raise GraphError(f"node '{node}' returned {type(update).__name__}, expected a dict")
    undeclared = sorted(set(update) - declared)
    if undeclared:
        names = ", ".join(repr(k) for k in undeclared)
        raise UndeclaredChannelWrite(
            f"node '{node}' wrote {names}: not declared in the turn state. LangGraph would drop "
            "this write silently; declare the channel in novaberg/graph/state.py (TurnState) "
            "or stop writing it."
        )
    for channel, expected in TYPED_CHANNELS.items():
        if channel not in update:
            continue
        value = update[channel]
        if isinstance(value, expected) or (value is None and channel not in NEVER_NONE):
            continue
        raise GraphError(
            f"node '{node}' wrote {channel!r} as {type(value).__name__}, expected "
            f"{expected.__name__} (novaberg/graph/channels.py)"
        )
    raised = update.get("events", [])
    if not isinstance(raised, list) or not all(isinstance(e, TurnEvent) for e in raised):
        raise GraphError(
            f"node '{node}' wrote 'events' as {type(raised).__name__} of other items, expected "
            "a list of TurnEvent (novaberg/graph/channels.py)"
        )
    return cast(TurnState, update)  # checked above, key by key
