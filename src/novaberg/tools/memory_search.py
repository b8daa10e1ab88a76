"""``memory_search``: what the user told Nova before (the user's own memory only)."""

from __future__ import annotations

from novaberg.memory.retrieval import recall
from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

LIMIT = 8


async def memory_search(arguments: SearchArguments, env: ToolEnv) -> str:
    """The enricher's retrieval (:func:`~novaberg.memory.retrieval.recall`: words and
    meaning), up to ``LIMIT`` items; its notices go into the turn's trace."""
    result = await recall(
        env.db,
        env.settings,
        env.user_id,
        arguments.query,
        queue=env.queue,
        trace=env.trace,
        max_items=LIMIT,
        what="memory_search",
    )
    if env.trace is not None:
        env.trace.notices.extend(result.notices)
    found = result.items
    if not found:
        return f"Nothing remembered about {arguments.query!r}."
    env.recalled.extend(r.item.id for r in found)
    # one item per memory: a multi-line memory's further lines stay indented under it (the
    # registry neutralises the whole output before the model sees it)
    return "\n".join("- " + r.item.text.replace("\n", "\n  ") for r in found)
