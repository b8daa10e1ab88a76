"""MCP servers as tools of the thinker: ``[mcp.servers.NAME]`` in ``config.toml`` (a
``command`` for stdio, or a ``url`` with ``headers`` for Streamable HTTP), none unless
configured (:class:`~novaberg.config.Mcp`).

Each server is started once per process, beside the engine's opening, and kept: a task per
server holds the SDK's client (its transport lives and ends in that task), and its tools,
listed at start, join the thinker's as ``NAME__TOOL`` (:func:`tool_name`). Like every tool
they are declared in every tool-bearing request (seed 001: Ollama drops a call to a name it
was not given), described as coming from that server, with the server's own argument schema
(the server checks the arguments). A turn waits for the servers' start at most
``mcp.start_timeout_s``, once.

What a tool answers is untrusted data: cut at ``mcp.max_result_chars``, then, as any tool's
output, capped, neutralised and marked for the model (:class:`~novaberg.tools.registry.
ToolResult`); it is never stored as a memory. A server that does not start, a call that
takes longer than ``mcp.call_timeout_s``, a server that crashed (started again on the next
call) or answers garbage costs that one call: an error result for the model and a notice in
the turn's trace, never the turn and never another tool. Logs name the server (from the
configuration) and the kind of failure, never a text the server sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types
from pydantic import BaseModel, ConfigDict

from novaberg import __version__
from novaberg.config import Mcp, McpServer
from novaberg.errors import error_kind
from novaberg.tools.registry import Tool, ToolEnv, ToolResult

log = logging.getLogger("novaberg")
SEPARATOR = "__"
MAX_TOOLS = 64
"""Tools taken from one server at most (every one is declared in every request)."""
MAX_DESCRIPTION = 600
MAX_SCHEMA_CHARS = 8000
"""A tool whose argument schema is longer is left out (it would fill every request)."""
STOP_S = 5.0


def tool_name(server: str, tool: str) -> str:
    """``SERVER__TOOL``, within the 64 characters of ``[A-Za-z0-9_-]`` that function names
    may use on every backend."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
    return f"{server}{SEPARATOR}{cleaned}"[:64]


class AnyArguments(BaseModel):
    """A call's arguments as the model gave them: the server checks them against its schema."""

    model_config = ConfigDict(extra="allow")


@dataclass
class McpTool(Tool):
    """A server's tool in the registry: its own schema, its calls through :class:`Link`."""

    schema: dict[str, Any] = field(default_factory=dict)

    def spec(self) -> dict[str, Any]:
        function = {"name": self.name, "description": self.description, "parameters": self.schema}
        return {"type": "function", "function": function}


class Link:
    """One configured server: started once, its client kept in a task of its own."""

    def __init__(self, name: str, spec: McpServer, config: Mcp) -> None:
        self.name = name
        self.spec = spec
        self.config = config
        self.listed: list[mcp_types.Tool] = []
        self.failure = ""
        """Why the server is not usable now (``""``: it is, or was never started)."""
        self.started = False
        """It started once in this process (and listed its tools)."""
        self._client: Any = None
        self._keeper: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def start(self) -> bool:
        """Start the server and list its tools, within ``mcp.start_timeout_s``."""
        async with self._lock:
            if self._client is not None:
                return True
            await self._halt()
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            ready.add_done_callback(_retrieved)  # read even when the start timed out
            self._stop = asyncio.Event()
            self._keeper = asyncio.create_task(self._keep(ready))
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.config.start_timeout_s)
            except TimeoutError:
                self.failure = f"did not start within {self.config.start_timeout_s:g} s"
            except Exception as exc:
                self.failure = f"did not start ({_kind(exc)})"
            else:
                self.failure = ""
                return True
            log.warning("MCP server %s %s", self.name, self.failure)
            await self._halt(wait_s=0)
            return False

    async def _keep(self, ready: asyncio.Future[None]) -> None:
        from mcp import Client

        try:
            async with (
                self._transport() as transport,
                Client(transport, client_info=_ME) as client,
            ):
                self.listed = (await client.list_tools()).tools[:MAX_TOOLS]
                self._client = client
                self.started = True
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done() and isinstance(exc, Exception):
                ready.set_exception(exc)
            elif not ready.done():
                ready.cancel()
            elif not self._stop.is_set():
                self.failure = f"stopped ({_kind(exc)})"
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self._client = None

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        """The SDK's transport to the server (not yet entered), and what it needs closed
        after: a stdio server's stderr sink (its text is not ours to log), an HTTP client."""
        spec = self.spec
        if spec.command is not None:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            env = {k: v.get_secret_value() for k, v in spec.env.items()}
            params = StdioServerParameters(command=spec.command, args=spec.args, env=env)
            sink = await asyncio.to_thread(open, os.devnull, "w", encoding="utf-8")
            try:
                yield stdio_client(params, errlog=sink)
            finally:
                sink.close()
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        headers = {k: v.get_secret_value() for k, v in spec.headers.items()}
        limit = self.config.call_timeout_s
        assert spec.url is not None
        async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(limit)) as http:
            yield streamable_http_client(spec.url, http_client=http)

    async def _halt(self, wait_s: float = STOP_S) -> None:
        """Stop the keeper task (the client closes, a stdio server is ended), cancelled
        after ``wait_s``."""
        keeper, self._keeper = self._keeper, None
        if keeper is None:
            return
        self._stop.set()
        done, _ = await asyncio.wait({keeper}, timeout=wait_s) if wait_s > 0 else (set(), None)
        if not done:
            keeper.cancel()
            with contextlib.suppress(BaseException):
                await keeper

    async def call(self, tool: str, arguments: dict[str, Any]) -> Outcome:
        """One call's outcome; a failure of ours says what happened, for the model and the
        trace (a server's own error text goes to the model alone)."""
        if self._client is None and not await self.start():
            return Outcome.failed(f"the MCP server {self.name} is not available ({self.failure})")
        client, limit = self._client, self.config.call_timeout_s
        try:
            answer = await asyncio.wait_for(client.call_tool(tool, arguments), limit)
        except TimeoutError:
            return Outcome.failed(f"no answer within {limit:g} s (mcp.call_timeout_s)")
        except Exception as exc:  # the server crashed or broke the protocol: start it anew
            self.failure = f"failed ({_kind(exc)})"
            log.warning(
                "MCP server %s %s; it starts again on the next call", self.name, self.failure
            )
            async with self._lock:
                await self._halt(wait_s=0)
            return Outcome.failed(f"the MCP server {self.name} {self.failure}")
        if answer.is_error:
            return Outcome(False, _text(answer), "it answered an error")
        return Outcome(True, _text(answer))

    async def aclose(self) -> None:
        async with self._lock:
            await self._halt()


@dataclass(frozen=True)
class Outcome:
    ok: bool
    text: str
    notice: str = ""
    """What the trace says of a failure (our words, never the server's)."""

    @classmethod
    def failed(cls, why: str) -> Outcome:
        return cls(False, f"The tool failed: {why}.", why)


_ME = mcp_types.Implementation(name="novaberg", version=__version__)


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


def _kind(exc: BaseException) -> str:
    """The kind of a failure (its class, or its group's first), never its message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return error_kind(exc) if isinstance(exc, Exception) else type(exc).__name__


def _text(answer: mcp_types.CallToolResult) -> str:
    """The result's text blocks; its structured content when it has no text."""
    parts = [b.text for b in answer.content if isinstance(b, mcp_types.TextContent)]
    if not parts and answer.structured_content is not None:
        parts = [json.dumps(answer.structured_content, ensure_ascii=False)]
    others = sum(1 for b in answer.content if not isinstance(b, mcp_types.TextContent))
    if others:
        parts.append(f"[{others} non-text part(s) left out]")
    return "\n".join(parts)


@dataclass(frozen=True)
class ServerReport:
    """One configured server as ``novaberg doctor`` reports it (``--json``: these fields)."""

    name: str
    transport: Literal["stdio", "streamable-http"]
    started: bool
    failure: str
    """Why it did not start or stopped answering; ``""`` while it works."""
    tools: list[str]
    """Its tools under the names the thinker gets."""


class McpServers:
    """The configured servers of one process, and their tools for the registry."""

    def __init__(self, config: Mcp) -> None:
        self.config = config
        self.links = {name: Link(name, spec, config) for name, spec in config.servers.items()}
        self._starting: asyncio.Task[list[bool]] | None = None

    def start(self) -> None:
        """Start every server now, in the background (once)."""
        if self.links and self._starting is None:
            self._starting = asyncio.create_task(self._start_all())

    async def _start_all(self) -> list[bool]:
        return list(await asyncio.gather(*(link.start() for link in self.links.values())))

    async def tools(self) -> list[Tool]:
        """The servers' tools, once their start ended (each within its timeout)."""
        if not self.links:
            return []
        self.start()
        assert self._starting is not None
        await asyncio.shield(self._starting)
        return [tool for link in self.links.values() for tool in _tools_of(link)]

    def notices(self) -> list[str]:
        """For the trace: each configured server that is not usable now, and why."""
        return [
            f"mcp: server {link.name} is not available ({link.failure}); its tools are left out"
            for link in self.links.values()
            if link.failure and not link.listed
        ]

    def report(self) -> list[ServerReport]:
        """Each server as ``novaberg doctor`` shows it: started or why not, and its tools."""
        return [
            ServerReport(
                name=link.name,
                transport="stdio" if link.spec.command is not None else "streamable-http",
                started=link.started and not link.failure,
                failure=link.failure,
                tools=[tool_name(link.name, t.name) for t in link.listed],
            )
            for link in self.links.values()
        ]

    async def aclose(self) -> None:
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        await asyncio.gather(*(link.aclose() for link in self.links.values()))


def _tools_of(link: Link) -> list[Tool]:
    found: list[Tool] = []
    for listed in link.listed:
        schema = dict(listed.input_schema or {"type": "object"})
        if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
            continue
        name = tool_name(link.name, listed.name)
        about = (listed.description or listed.name)[:MAX_DESCRIPTION]
        tool = McpTool(
            name,
            f"(MCP server {link.name}) {about}",
            AnyArguments,
            f"{__name__}:{listed.name}",
            schema=schema,
        )
        tool._loaded = _caller(link, listed.name, name)
        found.append(tool)
    return found


def _caller(link: Link, tool: str, shown: str) -> Any:
    async def call(arguments: BaseModel, env: ToolEnv) -> ToolResult:
        outcome = await link.call(tool, arguments.model_dump())
        text, cap = outcome.text, link.config.max_result_chars
        if len(text) > cap:
            _notice(env, f"mcp: {shown} answered {len(text)} characters; cut to {cap}")
            text = text[:cap] + f"\n[… cut at {cap} characters]"
        if not outcome.ok:
            _notice(env, f"mcp: {shown}: {outcome.notice}; the turn went on without it")
            log.info("a tool of MCP server %s failed", link.name)
        return ToolResult(shown, outcome.ok, text)

    return call


def _notice(env: ToolEnv, notice: str) -> None:
    if env.trace is not None:
        env.trace.notices.append(notice)
