"""``memory_search``: what the user told Nova before (the user's own memory only)."""

from __future__ import annotations

from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

LIMIT = 8


def memory_search(arguments: SearchArguments, env: ToolEnv) -> str:
    found = env.db.search_memories(env.user_id, arguments.query, LIMIT)
    if not found:
        return f"Nothing remembered about {arguments.query!r}."
    return "\n".join(f"- {m.text}" for m in found)
