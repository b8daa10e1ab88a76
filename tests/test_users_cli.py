"""``novaberg users``: keys shown once, only their hashes stored, revoked at once — through
real processes, and the store on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json

import pytest

from novaberg.errors import UsageError
from novaberg.storage.api_users import UserStore, hash_key
from novaberg.storage.db import Database
from tests.test_cli import run


def test_users_add_prints_a_key_once_and_stores_only_its_hash() -> None:
    done = run("users", "add", "ada", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert set(shown) == {"user", "key"} and shown["user"] == "ada"
    key = shown["key"]
    assert len(key) >= 40

    listed = run("users", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert key not in listed.stdout
    [row] = json.loads(listed.stdout)
    assert row["user"] == "ada" and row["frontend"] is False and row["revoked_at"] is None

    plain = run("users", "add", "bob", "--frontend")
    assert plain.returncode == 0, plain.stderr
    bob_key = plain.stdout.strip()
    assert bob_key.startswith("nb-") and "shown once" in plain.stderr

    from novaberg.config import load_settings

    db = Database(load_settings().settings.database)
    try:
        stored = db.query("SELECT name, key_hash, frontend FROM api_users ORDER BY name")
        dump = json.dumps(db.query("SELECT * FROM api_users"))
    finally:
        db.close()
    assert key not in dump and bob_key not in dump
    assert [(r["name"], r["key_hash"], r["frontend"]) for r in stored] == [
        ("ada", hashlib.sha256(key.encode()).hexdigest(), 0),
        ("bob", hashlib.sha256(bob_key.encode()).hexdigest(), 1),
    ]


def test_users_revoke_and_bad_names_are_usage_errors() -> None:
    assert run("users", "add", "ada").returncode == 0
    again = run("users", "add", "ada")
    assert again.returncode == 2 and "already has a key" in again.stderr
    for bad in ("", "   ", "\u200b", "a/b", "x" * 201):
        refused = run("users", "add", bad)
        assert refused.returncode == 2, bad
        assert "usage error" in refused.stderr
    done = run("users", "revoke", "ada")
    assert done.returncode == 0, done.stderr
    listed = json.loads(run("users", "list", "--json").stdout)
    assert listed[0]["revoked_at"] is not None
    twice = run("users", "revoke", "ada")
    assert twice.returncode == 2 and "no user" in twice.stderr
    assert run("users", "revoke", "nobody").returncode == 2


def test_store_authenticates_only_active_keys(db: Database) -> None:
    store = UserStore(db)
    key = store.add("ada")
    other = store.add("bob", frontend=True)
    found = store.authenticate(key)
    assert found is not None and found.name == "ada" and not found.frontend
    bob = store.authenticate(other)
    assert bob is not None and bob.name == "bob" and bob.frontend
    assert store.authenticate(key + "x") is None
    assert store.authenticate("") is None
    assert db.scalar("SELECT key_hash FROM api_users WHERE name = 'ada'") == hash_key(key)
    store.revoke("ada")
    assert store.authenticate(key) is None  # refused at once
    fresh = store.add("ada")  # a revoked user may get a new key; the old stays refused
    assert fresh != key
    assert store.authenticate(key) is None
    again = store.authenticate(fresh)
    assert again is not None and again.name == "ada"
    with pytest.raises(UsageError):
        store.revoke("nobody")
