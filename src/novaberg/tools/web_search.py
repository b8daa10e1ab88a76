"""``web_search`` through a SearxNG instance's JSON API (``NOVABERG_SEARXNG_URL``).

Without a configured instance the tool says clearly that search is unavailable. A failure
names the instance by its setting and says what went wrong, never its address nor the query:
httpx's own messages carry the whole URL (userinfo and query string included), tool failures
are logged, and what the tool says goes to the model, which may repeat it to the user.
"""

from __future__ import annotations

import httpx

from novaberg.errors import NovabergError
from novaberg.tools.builtin import SearchArguments
from novaberg.tools.registry import ToolEnv

RESULTS = 5


class WebSearchFailed(NovabergError):
    """The SearxNG instance did not give results; the message names it, never the query."""


async def web_search(arguments: SearchArguments, env: ToolEnv) -> str:
    url = env.settings.searxng_url
    if not url:
        return (
            "Web search is unavailable: no SearxNG instance is configured "
            "(NOVABERG_SEARXNG_URL). Answer from what you know, and say so."
        )
    where = "SearxNG (NOVABERG_SEARXNG_URL)"
    try:
        async with httpx.AsyncClient(timeout=env.settings.timeouts.connect_s * 2) as client:
            response = await client.get(
                url.rstrip("/") + "/search", params={"q": arguments.query, "format": "json"}
            )
            if response.is_error:
                raise WebSearchFailed(f"{where} answered HTTP {response.status_code}")
            results = response.json().get("results", [])[:RESULTS]
    except httpx.HTTPError as exc:
        raise WebSearchFailed(f"{where} could not be reached ({type(exc).__name__})") from None
    except ValueError:
        raise WebSearchFailed(f"{where} answered something that is not JSON") from None
    if not results:
        return f"No web results for {arguments.query!r}."
    return "\n".join(
        f"- {r.get('title', '')}: {r.get('content', '')} ({r.get('url', '')})" for r in results
    )
