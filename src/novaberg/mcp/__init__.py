"""Nova as an MCP server: her memory and her turns for any MCP client (Claude Desktop, Cursor,
LM Studio, Open WebUI, agent hosts), on the official SDK (``mcp``, pinned).

One module per job: :mod:`~novaberg.mcp.calls` (what each tool does, over the engine and the
memory store: no SQL here, no turn admitted but by the engine's turn service),
:mod:`~novaberg.mcp.server` (the tools and resources as a model sees them),
:mod:`~novaberg.mcp.stdio` (``novaberg mcp``: one user, over stdin and stdout) and
:mod:`~novaberg.mcp.http` (``/mcp`` on ``novaberg serve``: stateless Streamable HTTP, the key
decides the user exactly as on ``/v1`` and ``/api``). Which user a call runs as is never a
tool argument: :class:`~novaberg.mcp.calls.Seat` carries it.

The other direction (MCP servers' tools for Nova's thinker) is :mod:`novaberg.tools.mcp_servers`.
"""
