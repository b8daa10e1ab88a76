"""What the memory routes answer (and a correction's body), as models built from the store's
own objects (:class:`~novaberg.storage.memories.MemoryItem`,
:class:`~novaberg.storage.memories.Profile`, a search's
:class:`~novaberg.memory.retrieval.Recall`, what :class:`~novaberg.engine.memories.Memories`
gives): ``GET /api/memory`` (a page, or a search), ``GET /api/memory/{id}`` (one item with its
history and source), its correction, retraction and forget, what forgetting would remove,
``GET /api/memory/profile``, ``GET /api/memory/jobs``, the export file and what an import did.
Their fields, in their order, are the JSON those routes have always sent
(``../shared/DESIGN.md``: each item with ``id`` and ``text``); as ``response_model`` they put
those fields into ``/openapi.json``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.engine.memories import Family, Page, Shown
from novaberg.memory.retrieval import Heard, Recall
from novaberg.memory.store import version_ended, version_why
from novaberg.memory.transfer import ExportFile as ExportFile  # the file is its own model
from novaberg.memory.transfer import ProfileView as ProfileView  # the export shows it too
from novaberg.storage.memories import MemoryItem, Profile
from novaberg.storage.text import MEMORY_TEXT_LIMIT

Kind = Literal["short_term", "long_term", "event"]


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _fields(item: MemoryItem) -> dict[str, object]:
    """The item's fields, in their order, as keyword arguments of a view."""
    return {
        "id": item.id,
        "kind": item.kind,
        "text": item.text,
        "importance": item.importance,
        "item_key": item.item_key,
        "source_turn_id": item.source_turn_id,
        "source_message_id": item.source_message_id,
        "derived_from": list(item.derived_from),
        "happens_on": item.happens_on,
        "valid_from": item.valid_from,
        "valid_to": item.valid_to,
        "superseded_by": item.superseded_by,
        "consolidated_into": item.consolidated_into,
        "created_at": item.created_at,
    }


class MemoryItemView(_Body):
    """A memory item, every field of it."""

    id: int
    kind: Kind
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
        return cls(**_fields(item))


class MemoryPage(_Body):
    items: list[MemoryItemView] = Field(description="Newest first, superseded ones included.")
    more: bool = Field(description="Whether there is a next page.")

    @classmethod
    def of(cls, page: Page) -> MemoryPage:
        return cls(items=[MemoryItemView.of(m) for m in page.items], more=page.more)


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
        m = heard.message
        return cls(
            kind="message", message_id=m.message_id, conversation_id=m.conversation_id,
            turn_id=m.turn_id, role=m.role, text=m.text, said_at=m.at, rank=heard.rank,
            reason=heard.reason,
        )  # fmt: skip


class MemorySearch(_Body):
    items: list[FoundItemView] = Field(description="What Nova would recall, best first.")
    messages: list[HeardView] = Field(description="Stored messages its words find.")

    @classmethod
    def of(cls, found: Recall) -> MemorySearch:
        return cls(
            items=[
                FoundItemView(**_fields(r.item), score=round(r.score, 3), reason=r.reason)
                for r in found.items
            ],
            messages=[HeardView.of(h) for h in found.heard],
        )


class VersionView(_Body):
    """One version of an item's chain (``memory show``'s ``history``)."""

    id: int
    text: str
    valid_from: str
    valid_to: str | None
    superseded_by: int | None
    ended: Literal["retracted", "superseded"] | None
    why: str = Field(description="Where it came from: a turn, a correction, a consolidation, ….")

    @classmethod
    def of(cls, item: MemoryItem) -> VersionView:
        return cls(
            id=item.id, text=item.text, valid_from=item.valid_from, valid_to=item.valid_to,
            superseded_by=item.superseded_by, ended=version_ended(item), why=version_why(item),
        )  # fmt: skip


class SourceView(_Body):
    """The turn and message an item came from."""

    turn_id: int | None
    message_id: int | None
    origin: str | None = Field(description="The turn's origin; null without a stored turn.")
    user_text: str | None = Field(description="The user's words in that turn, if kept.")


class MemoryShown(MemoryItemView):
    """``GET /api/memory/{id}`` (``memory show``): the item, its chain and its source."""

    history: list[VersionView] = Field(description="Every version of its chain, newest first.")
    source: SourceView

    @classmethod
    def of_shown(cls, shown: Shown) -> MemoryShown:
        item = shown.item
        return cls(
            **_fields(item),
            history=[VersionView.of(v) for v in shown.chain],
            source=SourceView(
                turn_id=item.source_turn_id,
                message_id=item.source_message_id,
                origin=shown.origin,
                user_text=shown.user_text,
            ),
        )


class ProfileParts(_Body):
    """``GET /api/memory/profile``: each part that was ever written (none: ``{}``)."""

    adaptive: ProfileView | None = None
    core: ProfileView | None = None

    @classmethod
    def of(cls, parts: dict[str, Profile]) -> ProfileParts:
        return cls(**{part: ProfileView.of(p) for part, p in sorted(parts.items())})


class MemoryJob(_Body):
    """One background memory job of the user's and how it ended."""

    id: int
    type: str
    status: str
    result: str = Field(description="How it ended, in words.")
    turn_id: int | None
    updated_at: str


class MemoryJobs(_Body):
    items: list[MemoryJob] = Field(description="Oldest first.")


class ImportCounts(_Body):
    memories: int = Field(description="Items imported (one imported before is not counted).")
    profile: int = Field(description="Profile versions imported.")
    truncated: int = Field(description="Texts cut to 2,000 characters.")
    invalid_utf8: int = Field(description="Texts whose invalid UTF-8 became U+FFFD.")


class Imported(_Body):
    """What ``POST /api/memory/import`` did."""

    imported: ImportCounts


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


class Correction(BaseModel):
    """The body of ``PATCH /api/memory/{id}``."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, max_length=MEMORY_TEXT_LIMIT, description="What it says now.")


class FamilyItem(_Body):
    id: int
    kind: str
    text: str


class FamilyView(_Body):
    """``GET /api/memory/{id}/family``: what forgetting the memory would remove with it."""

    id: int
    items: list[FamilyItem] = Field(description="The memory itself first, then the others.")
    source_turns: list[int] = Field(description="The turns whose words would be erased.")

    @classmethod
    def of(cls, memory_id: int, family: Family) -> FamilyView:
        return cls(
            id=memory_id,
            items=[FamilyItem(id=i.id, kind=i.kind, text=i.text) for i in family.items],
            source_turns=family.source_turns,
        )
