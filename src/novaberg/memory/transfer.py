"""Export and import of everything Nova knows about one user, as JSON.

The format is versioned (``schema_version``); an import checks it whole before it changes
anything, and writes in one transaction. Text is taken as the README says: invalid UTF-8
becomes U+FFFD, a text over 2,000 characters is truncated, and the import's counts say how
many texts were changed so (never a refusal of the whole file, never a codec error).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, date, datetime
from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from novaberg.config import Settings
from novaberg.errors import UsageError
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database, now
from novaberg.storage.memories import Kind, Profile, Statement
from novaberg.storage.text import MEMORY_TEXT_LIMIT, Cleaned, clean_text
from novaberg.text import field_path, quoted

log = logging.getLogger("novaberg")
FORMAT = "novaberg-memory-export"
SCHEMA_VERSION = 2
"""2: every kind in ``memories`` (events included) with validity and provenance, profile
statements with their sources. Version 1 files (timeline separate) are still read."""
MAX_DEPTH = 32
"""The deepest nesting of arrays and objects an import reads (an export has 6)."""


class MemoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    kind: Literal["short_term", "long_term", "event"]
    text: str = Field(min_length=1)  # a longer text is truncated on import, with a count
    importance: float = Field(ge=0, le=1)
    item_key: str = Field(min_length=1, max_length=300)
    source_turn_id: int | None = None
    derived_from: list[int] = Field(default_factory=list)
    happens_on: date | None = None
    valid_from: AwareDatetime
    valid_to: AwareDatetime | None = None
    superseded_by: int | None = None
    consolidated_into: int | None = None
    created_at: AwareDatetime


class LegacyMemory(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    kind: Literal["short_term"]
    text: str = Field(min_length=1)
    score: float = Field(ge=0, le=1)
    source_turn_id: int | None
    created_at: AwareDatetime


class StatementEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    sources: list[int] = Field(default_factory=list)


class ProfileVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    part: Literal["core", "adaptive"]
    version: int
    text: str
    statements: list[StatementEntry] = Field(default_factory=list)
    created_at: str


class TimelineEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    happens_on: date
    text: str = Field(min_length=1)
    created_at: AwareDatetime


class Export(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["novaberg-memory-export"]
    schema_version: int
    user: str
    exported_at: str
    memories: list[MemoryEntry]
    profile: list[ProfileVersion]
    _invalid_utf8: int = PrivateAttr(0)
    """Strings of the file whose invalid UTF-8 became U+FFFD (set by :func:`parse_export`)."""


class LegacyExport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["novaberg-memory-export"]
    schema_version: Literal[1]
    user: str
    exported_at: str
    memories: list[LegacyMemory]
    profile: list[ProfileVersion]
    timeline: list[TimelineEntry]

    def upgraded(self) -> Export:
        memories = [
            MemoryEntry(
                id=m.id,
                kind="short_term",
                text=m.text,
                importance=m.score,
                item_key=f"turn:{m.source_turn_id}:short_term",
                source_turn_id=m.source_turn_id,
                valid_from=m.created_at,
                created_at=m.created_at,
            )
            for m in self.memories
        ]
        top = max((m.id for m in self.memories), default=0)
        memories += [
            MemoryEntry(
                id=top + n,
                kind="event",
                text=t.text,
                importance=0.5,
                item_key=f"timeline:{n}",
                happens_on=t.happens_on,
                valid_from=t.created_at,
                created_at=t.created_at,
            )
            for n, t in enumerate(self.timeline, start=1)
        ]
        return Export(
            format=self.format,
            schema_version=SCHEMA_VERSION,
            user=self.user,
            exported_at=self.exported_at,
            memories=memories,
            profile=self.profile,
        )


def _stamp(moment: datetime) -> str:
    """Timestamps are stored as UTC ISO text, as :func:`novaberg.storage.db.now` writes them."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


class _Written(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ExportedMemory(_Written):
    """An item as the export file holds it: every field but the message it came from."""

    id: int
    kind: Kind
    text: str
    importance: float
    item_key: str
    source_turn_id: int | None
    derived_from: list[int]
    happens_on: str | None
    valid_from: str
    valid_to: str | None
    superseded_by: int | None
    consolidated_into: int | None
    created_at: str


class StatementView(_Written):
    text: str
    sources: list[int] = Field(description="The memories it rests on.")


class ProfileView(_Written):
    """One version of one part of the profile (core or adaptive), as the export file and
    ``GET /api/memory/profile`` show it."""

    part: str
    version: int
    text: str
    statements: list[StatementView]
    created_at: str

    @classmethod
    def of(cls, profile: Profile) -> ProfileView:
        return cls(
            part=profile.part,
            version=profile.version,
            text=profile.text,
            statements=[
                StatementView(text=s.text, sources=list(s.sources)) for s in profile.statements
            ],
            created_at=profile.created_at,
        )


class ExportFile(_Written):
    """The export file (``memory export``), as ``memory import`` and ``POST
    /api/memory/import`` take it back (read by :class:`Export`, which also reads older
    versions)."""

    format: str
    schema_version: int
    user: str
    exported_at: str
    memories: list[ExportedMemory] = Field(description="Oldest first.")
    profile: list[ProfileView] = Field(description="Every version of each part.")


def export_user(db: Database, user: str) -> ExportFile:
    store = MemoryStore(db)
    return ExportFile(
        format=FORMAT,
        schema_version=SCHEMA_VERSION,
        user=user,
        exported_at=now(),
        memories=[  # messages are not part of an export
            ExportedMemory(**{k: v for k, v in m.view().items() if k != "source_message_id"})
            for m in reversed(store.items(user))
        ],
        profile=[ProfileView.of(p) for p in store.profile_history(user)],
    )


def parse_export(raw: str | bytes, user: str) -> Export:
    """Check an export file whole; a clear :class:`UsageError` if it cannot be imported.

    ``raw`` as bytes (the file as read) may hold invalid UTF-8: such bytes are kept apart
    (``surrogateescape``) and become U+FFFD, counted, when the texts are stored.
    """
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "surrogateescape")
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"The file is not JSON ({exc}); nothing was imported.") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError:  # int() refuses more digits (sys.get_int_max_str_digits)
        raise UsageError(
            "The file cannot be read as JSON (a number has more than 4300 digits); nothing "
            "was imported."
        ) from None
    if _depth(data) > MAX_DEPTH:
        raise _too_deep()
    replaced: list[str] = []
    data = _replace_invalid(data, replaced)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError("The file is not a Novaberg memory export; nothing was imported.")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION or version < 1:
        raise UsageError(
            f"The export has schema version {_shown(version)}; this Novaberg reads 1 to "
            f"{SCHEMA_VERSION}. Update Novaberg; nothing was imported."
        )
    try:
        if version == 1:
            export = LegacyExport.model_validate(data).upgraded()
        else:
            export = Export.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = field_path(first["loc"])
        raise UsageError(
            f"The export is malformed at {where}: {first['msg']}; nothing was imported."
        ) from None
    if export.user != user:
        raise UsageError(
            f"The export belongs to user {quoted(export.user)}, not {quoted(user)}; import it "
            f"with --user {quoted(export.user)} (nothing was imported)."
        )
    export._invalid_utf8 = len(replaced)
    known = {m.id for m in export.memories}
    for m in export.memories:
        dangling = [
            i
            for i in (*m.derived_from, m.superseded_by, m.consolidated_into)
            if i is not None and i not in known
        ]
        if dangling:
            raise UsageError(
                f"The export is inconsistent: memory {m.id} refers to {dangling[0]}, which is "
                "not in the file; nothing was imported."
            )
    return export


def _shown(value: Any) -> str:
    """A value of the file as a message repeats it (:func:`novaberg.text.quoted`)."""
    return quoted(value if isinstance(value, str | int) else json.dumps(value))


def _too_deep() -> UsageError:
    return UsageError(
        f"The file is nested deeper than {MAX_DEPTH} levels of arrays and objects: it is not a "
        "Novaberg memory export; nothing was imported."
    )


def _depth(data: Any) -> int:
    """How deeply arrays and objects nest in parsed JSON, without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(data, 1)]
    while todo:
        value, level = todo.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:  # deeper is refused anyway: no need to walk on
                todo.extend((child, level + 1) for child in value)
    return deepest


def _replace_invalid(value: Any, replaced: list[str]) -> Any:
    """Every string with invalid UTF-8 (lone surrogates) gets U+FFFD instead; each such string
    is appended to ``replaced``."""
    if isinstance(value, str):
        cleaned = clean_text(value, limit=len(value))
        if cleaned.replaced:
            replaced.append(cleaned.text)
        return cleaned.text if cleaned.replaced else value
    if isinstance(value, list):
        return [_replace_invalid(v, replaced) for v in value]
    if isinstance(value, dict):
        return {
            _replace_invalid(k, replaced): _replace_invalid(v, replaced) for k, v in value.items()
        }
    return value


def import_user(db: Database, export: Export) -> dict[str, int]:
    """Restore an export in one transaction; importing the same file again adds nothing.

    Returns the counts: ``memories`` (items imported; one imported before is not counted
    again), ``profile`` (versions imported), ``truncated`` (texts over 2,000 characters, cut
    to that), ``invalid_utf8`` (texts whose invalid UTF-8 became U+FFFD).

    Ids are renumbered (links between items are kept); each item's key becomes
    ``import:<its key>`` (kept as it is when it has that form already), which also records
    where it came from; an item still in this database under its own key is not added again.
    Messages and turns are not part of an export, so imported items have no source turn in
    this database. Their vectors come after, outside this transaction (:func:`embed_imported`).
    """
    new_ids: dict[int, int] = {}
    created: set[int] = set()
    changed: list[Cleaned] = []

    def clean(text: str, what: str) -> str:
        cleaned = clean_text(text, MEMORY_TEXT_LIMIT, what)
        if cleaned.replaced or cleaned.truncated:
            changed.append(cleaned)
        return cleaned.text

    with db.transaction() as c:
        for m in export.memories:
            # back into the database it came from (a restore): the item is there under its
            # own key, or under the key an earlier import gave it; it is not added twice
            key = m.item_key if m.item_key.startswith("import:") else f"import:{m.item_key}"
            there = MemoryStore.key_id(c, export.user, m.item_key)
            if there is not None and key != m.item_key:
                new_ids[m.id] = there
                continue
            result = MemoryStore.add(
                c,
                export.user,
                m.kind,
                clean(m.text, f"memory {m.id} of the export"),
                m.importance,
                key,
                happens_on=None if m.happens_on is None else m.happens_on.isoformat(),
                valid_from=_stamp(m.valid_from),
            )
            new_ids[m.id] = result.id
            if result.created:
                created.add(m.id)
        for m in export.memories:
            if m.id not in created:
                continue  # imported before: what happened to it since (superseded…) stands
            MemoryStore.relink(
                c,
                new_ids[m.id],
                derived_from=[new_ids[i] for i in m.derived_from],
                valid_to=None if m.valid_to is None else _stamp(m.valid_to),
                superseded_by=None if m.superseded_by is None else new_ids[m.superseded_by],
                consolidated_into=(
                    None if m.consolidated_into is None else new_ids[m.consolidated_into]
                ),
                created_at=_stamp(m.created_at),
            )
        store = MemoryStore(db)
        versions = 0
        have = MemoryStore.profile_texts(c, export.user)
        for p in export.profile:
            what = f"{p.part} profile version {p.version} of the export"
            statements = [
                Statement(clean(s.text, what), [new_ids[i] for i in s.sources if i in new_ids])
                for s in p.statements
            ] or ([Statement(clean(p.text, what), [])] if p.text else [])
            text = "\n".join(s.text for s in statements)
            if (p.part, text) in have:
                continue  # imported before (or identical): not a new version
            store.set_profile(export.user, p.part, statements, c)
            have.add((p.part, text))
            versions += 1
    return {
        "memories": len(created),
        "profile": versions,
        "truncated": sum(x.truncated for x in changed),
        "invalid_utf8": export._invalid_utf8,
    }


def embed_imported(db: Database, settings: Settings, user: str, batch: int = 64) -> tuple[int, str]:
    """Blocking (a command, or a database worker): vectors of the memory embedder for the
    user's items that have none, as an import leaves them, so that they are found by meaning
    at once. Returns how many were computed, and a notice when the embedder failed (the
    items keep their words; ``novaberg memory reindex`` or the next retrieval adds them)."""
    from novaberg.errors import NovabergError
    from novaberg.memory.embedding import AUTO, choose, per_text
    from novaberg.memory.retrieval import vector_index

    choice = choose(settings)
    if choice.name is None:
        return 0, ""
    index = vector_index(db)
    store = MemoryStore(db)
    names = sorted(set(AUTO.values())) if per_text(settings) else [choice.name]
    missing = [set(index.missing(name, user, limit=10**9)) for name in names]
    # each item lacking a vector of the embedder its own text asks for (auto: its language's)
    todo = sorted(set().union(*missing))
    done = 0
    for start in range(0, len(todo), batch):
        items = store.by_ids(user, todo[start : start + batch])
        groups: dict[str, list[int]] = {}
        for i in sorted(items):
            name = choose(settings, items[i].text).name or ""
            if name in names and i in missing[names.index(name)]:
                groups.setdefault(name, []).append(i)
        try:
            for name, ids in groups.items():
                _embed_items(db, index, settings, user, name, ids, items)
        except NovabergError as exc:  # EmbedderError, or vectors of another length
            log.warning("import: item vectors not computed (%s)", type(exc).__name__)
            return done, (
                f"{len(todo) - done} item(s) got no vector for search by meaning ({exc}); "
                "novaberg memory reindex adds them later"
            )
        done += sum(len(ids) for ids in groups.values())
    return done, ""


def _embed_items(
    db: Database,
    index: Any,
    settings: Any,
    user: str,
    name: str,
    ids: list[int],
    items: dict[int, Any],
) -> None:
    """Blocking: vectors of the embedder ``name`` for these items, stored."""
    from novaberg.memory.embedding import embed_local, embed_now

    texts = [items[i].text for i in ids]
    backend = bool(settings.memory.embed_model)
    vectors = (
        embed_now(settings, texts, query=False)
        if backend
        else embed_local(name, texts, query=False, what="import")
    )
    with db.transaction() as c:
        for memory_id, vec in zip(ids, vectors.vectors, strict=True):
            index.upsert(c, memory_id, user, vectors.embedder, vec)
