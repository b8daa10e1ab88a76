"""Graph assembly: which nodes make a turn, in which order, and which may fail into a fallback."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph.graph.state import CompiledStateGraph


def compile_turn_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The turn graph: router → enricher → responder → thinker → tribunal ⇄ corrector →
    salience → memory write (the thinker and the tribunal decide themselves whether to run).

    Imported and compiled on demand: LangGraph takes about a second to import, which
    :meth:`~novaberg.engine.Engine.open` overlaps with its first backend request.
    """
    from novaberg.graph.build import Stage, build_turn_graph
    from novaberg.nodes import corrector, router, salience, thinker
    from novaberg.nodes.enricher import enricher
    from novaberg.nodes.memory_write import memory_write
    from novaberg.nodes.responder import responder
    from novaberg.nodes.tribunal import has_judges, route_after_tribunal, tribunal

    # Only the responder is essential; a stage with a fallback fails into it with a notice
    # (graph/failure.py), and each judge abstains on its own (nodes/tribunal.py).
    return build_turn_graph(
        [
            Stage("router", router.router, fallback=router.FALLBACK),
            Stage("enricher", enricher),
            Stage("responder", responder),
            Stage("thinker", thinker.thinker, fallback=thinker.FALLBACK, runs=thinker.should_run),
            Stage("tribunal", tribunal, after=route_after_tribunal, runs=has_judges),
            Stage(
                "corrector",
                corrector.corrector,
                after=lambda _: "tribunal",
                detour=True,
                fallback=corrector.FALLBACK,
            ),
            # the answer goes out here: salience and the memory write only keep books
            Stage("salience", salience.salience, fallback=salience.FALLBACK, answer_final=True),
            Stage("memory_write", memory_write),
        ]
    )
