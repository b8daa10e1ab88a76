"""``web_search`` through a SearxNG instance's JSON API (``NOVABERG_SEARXNG_URL``).

Without a configured instance the tool says clearly that search is unavailable.
"""

from __future__ import annotations

import httpx

from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

RESULTS = 5


async def web_search(arguments: SearchArguments, env: ToolEnv) -> str:
    url = env.settings.searxng_url
    if not url:
        return (
            "Web search is unavailable: no SearxNG instance is configured "
            "(NOVABERG_SEARXNG_URL). Answer from what you know, and say so."
        )
    async with httpx.AsyncClient(timeout=env.settings.timeouts.connect_s * 2) as client:
        response = await client.get(
            url.rstrip("/") + "/search", params={"q": arguments.query, "format": "json"}
        )
        response.raise_for_status()
        results = response.json().get("results", [])[:RESULTS]
    if not results:
        return f"No web results for {arguments.query!r}."
    return "\n".join(
        f"- {r.get('title', '')}: {r.get('content', '')} ({r.get('url', '')})" for r in results
    )
