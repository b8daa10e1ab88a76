"""The turn graph refuses writes to undeclared channels; LangGraph alone would drop them."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from novaberg.errors import GraphError, UndeclaredChannelWrite
from novaberg.graph.build import Stage, build_turn_graph
from novaberg.graph.channels import Correcting, MemoryPlan, Route, Salience, TurnEvent
from novaberg.graph.state import check_writes
from novaberg.telemetry import Trace


class FakeCtx:
    """Only what the strict wrapper touches: a trace and the progress hook."""

    def __init__(self) -> None:
        self.trace = Trace()

    def entered(self, node: str, *, announce: bool = True) -> None:
        self.trace.enter(node)


async def test_plain_langgraph_drops_an_undeclared_write_silently() -> None:
    # The reason for the guard: this is how the seed's self-trigger vanished.
    class State(TypedDict, total=False):
        reply: str

    async def thinker(state: State) -> dict[str, Any]:
        return {"reply": "kept", "self_trigger": True}

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    graph.add_node("thinker", thinker)
    graph.add_edge(START, "thinker")
    graph.add_edge("thinker", END)
    result = await graph.compile().ainvoke({})
    assert result == {"reply": "kept"}  # no error, and the self-trigger is gone


async def test_novaberg_graph_raises_on_a_write_to_an_undeclared_channel() -> None:
    async def thinker(state: Any, ctx: Any) -> dict[str, Any]:
        return {"reply": "kept", "self_trigger": True}

    graph = build_turn_graph([Stage("thinker", thinker)])
    with pytest.raises(UndeclaredChannelWrite) as info:
        await graph.ainvoke({}, config={"configurable": {"turn": FakeCtx()}})
    assert "'self_trigger'" in str(info.value) and "thinker" in str(info.value)


async def test_declared_channels_pass_and_events_accumulate() -> None:
    async def one(state: Any, ctx: Any) -> dict[str, Any]:
        return {"events": [TurnEvent("a", 1, "pending")]}

    async def two(state: Any, ctx: Any) -> dict[str, Any]:
        return {"events": [TurnEvent("b", 2, "pending")], "reply": "done"}

    ctx = FakeCtx()
    result = await build_turn_graph([Stage("one", one), Stage("two", two)]).ainvoke(
        {"events": []}, config={"configurable": {"turn": ctx}}
    )
    assert result["events"] == [TurnEvent("a", 1, "pending"), TurnEvent("b", 2, "pending")]
    assert ctx.trace.nodes == ["one", "two"]


async def test_conditional_stages_are_skipped_when_their_condition_is_false() -> None:
    async def mark(name: str) -> Any:
        async def node(state: Any, ctx: Any) -> dict[str, Any]:
            return {"events": [TurnEvent(name, 0, "pending")]}

        return node

    stages = [
        Stage("responder", await mark("responder")),
        Stage(
            "thinker",
            await mark("thinker"),
            when=lambda s: bool(s.get("router", {}).get("needs_check")),
        ),
        Stage("tribunal", await mark("tribunal"), when=lambda s: False),
        Stage("salience", await mark("salience")),
    ]
    graph = build_turn_graph(stages)
    checked = await graph.ainvoke(
        {"events": [], "router": {"needs_check": True}},
        config={"configurable": {"turn": FakeCtx()}},
    )
    plain = await graph.ainvoke(
        {"events": [], "router": {"needs_check": False}},
        config={"configurable": {"turn": FakeCtx()}},
    )
    assert [e.type for e in checked["events"]] == ["responder", "thinker", "salience"]
    assert [e.type for e in plain["events"]] == ["responder", "salience"]


async def test_choosing_the_next_stage_hands_nothing_to_a_thread() -> None:
    """LangGraph runs a synchronous edge function in the loop's executor: a thread hand-over
    for every branch a turn takes (issue 21). The graph's own routers never take one."""

    async def mark(name: str) -> Any:
        async def node(state: Any, ctx: Any) -> dict[str, Any]:
            return {"events": [TurnEvent(name, 0, "pending")]}

        return node

    stages = [
        Stage("responder", await mark("responder"), after=lambda s: "salience"),
        Stage("tribunal", await mark("tribunal"), when=lambda s: False),
        Stage("salience", await mark("salience"), when=lambda s: True),
    ]
    graph = build_turn_graph(stages)
    handed: list[object] = []

    class Recording(concurrent.futures.ThreadPoolExecutor):
        def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            handed.append(fn)
            return super().submit(fn, *args, **kwargs)

    loop = asyncio.get_running_loop()
    with Recording(max_workers=1) as executor:
        loop.set_default_executor(executor)
        done = await graph.ainvoke({"events": []}, config={"configurable": {"turn": FakeCtx()}})
    assert [e.type for e in done["events"]] == ["responder", "salience"]
    assert handed == []


def test_a_node_must_return_a_mapping() -> None:
    with pytest.raises(GraphError, match="expected a dict"):
        check_writes("router", ["not", "a", "dict"])


def test_a_typed_channel_refuses_a_value_of_another_type() -> None:
    """The router's channel holds a Route: the shape the seeds' nodes wrote (a dict) stops the
    turn with the channel's name and both types, instead of reaching the nodes after it."""
    route = {"intent": "smalltalk", "tone": "warm", "needs_check": False}
    with pytest.raises(GraphError, match=r"'router' as dict, expected Route"):
        check_writes("router", {"router": route})
    with pytest.raises(GraphError, match=r"'router' as NoneType, expected Route"):
        check_writes("router", {"router": None})
    with pytest.raises(GraphError, match=r"'salience' as dict, expected Salience"):
        check_writes("salience", {"salience": {"score": 0.9, "summary": "x"}})


def test_a_typed_channel_takes_its_model_and_an_optional_one_none() -> None:
    written = {
        "router": Route(intent="smalltalk", tone="warm", needs_check=False, default=False),
        "salience": Salience(score=0.9, summary="The user is called Ada."),
        "memory_item": None,
        "corrector": Correcting(1, ("legal: x",), applied=False),
        "reply": "Hello",
    }
    assert check_writes("any", written) is written
    assert check_writes("memory_write", {"memory_item": MemoryPlan("Ada", 0.9)})


def test_events_are_turn_events() -> None:
    with pytest.raises(GraphError, match=r"'events' as list of other items, expected a list"):
        check_writes("thinker", {"events": [{"type": "self_trigger", "id": 1}]})
    raised = {"events": [TurnEvent("self_trigger", 1, "pending")]}
    assert check_writes("thinker", raised) is raised
