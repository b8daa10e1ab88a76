"""``memory_search``: what the user told Nova before (the user's own memory only)."""

from __future__ import annotations

from novaberg.memory.retrieval import Retriever
from novaberg.memory.store import MemoryStore
from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

LIMIT = 8


async def memory_search(arguments: SearchArguments, env: ToolEnv) -> str:
    retriever = Retriever(MemoryStore(env.db), max_items=LIMIT)
    found = await env.db.run(retriever.retrieve, env.user_id, arguments.query)  # off the loop
    if not found:
        return f"Nothing remembered about {arguments.query!r}."
    env.recalled.extend(r.item.id for r in found)
    # one item per memory: a multi-line memory's further lines stay indented under it (the
    # registry neutralises the whole output before the model sees it)
    return "\n".join("- " + r.item.text.replace("\n", "\n  ") for r in found)
