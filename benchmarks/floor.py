"""The libraries' floor under a turn at 0 ms per call (issue 21): what the `ollama` client and
LangGraph cost by themselves, with no Novaberg code, for the same work as one turn.

One real turn's chat requests are recorded (the scripted server's own record of a turn of
:class:`~novaberg.engine.Engine`), then sent again with the same model, messages, format,
options and ``think``, through a bare ``ollama.AsyncClient`` (streamed, as the backend sends
them) from the nodes of a bare LangGraph ``StateGraph`` with the turn's channels and its seven
stages in the turn's order: router (its call), enricher, responder (its call), thinker,
tribunal (the three judges' calls at once), salience (its call), memory_write. The nodes write
nothing and do nothing else. The figure is measured as Novaberg's own is: wall time per turn
less the server's account of its calls on the critical path (the judges count once, with the
longest).

Novaberg's overhead less this floor is what its own code costs a turn; the floor is what
no change inside Novaberg can remove while it keeps these two libraries.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import ollama
from langgraph.graph import END, START, StateGraph

from benchmarks.environment import environment
from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.graph.state import TurnState
from novaberg.testing import OllamaTestServer

SENT = ("model", "messages", "format", "options", "think", "tools")
"""The keys of a recorded ``/api/chat`` body that ``AsyncClient.chat`` takes as they are."""
STAGES = ("router", "enricher", "responder", "thinker", "tribunal", "salience", "memory_write")
CALLING = {"router": "router", "responder": "responder", "salience": "salience"}
Recorded = list[tuple[str, dict[str, Any]]]
"""A turn's chat requests: (caller, ``/api/chat`` body), in the order they were sent."""


async def _record(text: str) -> Recorded:
    """The chat requests (caller, body) of one turn of ``text``, after a warm-up turn."""
    with OllamaTestServer() as server, tempfile.TemporaryDirectory() as home:
        env = {"OLLAMA_HOST": server.url, "NOVABERG_HOME": home, "NOVABERG_BACKEND": "ollama"}
        with environment(env):
            engine = await Engine.open(load_settings().settings)
            try:
                await engine.run_turn("warm-up")
                before = len(server.requests())
                await engine.run_turn(text)
            finally:
                await engine.aclose()
        chats = [r for r in server.requests()[before:] if r.path == "/api/chat"]
    return [(r.caller, r.body) for r in chats]


def turn_requests(text: str = "Hallo Nova, Nachricht 0") -> Recorded:
    """One turn's chat requests as the scripted server recorded them (caller, body)."""
    recorded = asyncio.run(_record(text))
    callers = [caller for caller, _ in recorded]
    missing = [c for c in CALLING.values() if c not in callers]
    if missing or not any(c.startswith("judge_") for c in callers):
        raise RuntimeError(f"the recorded turn lacks calls: {missing or 'judges'} ({callers})")
    return recorded


async def _floor_turns(url: str, recorded: Recorded, turns: int) -> list[float]:
    client = ollama.AsyncClient(host=url, timeout=httpx.Timeout(30.0))
    bodies = {caller: body for caller, body in recorded}
    judges = [body for caller, body in recorded if caller.startswith("judge_")]
    spent: list[float] = []  # the server's account of each critical-path call, ms

    async def call(body: dict[str, Any]) -> float:
        sent = {k: v for k, v in body.items() if k in SENT}
        total = 0
        async for part in await client.chat(stream=True, **sent):
            if part.done:
                total = part.total_duration or 0
        return total / 1e6

    async def one(caller: str) -> None:
        spent.append(await call(bodies[caller]))

    async def tribunal() -> None:
        spent.append(max(await asyncio.gather(*(call(b) for b in judges))))

    def node(work: Callable[[], Awaitable[None]] | None) -> Any:
        async def run(state: TurnState) -> dict[str, Any]:
            if work is not None:
                await work()
            return {}

        return run

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(TurnState)
    for name in STAGES:
        work: Callable[[], Awaitable[None]] | None = None
        if name in CALLING:
            caller = CALLING[name]
            work = lambda caller=caller: one(caller)  # noqa: E731
        elif name == "tribunal":
            work = tribunal
        graph.add_node(name, node(work))
    previous = START
    for name in STAGES:
        graph.add_edge(previous, name)
        previous = name
    graph.add_edge(previous, END)
    compiled = graph.compile()
    state = {"user_text": "x", "events": []}
    rows = []
    try:
        for _ in range(3):  # warm-up: connections, LangGraph's first compile of a step
            await compiled.ainvoke(state)
        for _ in range(turns):
            spent.clear()
            began = time.perf_counter()
            await compiled.ainvoke(state)
            rows.append((time.perf_counter() - began) * 1000 - sum(spent))
    finally:
        await client.close()  # type: ignore[no-untyped-call]  # untyped upstream
    return rows


def floor_ms(url: str, recorded: Recorded, turns: int) -> list[float]:
    """Per turn: wall time less the server's account, for ``turns`` floor turns at ``url``."""
    return asyncio.run(_floor_turns(url, recorded, turns))
