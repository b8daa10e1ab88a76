"""Assembling the turn graph from nodes, each wrapped by the strict write guard.

The turn is a pipeline of stages; a stage with a ``when`` condition is skipped (its channel
stays ``None``) when the condition is false. Adding the thinker, the tribunal or the corrector
is adding a :class:`Stage`, not restructuring.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from novaberg.graph.state import DECLARED_CHANNELS, TurnState, check_writes

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from novaberg.nodes.context import TurnContext

NodeFn = Callable[[TurnState, "TurnContext"], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class Stage:
    name: str
    run: NodeFn
    when: Callable[[TurnState], bool] | None = None


def strict(name: str, fn: NodeFn, declared: frozenset[str] = DECLARED_CHANNELS) -> Any:
    """Wrap a node: hand it the turn context, announce it, refuse undeclared writes."""

    async def node(state: TurnState, config: RunnableConfig) -> dict[str, Any]:
        ctx: TurnContext = config["configurable"]["turn"]
        ctx.entered(name)
        return check_writes(name, await fn(state, ctx), declared)

    node.__name__ = name
    return node


def build_turn_graph(stages: Sequence[Stage]) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
    for stage in stages:
        graph.add_node(stage.name, strict(stage.name, stage.run))
    sources = [START, *(s.name for s in stages)]
    for index, source in enumerate(sources):
        _connect(graph, source, list(stages[index:]))
    return graph.compile()


def _connect(graph: StateGraph[Any, Any, Any, Any], source: str, rest: list[Stage]) -> None:
    """Edge from ``source`` to the first stage of ``rest`` whose condition holds (or END)."""
    if not rest or rest[0].when is None:
        graph.add_edge(source, rest[0].name if rest else END)
        return

    def route(state: TurnState) -> str:
        for stage in rest:
            if stage.when is None or stage.when(state):
                return stage.name
        return END

    targets = [s.name for s in rest]
    cut = next((i for i, s in enumerate(rest) if s.when is None), None)
    targets = targets[: cut + 1] if cut is not None else [*targets, END]
    graph.add_conditional_edges(source, route, targets)
