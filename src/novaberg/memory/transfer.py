"""Export and import of everything Nova knows about one user, as JSON.

The format is versioned (``schema_version``); an import checks it whole before it changes
anything, and writes in one transaction.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from novaberg.errors import UsageError
from novaberg.storage.db import Database, now

FORMAT = "novaberg-memory-export"
SCHEMA_VERSION = 1


class MemoryItem(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: int
    kind: str
    text: str = Field(min_length=1)
    score: float
    source_turn_id: int | None
    created_at: str


class ProfileVersion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    part: Literal["core", "adaptive"]
    version: int
    text: str
    created_at: str


class TimelineEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    happens_on: str
    text: str
    created_at: str


class Export(BaseModel):
    model_config = ConfigDict(extra="forbid")
    format: Literal["novaberg-memory-export"]
    schema_version: int
    user: str
    exported_at: str
    memories: list[MemoryItem]
    profile: list[ProfileVersion]
    timeline: list[TimelineEntry]


def _rows(db: Database, sql: str, user: str) -> list[dict[str, Any]]:
    return [dict(r) for r in db.conn.execute(sql, (user,))]


def export_user(db: Database, user: str) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "user": user,
        "exported_at": now(),
        "memories": _rows(
            db,
            "SELECT id, kind, text, score, source_turn_id, created_at "
            "FROM memories WHERE user_id = ? ORDER BY id",
            user,
        ),
        "profile": _rows(
            db,
            "SELECT part, version, text, created_at FROM profiles "
            "WHERE user_id = ? ORDER BY part, version",
            user,
        ),
        "timeline": _rows(
            db,
            "SELECT happens_on, text, created_at FROM timeline "
            "WHERE user_id = ? ORDER BY happens_on, id",
            user,
        ),
    }


def parse_export(raw: str, user: str) -> Export:
    """Check an export file whole; a clear :class:`UsageError` if it cannot be imported."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise UsageError(f"The file is not JSON ({exc}); nothing was imported.") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError("The file is not a Novaberg memory export; nothing was imported.")
    version = data.get("schema_version")
    if not isinstance(version, int) or version > SCHEMA_VERSION:
        raise UsageError(
            f"The export has schema version {version!r}; this Novaberg reads up to "
            f"{SCHEMA_VERSION}. Update Novaberg; nothing was imported."
        )
    try:
        export = Export.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(
            f"The export is malformed at {where}: {first['msg']}; nothing was imported."
        ) from None
    if export.user != user:
        raise UsageError(
            f"The export belongs to user {export.user!r}, not {user!r}; import it with "
            f"--user {export.user} (nothing was imported)."
        )
    return export


def import_user(db: Database, export: Export) -> dict[str, int]:
    """Restore an export in one transaction. Each memory is anchored to a turn of origin
    ``import`` (the original turns are not part of an export), which names where it came from.
    """
    stamp = now()
    with db.transaction() as c:
        conversation = c.execute(
            "INSERT INTO conversations (user_id, created_at) VALUES (?, ?)", (export.user, stamp)
        ).lastrowid
        for memory in export.memories:
            turn = c.execute(
                "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
                "finished_at) VALUES (?, 'import', ?, 'done', ?, ?)",
                (
                    conversation,
                    f"imported memory {memory.id} (export of {export.exported_at})",
                    stamp,
                    stamp,
                ),
            ).lastrowid
            c.execute(
                "INSERT INTO memories (user_id, kind, text, score, source_turn_id, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (export.user, memory.kind, memory.text, memory.score, turn, memory.created_at),
            )
        c.executemany(
            "INSERT OR IGNORE INTO profiles (user_id, part, version, text, created_at) "
            "VALUES (?, ?, ?, ?, ?)",
            [(export.user, p.part, p.version, p.text, p.created_at) for p in export.profile],
        )
        c.executemany(
            "INSERT INTO timeline (user_id, happens_on, text, created_at) VALUES (?, ?, ?, ?)",
            [(export.user, t.happens_on, t.text, t.created_at) for t in export.timeline],
        )
    return {
        "memories": len(export.memories),
        "profile": len(export.profile),
        "timeline": len(export.timeline),
    }
