"""The turn state: every channel a node may write, declared up front.

LangGraph drops a node's write to an undeclared key without a word (its StateGraph node
wrapper filters returned keys; upstream issue langgraph#8320). That is how the seed's
self-trigger vanished while the log said it was set. :func:`check_writes` makes such a write an
:class:`~novaberg.errors.UndeclaredChannelWrite` that stops the turn.

Channels for nodes that come later (thinker, tribunal, corrector) are declared now, so adding
those nodes changes no shape.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from novaberg.errors import GraphError, UndeclaredChannelWrite
from novaberg.graph.channels import Correcting, Court, MemoryPlan, Route, Salience, ThinkerRun


class TurnState(TypedDict, total=False):
    # input, set by the engine
    user_text: str
    user_id: str
    conversation_id: int
    turn_id: int
    origin: str
    router: Route
    # enricher: {"history": [...], "memories": [...], "profile": ..., "timeline": [...]}
    context: dict[str, Any]
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
    events: Annotated[list[dict[str, Any]], operator.add]


DECLARED_CHANNELS: frozenset[str] = frozenset(TurnState.__annotations__)

TYPED_CHANNELS: dict[str, type] = {
    "router": Route,
    "thinker": ThinkerRun,
    "tribunal": Court,
    "corrector": Correcting,
    "salience": Salience,
    "memory_item": MemoryPlan,
}
"""The channels whose values are models (:mod:`novaberg.graph.channels`): a write of another
type stops the turn. ``router`` is never ``None`` once written; the others may be."""


def check_writes(
    node: str, update: Any, declared: frozenset[str] = DECLARED_CHANNELS
) -> dict[str, Any]:
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
        if isinstance(value, expected) or (value is None and channel != "router"):
            continue
        raise GraphError(
            f"node '{node}' wrote {channel!r} as {type(value).__name__}, expected "
            f"{expected.__name__} (novaberg/graph/channels.py)"
        )
    return update
