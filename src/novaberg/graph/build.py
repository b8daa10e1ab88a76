"""Assembling the turn graph from nodes, each wrapped by the strict write guard.

The turn is a pipeline of stages; a stage with a ``when`` condition is skipped (its channel
stays ``None``) when the condition is false. Adding the thinker, the tribunal or the corrector
is adding a :class:`Stage`, not restructuring.

A stage with a ``fallback`` is not essential: when its model calls fail after their retries
(a :class:`~novaberg.errors.BackendError`), the turn goes on with the fallback's update and a
notice in the trace (``graph/failure.py``). A stage without one is essential: its failure fails
the turn, and the error names it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from novaberg import otel
from novaberg.errors import BackendError, GraphError
from novaberg.graph.failure import Fallback, essential_failed, record_failure
from novaberg.graph.state import DECLARED_CHANNELS, TurnState, check_writes

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph

    from novaberg.nodes.context import TurnContext

NodeFn = Callable[[TurnState, "TurnContext"], Awaitable[TurnState]]
"""A node: the state in, the channels it writes out (a partial :class:`TurnState`)."""


NEXT = ""
"""What an ``after`` router returns to continue with the next stage of the pipeline."""


@dataclass(frozen=True)
class Stage:
    """A node of the turn.

    ``when``: run only if true (otherwise skipped, its channel stays ``None``).
    ``after``: where to go once it ran: a stage name, or :data:`NEXT` (the default).
    ``detour``: not part of the pipeline; reached only through another stage's ``after``
    (the corrector, which returns to the tribunal).
    ``fallback``: how the turn goes on when the node fails after its retries; ``None``: the
    node is essential.
    ``runs``: for a node that decides itself whether to do anything (the thinker): whether it
    will; one that will not is still traced but not announced as progress (the client's
    live line names only nodes that work).
    ``answer_final``: the reply is final when this stage begins (the first stage after the
    tribunal): the caller gets it then (``TurnContext.answered``), not after the stages
    that only keep books.
    """

    name: str
    run: NodeFn
    when: Callable[[TurnState], bool] | None = None
    after: Callable[[TurnState], str] | None = None
    detour: bool = False
    fallback: Fallback | None = None
    runs: Callable[[TurnState, TurnContext], bool] | None = None
    answer_final: bool = False


def strict(
    name: str,
    fn: NodeFn,
    declared: frozenset[str] = DECLARED_CHANNELS,
    fallback: Fallback | None = None,
    runs: Callable[[TurnState, TurnContext], bool] | None = None,
    answer_final: bool = False,
) -> Any:
    """Wrap a node: hand it the turn context, announce it, refuse undeclared writes, and
    apply the failure rule (a fallback and a notice, or a failed turn that names the node).
    ``answer_final``: hand the reply to the caller before the node runs."""

    async def node(state: TurnState, config: RunnableConfig) -> TurnState:
        ctx: TurnContext = config["configurable"]["turn"]
        if answer_final and state.get("reply") is not None:
            ctx.answered(state["reply"])
        ctx.entered(name, announce=runs is None or runs(state, ctx))
        try:
            update = await otel.node(name, fn(state, ctx))
        except BackendError as exc:
            if fallback is None:
                essential_failed(name, exc)
                raise
            record_failure(ctx, name, exc, fallback.consequence)
            update = fallback.update(state, ctx)
        return check_writes(name, update, declared)

    node.__name__ = name
    return node


def build_turn_graph(stages: Sequence[Stage]) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
    for stage in stages:
        node = strict(
            stage.name,
            stage.run,
            fallback=stage.fallback,
            runs=stage.runs,
            answer_final=stage.answer_final,
        )
        graph.add_node(stage.name, node)
    pipeline = [s for s in stages if not s.detour]
    _connect(graph, START, pipeline)
    for index, stage in enumerate(pipeline):
        rest = pipeline[index + 1 :]
        if stage.after is None:
            _connect(graph, stage.name, rest)
        else:
            _branch(graph, stage, rest, [s.name for s in stages])
    for stage in stages:
        if stage.detour:
            if stage.after is None:
                raise GraphError(f"detour stage '{stage.name}' needs an 'after' router")
            _branch(graph, stage, [], [s.name for s in stages])
    return graph.compile()


def _first_runnable(state: TurnState, rest: list[Stage]) -> str:
    for stage in rest:
        if stage.when is None or stage.when(state):
            return stage.name
    return END


def _branch(
    graph: StateGraph[Any, Any, Any, Any], stage: Stage, rest: list[Stage], names: list[str]
) -> None:
    """Edges out of a stage with an ``after`` router."""
    after = stage.after
    assert after is not None

    async def route(state: TurnState) -> str:  # async: LangGraph runs a sync one in a thread
        target = after(state)
        return _first_runnable(state, rest) if target == NEXT else target

    graph.add_conditional_edges(stage.name, route, [*names, END])


def _connect(graph: StateGraph[Any, Any, Any, Any], source: str, rest: list[Stage]) -> None:
    """Edge from ``source`` to the first stage of ``rest`` whose condition holds (or END)."""
    if not rest or rest[0].when is None:
        graph.add_edge(source, rest[0].name if rest else END)
        return

    async def route(state: TurnState) -> str:  # async: LangGraph runs a sync one in a thread
        return _first_runnable(state, rest)

    targets = [s.name for s in rest]
    cut = next((i for i, s in enumerate(rest) if s.when is None), None)
    targets = targets[: cut + 1] if cut is not None else [*targets, END]
    graph.add_conditional_edges(source, route, targets)
