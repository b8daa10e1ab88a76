"""The first tools: their names, descriptions and argument schemas (implementations load
lazily from their own modules)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from novaberg.tools.registry import Tool, ToolRegistry


class NoArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(min_length=1, max_length=300, description="what to search for")


class TimelineArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    days_back: int = Field(1, ge=0, le=366, description="include entries this many days back")
    days_ahead: int = Field(14, ge=0, le=366, description="and this many days ahead")


def builtin_registry(more: Sequence[Tool] = ()) -> ToolRegistry:
    """The built-in tools, then ``more`` (the configured MCP servers' tools)."""
    return ToolRegistry(
        [
            Tool(
                "web_search",
                "Search the web (SearxNG) for current facts.",
                SearchArguments,
                "novaberg.tools.web_search:web_search",
            ),
            Tool(
                "memory_search",
                "Search what the user told Nova before.",
                SearchArguments,
                "novaberg.tools.memory_search:memory_search",
            ),
            Tool(
                "timeline",
                "The user's dated entries (birthdays, appointments).",
                TimelineArguments,
                "novaberg.tools.timeline:timeline",
            ),
            Tool(
                "current_time",
                "The current date and time.",
                NoArguments,
                "novaberg.tools.clock:current_time",
            ),
            *more,
        ]
    )
