"""The MCP modules only translate: no SQL, no database SQL methods, and no turn admitted or
run but through the engine's turn service (the rule ``server/`` keeps, applied to ``mcp/``)."""

from __future__ import annotations

from tests.test_architecture import MODULES, sql_and_admission

MCP = sorted(m for m in MODULES if m.startswith("novaberg.mcp"))


def test_the_mcp_modules_hold_no_sql_and_admit_no_turn_themselves() -> None:
    assert {"novaberg.mcp.calls", "novaberg.mcp.server", "novaberg.mcp.http"} <= set(MCP)
    found = {m: f for m in MCP if (f := sql_and_admission(m))}
    assert not found, "; ".join(f"{m}: {', '.join(f)}" for m, f in found.items())
