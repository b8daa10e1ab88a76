"""Nova's MCP tools as a model sees them: a description each, typed arguments, typed results
(JSON text plus structured content with its output schema), on the SDK's ``MCPServer``.

``recall``, ``remember``, ``forget``, ``correct``, ``retract``, ``timeline``, ``profile``
and ``talk`` (the contract in
the design notes); no tool deletes everything. The profile and the timeline are also
resources (``nova://profile``, ``nova://timeline``), the same JSON as those tools' results,
for clients that let the user attach one to a conversation. Which user a call runs as comes from the
door's :data:`SeatOf` (``novaberg mcp --user``, or the key of ``/mcp``). A user mistake, a
refused turn or a missing memory is a tool error whose text says what to do; any other
failure is logged by its kind alone (never a message: it may quote the user) and answered
with a fixed text.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import date
from typing import Annotated, Any

from mcp.server.lowlevel.helper_types import ReadResourceContents
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, InputRequiredResult, Resource, TextContent, ToolAnnotations
from pydantic import Field

from novaberg import __version__
from novaberg.errors import NovabergError, error_kind
from novaberg.mcp import calls
from novaberg.mcp.calls import Seat

log = logging.getLogger("novaberg.mcp")

SeatOf = Callable[[Context], Awaitable[Seat]]
"""How a door tells who calls: the user of ``novaberg mcp``, or of the request's key."""

INSTRUCTIONS = (
    "Nova is the user's companion and remembers them. Use recall before answering something "
    "personal, remember what the user asks you to keep, and talk to hand a message to Nova "
    "herself. Every result carries ids the user can look up (novaberg memory show ID)."
)

Query = Annotated[str, Field(min_length=1, max_length=2000, description="What to look for.")]
Count = Annotated[int, Field(ge=1, le=50, description="How many memories at most.")]
MemoryId = Annotated[int, Field(description="The id of one memory (from recall or timeline).")]

# what each tool sends: a CallToolResult built by _sent, its output schema from the model
RecalledOut = Annotated[CallToolResult, calls.RecallResult]
RememberedOut = Annotated[CallToolResult, calls.RememberResult]
ForgottenOut = Annotated[CallToolResult, calls.ForgetResult]
ChangedOut = Annotated[CallToolResult, calls.Changed]
TimelineOut = Annotated[CallToolResult, calls.TimelineResult]
ProfileOut = Annotated[CallToolResult, calls.ProfileResult]
TalkedOut = Annotated[CallToolResult, calls.TalkResult]


def client_name(ctx: Context) -> str:
    """The client's own name from its ``clientInfo`` (``""`` when it sent none)."""
    params = ctx.session.client_params
    info = None if params is None else params.client_info
    return "" if info is None else str(info.name)[:100]


async def _answer(
    seat_of: SeatOf, ctx: Context, call: Callable[[Seat], Awaitable[calls.Result]]
) -> CallToolResult:
    """``call``'s result for the caller's seat, or a tool error the client can act on."""
    try:
        result = await call(await seat_of(ctx))
    except NovabergError as exc:
        raise ToolError(str(exc)) from None
    except Exception as exc:
        log.error("an MCP tool failed (%s)", error_kind(exc))  # no message: it may quote text
        raise ToolError("The tool failed; Nova's log names the error.") from None
    return _sent(result)


def _sent(result: calls.Result) -> CallToolResult:
    """``result`` as structured content (what the tool's output schema, derived from the
    annotation ``Annotated[CallToolResult, Model]``, describes; the SDK checks it against the
    model) and the same object as compact JSON text for clients that read only text. Built
    here in one pass each: the SDK's own conversion dumped a returned model twice, the text
    indented, a third of a 50-item ``recall``'s time at the door."""
    text = TextContent(type="text", text=result.model_dump_json())
    return CallToolResult(content=[text], structured_content=result.model_dump(mode="json"))


@dataclass(frozen=True)
class Readable:
    """A resource: what the caller's seat reads, shown to clients as ``uri``."""

    uri: str
    name: str
    title: str
    description: str
    read: Callable[[Seat], Awaitable[calls.Result]]


RESOURCES = (
    Readable(
        "nova://profile",
        "profile",
        "Nova's picture of you",
        "The stable core and what holds for now, each statement with the ids of the "
        "memories it rests on (as the profile tool gives it).",
        calls.do_profile,
    ),
    Readable(
        "nova://timeline",
        "timeline",
        "Your coming days",
        "Your dated events from yesterday to 14 days on, in date order (as the timeline "
        "tool gives it without dates).",
        lambda seat: calls.do_timeline(seat, None, None),
    ),
)
JSON = "application/json"


class NovaServer(MCPServer):
    """The SDK's server, with :data:`RESOURCES` read as the caller: the SDK hands a fixed
    resource no context, and the user of a read is the request's (its key, or ``--user``)."""

    def __init__(self, seat_of: SeatOf, **options: Any) -> None:
        super().__init__(**options)
        self.seat_of = seat_of
        self.readable = {r.uri: r for r in RESOURCES}

    async def list_resources(self) -> list[Resource]:
        ours = [
            Resource(uri=r.uri, name=r.name, title=r.title, description=r.description,
                     mime_type=JSON)
            for r in RESOURCES
        ]  # fmt: skip
        return ours + await super().list_resources()

    async def read_resource(
        self, uri: Any, context: Context | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        readable = self.readable.get(str(uri))
        if readable is None or context is None:
            return await super().read_resource(uri, context)
        try:
            result = await readable.read(await self.seat_of(context))
        except NovabergError as exc:
            raise ResourceError(str(exc)) from None
        except Exception as exc:
            log.error("an MCP resource failed (%s)", error_kind(exc))  # no message: see _answer
            raise ResourceError("The resource failed; Nova's log names the error.") from None
        return [ReadResourceContents(content=result.model_dump_json(), mime_type=JSON)]


def build_server(seat_of: SeatOf) -> MCPServer:
    """Nova's MCP server; ``seat_of`` decides who each call is for."""
    # MCPServer() calls logging.basicConfig (a rich handler on the root logger, INFO) when the
    # root logger has none: Novaberg's own logging stays as it is, nothing logged twice
    root = logging.getLogger()
    guard = logging.NullHandler()
    root.addHandler(guard)
    try:
        server: MCPServer = NovaServer(
            seat_of, name="novaberg", title="Nova", instructions=INSTRUCTIONS, version=__version__
        )
    finally:
        root.removeHandler(guard)
    _add_memory_tools(server, seat_of)
    _add_talk(server, seat_of)
    return server


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _add_memory_tools(server: MCPServer, seat_of: SeatOf) -> None:
    @server.tool(annotations=READ_ONLY)
    async def recall(query: Query, ctx: Context, k: Count = 5) -> RecalledOut:
        """Recall what Nova remembers about the user for a question or topic: memories
        (their statements, durable facts, dated events), each with why it was recalled and
        since when it holds, and things the user or Nova said before. Use it before answering
        anything about the user's life, plans, people or preferences."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_recall(seat, query, k))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def remember(
        text: Annotated[str, Field(description="The user's statement, in their words.")],
        ctx: Context,
    ) -> RememberedOut:
        """Keep something the user asked to be remembered, as their own statement (one fact
        per call, e.g. "My sister Lena lives in Graz."). Nova turns it into facts, dated
        events and her picture of the user, as with what they tell her in a conversation."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_remember(seat, text))

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def forget(memory_id: MemoryId, ctx: Context) -> ForgottenOut:
        """Forget one memory for good, when the user asks: with the facts derived from it,
        the profile statements built on it and the words of the conversation it came from.
        Only the one memory named; there is no way to forget everything at once."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_forget(seat, memory_id))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def correct(
        memory_id: MemoryId,
        text: Annotated[
            str, Field(min_length=1, max_length=2000, description="What the memory says now.")
        ],
        ctx: Context,
    ) -> ChangedOut:
        """Correct a memory the user says is wrong ("no, Munich, not Berlin"): a new version
        with the text given replaces it; the old one is kept in its history, never recalled
        as current again. Only a current memory can be corrected."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_correct(seat, memory_id, text))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def retract(memory_id: MemoryId, ctx: Context) -> ChangedOut:
        """End a memory that no longer holds, with nothing in its place ("I don't have the
        dog any more"): kept in its history, never recalled as current again."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_retract(seat, memory_id))

    @server.tool(annotations=READ_ONLY)
    async def timeline(
        ctx: Context,
        start: Annotated[date | None, Field(description="First day (default yesterday).")] = None,
        end: Annotated[date | None, Field(description="Last day (default 14 days on).")] = None,
    ) -> TimelineOut:
        """The user's dated events (birthdays, appointments, trips) between two days,
        ISO dates like 2026-12-24, in date order."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_timeline(seat, start, end))

    @server.tool(annotations=READ_ONLY)
    async def profile(ctx: Context) -> ProfileOut:
        """Nova's current picture of the user: the stable core and what holds for now, each
        statement with the ids of the memories it rests on."""
        return await _answer(seat_of, ctx, lambda seat: calls.do_profile(seat))


def _add_talk(server: MCPServer, seat_of: SeatOf) -> None:
    @server.tool(annotations=ToolAnnotations(open_world_hint=False))
    async def talk(
        message: Annotated[str, Field(description="What to say to Nova, as the user.")],
        ctx: Context,
        conversation_id: Annotated[
            int | None, Field(description="Continue this conversation (from an earlier talk).")
        ] = None,
    ) -> TalkedOut:
        """Say something to Nova and get her reply: one full turn, as in her own chat (she
        recalls, thinks, and her judges check the answer), remembered like any conversation.
        Pass the conversation_id of an earlier talk to continue it."""
        return await _answer(
            seat_of, ctx, lambda seat: calls.do_talk(seat, message, conversation_id)
        )
