"""The MCP modules only translate: no SQL, no database SQL methods, and no turn admitted or
run but through the engine's turn service (the rule ``server/`` keeps, applied to ``mcp/``);
and the README's MCP examples are configurations Novaberg takes."""

from __future__ import annotations

from tests.test_architecture import MODULES, sql_and_admission

MCP = sorted(m for m in MODULES if m.startswith("novaberg.mcp"))


def test_the_mcp_modules_hold_no_sql_and_admit_no_turn_themselves() -> None:
    assert {"novaberg.mcp.calls", "novaberg.mcp.server", "novaberg.mcp.http"} <= set(MCP)
    found = {m: f for m in MCP if (f := sql_and_admission(m))}
    assert not found, "; ".join(f"{m}: {', '.join(f)}" for m, f in found.items())


def test_the_readmes_mcp_examples_are_what_novaberg_takes() -> None:
    """The ``mcp.servers`` tables are valid settings, and the client configurations to paste
    start ``novaberg mcp`` or name ``/mcp``."""
    import json
    import re
    import tomllib

    from novaberg.config import Settings
    from tests.test_readme import README

    [table] = [b for b in re.findall(r"```toml\n(.*?)```", README, re.DOTALL) if "mcp.servers" in b]
    servers = Settings(**tomllib.loads(table)).mcp.servers
    assert servers["time"].command == "uvx" and servers["notes"].url is not None
    pasted = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", README, re.DOTALL)]
    desktop = next(p["mcpServers"]["nova"] for p in pasted if "mcpServers" in p)
    assert desktop["command"].endswith("/novaberg") and desktop["args"][:1] == ["mcp"]
    host = next(p["mcp"]["servers"]["nova"] for p in pasted if "mcp" in p)
    assert host["url"].endswith("/mcp") and host["headers"]["Authorization"].startswith("Bearer ")
