"""Call records and the turn trace: what happened, as verified facts.

Every request sent to a backend becomes one :class:`CallRecord` (retries and fallbacks
included). The :class:`Trace` of a turn collects them with the nodes' structured results and is
what ``novaberg ask --json`` prints and the database keeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, get_args

from novaberg.trace_document import TraceDocument

Outcome = Literal[
    "ok",
    "error",
    "timeout",
    "think_split_moved",
    "think_split_prose",
    "dropped_tool_call",
    "empty_answer",
    "malformed",
    "truncated",
]
OUTCOMES: tuple[str, ...] = get_args(Outcome)
"""Every outcome a call record may carry (the interface contract's list)."""

log = logging.getLogger("novaberg")

JsonMode = Literal["", "json_schema", "json_object", "prompt"]
"""How a structured request asked for JSON: ``json_schema`` (a schema the server enforces:
OpenAI ``response_format`` json_schema, Ollama ``format``), ``json_object`` (JSON mode with the
schema attached, as llama-cpp-python's server takes it), ``prompt`` (asked for in the prompt
only); ``""`` for a request that asked for no JSON."""


@dataclass
class CallRecord:
    """One request sent to one backend."""

    caller: str
    backend: str
    model: str
    think: bool
    content_len: int = 0
    thinking_len: int = 0
    eval_count: int = 0
    prompt_eval_count: int = 0
    tool_calls: int = 0
    outcome: Outcome = "ok"
    ms: float = 0.0
    queue_wait_ms: float = 0.0
    backend_ms: float = 0.0
    """The server's own account of the call (Ollama's ``total_duration``); 0 when unknown."""
    attempt: int = 1
    error: str = ""
    normalizer: str = ""
    """The thinking normaliser that read this call's answer (thinker calls only)."""
    json_mode: JsonMode = ""
    """How this request asked for JSON (see :data:`JsonMode`); ``""`` when it asked for none."""
    host: str = ""
    """The server that answered (or failed), for a backend with several (``ollama_hosts``),
    without its userinfo (:func:`novaberg.redaction.safe_url`); ``""`` otherwise."""
    started: float = field(default=0.0, compare=False)
    """``time.perf_counter()`` when the request was sent (for ordering; not exported)."""

    def contract_view(self) -> dict[str, Any]:
        """The keys of a call in ``novaberg ask --json`` (plus a few compatible extras)."""
        data = asdict(self)
        del data["started"]
        data["ms"] = round(self.ms, 1)
        data["queue_wait_ms"] = round(self.queue_wait_ms, 1)
        data["backend_ms"] = round(self.backend_ms, 1)
        return data


@dataclass
class Trace:
    """Everything one turn did, in order."""

    calls: list[CallRecord] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    node_started: list[float] = field(default_factory=list)
    """``time.perf_counter()`` when each entry of ``nodes`` started."""
    notices: list[str] = field(default_factory=list)
    """What the turn did that the user did not ask for, one line each, naming the node (a
    broken node, a cut reply, a trimmed prompt); never the text of a message or memory."""

    def add_call(self, record: CallRecord) -> None:
        self.calls.append(record)

    def enter(self, node: str) -> None:
        self.nodes.append(node)
        self.node_started.append(time.perf_counter())

    def node_ms(self, node: str) -> float:
        """Wall time of the first run of ``node`` (until the next node started)."""
        index = self.nodes.index(node)
        if index + 1 >= len(self.nodes):
            raise ValueError(f"{node} is the last node; its end is not recorded")
        return (self.node_started[index + 1] - self.node_started[index]) * 1000

    def answered_by(self) -> str:
        """Who answered the turn's calls, e.g. ``ollama/qwen3:4b``, as recorded."""
        seen = dict.fromkeys(
            f"{c.backend}/{c.model}"
            for c in self.calls
            if c.outcome != "error" and c.outcome != "timeout"
        )
        return ", ".join(seen) or "nobody"


class Observer(Protocol):
    """Told what a turn or a background job left behind, once it is stored: the call records
    as written to ``llm_calls`` (outcomes the nodes set after a call came back included) and,
    for a finished turn, its stored trace document. The server's ``/metrics`` is one."""

    def turn_ended(
        self,
        status: str,
        origin: str,
        seconds: float,
        calls: Sequence[CallRecord],
        trace: TraceDocument | None,
    ) -> None: ...

    def job_ended(self, job_type: str, status: str, calls: Sequence[CallRecord]) -> None: ...

    def task_ended(self, kind: str, status: str, calls: Sequence[CallRecord]) -> None: ...


class Observers:
    """The observers of one model queue (none unless a server adds its metrics). An observer
    that raises is logged and skipped: counting never fails a turn."""

    def __init__(self) -> None:
        self._all: list[Observer] = []

    def add(self, observer: Observer) -> None:
        self._all.append(observer)

    def remove(self, observer: Observer) -> None:
        if observer in self._all:
            self._all.remove(observer)

    def turn_ended(
        self,
        status: str,
        origin: str,
        seconds: float,
        calls: Sequence[CallRecord],
        trace: TraceDocument | None = None,
    ) -> None:
        for observer in list(self._all):
            try:
                observer.turn_ended(status, origin, seconds, calls, trace)
            except Exception as exc:
                log.error("an observer failed on a turn (%s)", type(exc).__name__)

    def job_ended(self, job_type: str, status: str, calls: Sequence[CallRecord]) -> None:
        for observer in list(self._all):
            try:
                observer.job_ended(job_type, status, calls)
            except Exception as exc:
                log.error("an observer failed on a job (%s)", type(exc).__name__)

    def task_ended(self, kind: str, status: str, calls: Sequence[CallRecord]) -> None:
        """A front-end's task (:mod:`novaberg.engine.tasks`) ended: ``done`` or ``failed``."""
        for observer in list(self._all):
            try:
                observer.task_ended(kind, status, calls)
            except Exception as exc:
                log.error("an observer failed on a front-end task (%s)", type(exc).__name__)
