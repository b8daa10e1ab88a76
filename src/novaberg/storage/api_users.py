"""The server's users and their API keys: only a hash of each key is stored.

A key is 32 random bytes from :mod:`secrets`. Its stored form is a plain SHA-256: a slow,
salted hash (bcrypt, argon2) protects guessable passwords, but a 256-bit random token cannot
be guessed, so one fast hash is enough and keeps the per-request check cheap. A key is found
by its hash (an index lookup) and then compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from novaberg.errors import UsageError
from novaberg.storage.db import Database, now
from novaberg.text import escape_char, invisible_at, is_blank, quoted

KEY_PREFIX = "nb-"
KEY_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
"""What a key is written with: its prefix and URL-safe base64 (:func:`new_key`)."""
KEY_LENGTH = len(KEY_PREFIX) + 43
"""``nb-`` and 32 random bytes in unpadded URL-safe base64."""
MAX_NAME_CHARS = 200


@dataclass(frozen=True)
class ApiUser:
    name: str
    frontend: bool
    created_at: str
    revoked_at: str | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def validate_name(name: str) -> str:
    """A user name as ``--user`` takes it (not blank, at most 200 characters, one line of
    characters that show: it is printed on a line of its own by ``novaberg users list``);
    ``/`` is kept for the end users a front-end key names (``NAME/ID``)."""
    if is_blank(name):
        raise UsageError(
            "The user name must not be empty (nor only spaces or invisible characters)."
        )
    hidden = invisible_at(name)
    if hidden is not None:
        raise UsageError(
            f"The user name has an invisible or control character ({escape_char(name[hidden])} "
            f"at position {hidden + 1}); a name is one line of characters that show."
        )
    if len(name) > MAX_NAME_CHARS:
        raise UsageError(
            f"The user name has {len(name)} characters; the limit is {MAX_NAME_CHARS}."
        )
    if "/" in name:
        raise UsageError(
            "The user name must not contain '/' (it separates a front-end's end users)."
        )
    return name


def malformed_key(key: str) -> str | None:
    """Why ``key`` (as a header carries it: one character per byte) cannot be a key this
    server issues, in words that never repeat it; ``None`` when it has a key's form."""
    for index, ch in enumerate(key):
        if ch not in KEY_CHARS:
            return (
                f"character {index + 1} is {_foreign(ch)}; a key has only letters, digits, "
                "- and _. Copy it again."
            )
    if not key.startswith(KEY_PREFIX):
        return f"it does not start with {KEY_PREFIX!r}, as every key of novaberg users add does."
    if len(key) != KEY_LENGTH:
        return f"it has {len(key)} characters; a key has {KEY_LENGTH} (was it cut when copied?)."
    return None


def _foreign(ch: str) -> str:
    """A character that is no part of a key, as :func:`malformed_key` names it."""
    if ord(ch) > 127:
        return "not ASCII (an invisible character such as a zero-width space pasted with it?)"
    if ch.isspace():
        return "a space"
    return repr(ch) if ch.isprintable() else escape_char(ch)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def _row_user(row: dict[str, object]) -> ApiUser:
    revoked = row["revoked_at"]
    return ApiUser(
        name=str(row["name"]),
        frontend=bool(row["frontend"]),
        created_at=str(row["created_at"]),
        revoked_at=None if revoked is None else str(revoked),
    )


class UserStore:
    """Users and key hashes in the ``api_users`` table."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, name: str, *, frontend: bool = False) -> str:
        """A new key for ``name`` (returned once, never stored); a revoked user gets a new one."""
        name = validate_name(name)
        key = new_key()
        with self.db.transaction() as c:
            found = c.execute("SELECT revoked_at FROM api_users WHERE name = ?", (name,)).one()
            if found is not None and found["revoked_at"] is None:
                raise UsageError(
                    f"The user {name!r} already has a key; revoke it first "
                    f"(novaberg users revoke {name!r}) to issue a new one."
                )
            if found is None:
                c.execute(
                    "INSERT INTO api_users (name, key_hash, frontend, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    (name, hash_key(key), int(frontend), now()),
                )
            else:
                c.execute(
                    "UPDATE api_users SET key_hash = ?, frontend = ?, created_at = ?, "
                    "revoked_at = NULL WHERE name = ?",
                    (hash_key(key), int(frontend), now(), name),
                )
        return key

    def revoke(self, name: str) -> None:
        with self.db.transaction() as c:
            changed = c.execute(
                "UPDATE api_users SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL",
                (now(), name),
            ).rowcount
        if changed != 1:
            raise UsageError(f"There is no user {quoted(name)} with an active key.")

    def list(self) -> list[ApiUser]:
        rows = self.db.query(
            "SELECT name, frontend, created_at, revoked_at FROM api_users ORDER BY name"
        )
        return [_row_user(r) for r in rows]

    def authenticate(self, key: str) -> ApiUser | None:
        """The active user whose key this is, else None."""
        digest = hash_key(key)
        row = self.db.one(
            "SELECT name, key_hash, frontend, created_at, revoked_at FROM api_users "
            "WHERE key_hash = ?",
            (digest,),
        )
        if row is None or not hmac.compare_digest(str(row["key_hash"]), digest):
            return None
        user = _row_user(row)
        return user if user.active else None

    def is_active(self, key_hash: str) -> bool:
        """Whether the key with this hash is still a user's active key (not revoked, not
        replaced by a new key)."""
        found = self.db.scalar(
            "SELECT COUNT(*) FROM api_users WHERE key_hash = ? AND revoked_at IS NULL",
            (key_hash,),
        )
        return bool(found)
