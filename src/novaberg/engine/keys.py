"""Who an API key is, as the doors ask it (``/v1``, ``/api``, ``/mcp``): the key's user, looked
up by its hash in a database worker (:mod:`novaberg.storage.api_users` holds the keys)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from novaberg.storage.api_users import ApiUser, UserStore, hash_key, malformed_key
from novaberg.storage.db import Database

if TYPE_CHECKING:
    from novaberg.engine.core import Engine

__all__ = ["ApiUser", "KeyWatch", "Keys"]


@dataclass(frozen=True)
class Keys:
    """The API keys of one database."""

    db: Database

    @classmethod
    def of(cls, engine: Engine) -> Keys:
        """The keys of the engine's database."""
        return cls(engine.db)

    @staticmethod
    def malformed(key: str) -> str | None:
        """What makes ``key`` impossible as a key (a character pasted with it, one cut when
        copied), never repeating it; ``None`` when it could be one."""
        return malformed_key(key)

    async def user_of(self, key: str) -> ApiUser | None:
        """The key's user; ``None`` for a key that is unknown or revoked."""
        return await self.db.run(UserStore(self.db).authenticate, key)

    def watch(self, key: str) -> KeyWatch:
        """What a long stream holds to check, at each read, that its key is still active."""
        return KeyWatch(self.db, hash_key(key))


@dataclass(frozen=True)
class KeyWatch:
    """One key, held by its hash only."""

    db: Database
    key_hash: str

    def active(self) -> bool:
        """Whether the key is still active (in the caller's database worker thread)."""
        return UserStore(self.db).is_active(self.key_hash)
