"""The pages the native API answers with, as models: a user's conversations, a conversation's
messages, and the memory list and search (``GET /api/conversations``, ``GET
/api/conversations/{id}/messages``, ``GET /api/memory``). Their fields are the JSON the routes
have always sent (``../shared/DESIGN.md``: ``{"items": [...]}``, each memory with ``id`` and
``text``); as ``response_model`` they put those fields into ``/openapi.json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.memory.retrieval import Heard, Recall, heard_view
from novaberg.memory.store import MemoryItem


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ConversationView(_Body):
    id: int
    created_at: str
    turns: int = Field(description="How many of its turns finished.")


class ConversationPage(_Body):
    items: list[ConversationView] = Field(description="Newest first.")

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> ConversationPage:
        return cls(items=[ConversationView.model_validate(r) for r in rows])


class MessageView(_Body):
    id: int
    turn_id: int
    role: Literal["user", "assistant"]
    content: str
    created_at: str
    origin: str = Field(description="The turn's origin: user, self_trigger, proactive, ….")


class MessagePage(_Body):
    items: list[MessageView] = Field(description="Oldest first; forgotten turns left out.")

    @classmethod
    def of(cls, rows: Iterable[Mapping[str, Any]]) -> MessagePage:
        return cls(items=[MessageView.model_validate(r) for r in rows])


class MemoryItemView(_Body):
    """A memory item, every field of it."""

    id: int
    kind: Literal["short_term", "long_term", "event"]
    text: str
    importance: float
    item_key: str
    source_turn_id: int | None
    source_message_id: int | None
    derived_from: list[int] = Field(description="The items a consolidation made it from.")
    happens_on: str | None = Field(description="An event's day.")
    valid_from: str
    valid_to: str | None = Field(description="Set when it was superseded or retracted.")
    superseded_by: int | None
    consolidated_into: int | None
    created_at: str

    @classmethod
    def of(cls, item: MemoryItem) -> MemoryItemView:
        return cls.model_validate(item.view())


class MemoryPage(_Body):
    items: list[MemoryItemView] = Field(description="Newest first, superseded ones included.")
    more: bool = Field(description="Whether there is a next page.")


class FoundItemView(MemoryItemView):
    score: float
    reason: str = Field(description="Why it was chosen: its words, its meaning, its date, ….")


class HeardView(_Body):
    """A stored message its words found."""

    kind: Literal["message"]
    message_id: int
    conversation_id: int
    turn_id: int
    role: Literal["user", "assistant"]
    text: str
    said_at: str
    rank: int
    reason: str

    @classmethod
    def of(cls, heard: Heard) -> HeardView:
        return cls.model_validate(heard_view(heard))


class MemorySearch(_Body):
    items: list[FoundItemView] = Field(description="What Nova would recall, best first.")
    messages: list[HeardView] = Field(description="Stored messages its words find.")

    @classmethod
    def of(cls, found: Recall) -> MemorySearch:
        return cls(
            items=[
                FoundItemView(**r.item.view(), score=round(r.score, 3), reason=r.reason)
                for r in found.items
            ],
            messages=[HeardView.of(h) for h in found.heard],
        )


class ForgottenView(_Body):
    """What ``DELETE /api/memory/{id}`` (``memory forget``) did."""

    forgotten: int = Field(description="The memory asked for.")
    ids: list[int] = Field(description="It and every item derived from it.")
    profile_versions: int
    turns_scrubbed: int
    later_turns: int
    events_scrubbed: int
    calls_scrubbed: int
    files: str = Field(description="What was done so the database files keep no copy.")


class ImportedChats(_Body):
    conversations: int
    messages: int
    skipped: int = Field(description="Chats imported before: left as they are.")
