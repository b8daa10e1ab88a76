"""``memory_search``: what the user told Nova before (the user's own memory only)."""

from __future__ import annotations

from novaberg.memory.retrieval import Heed, excerpt, query_terms, recall
from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

LIMIT = 8
MESSAGES = 3


async def memory_search(arguments: SearchArguments, env: ToolEnv) -> str:
    """The enricher's retrieval (:func:`~novaberg.memory.retrieval.recall`: words and
    meaning), up to ``LIMIT`` items and ``MESSAGES`` stored messages found by their words;
    its notices go into the turn's trace."""
    result = await recall(
        env.db,
        env.settings,
        env.user_id,
        arguments.query,
        queue=env.queue,
        trace=env.trace,
        max_items=LIMIT,
        what="memory_search",
        messages=Heed(MESSAGES),
    )
    if env.trace is not None:
        env.trace.notices.extend(result.notices)
    found = result.items
    if not found and not result.heard:
        return f"Nothing remembered about {arguments.query!r}."
    env.recalled.extend(r.item.id for r in found)
    env.recalled_messages.extend(h.message.message_id for h in result.heard)
    terms = query_terms(arguments.query)
    lines = [r.item.text for r in found]
    for h in result.heard:  # dated, and whose words they were
        who = "the user" if h.message.role == "user" else "you"
        lines.append(f"({who} said this on {h.message.at[:10]}) {excerpt(h.message.text, terms)}")
    # one item per memory: a multi-line memory's further lines stay indented under it (the
    # registry neutralises the whole output before the model sees it)
    return "\n".join("- " + line.replace("\n", "\n  ") for line in lines)
