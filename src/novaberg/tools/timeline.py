"""``timeline``: the user's dated entries around today."""

from __future__ import annotations

from datetime import date, timedelta

from novaberg.memory.store import MemoryStore
from novaberg.tools.builtin import TimelineArguments
from novaberg.tools.registry import ToolEnv


async def timeline(arguments: TimelineArguments, env: ToolEnv) -> str:
    today = date.today()
    entries = await env.db.run(  # in the database's worker threads, off the loop
        MemoryStore(env.db).events_between,
        env.user_id,
        (today - timedelta(days=arguments.days_back)).isoformat(),
        (today + timedelta(days=arguments.days_ahead)).isoformat(),
    )
    if not entries:
        return "No timeline entries in that range."
    return "\n".join(f"{e.happens_on}: {e.text}" for e in entries)
