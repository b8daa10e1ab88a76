"""Importing chats from elsewhere, timed (issue 23): ``novaberg import-chats`` at 10,000 messages.

    python -m benchmarks.chat_import [--messages 10000] [--chats 100] [--database SERVER_URL]

A plain-format export (the README's) of ``--chats`` conversations with ``--messages`` messages
in all, user and assistant in turn, each a sentence of made-up words and dated a minute
apart, is written to a temporary file and imported by the real command's parts: read and
checked whole (:func:`~novaberg.engine.chat_formats.parse`), then stored in one transaction
(:func:`~novaberg.engine.chat_import.import_chats`: conversations, turns, messages and the
full-text index's triggers) into a fresh SQLite home, or a fresh database on the PostgreSQL
server ``--database`` names. Reported: parse and store seconds, messages per second, and the
second import of the same file (nothing added). Goal (issue 23): 10,000 messages in at most
60 s on each.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from novaberg.engine.chat_formats import parse
from novaberg.engine.chat_import import import_chats
from novaberg.storage.db import Database
from novaberg.testing.postgres import create_database, drop_database

WORDS = (
    "garden",
    "tomato",
    "sister",
    "travel",
    "Friday",
    "concert",
    "piano",
    "doctor",
    "recipe",
    "weekend",
    "mountain",
    "river",
    "office",
    "project",
    "deadline",
    "birthday",
    "coffee",
    "library",
    "bicycle",
    "holiday",
    "letter",
    "music",
    "painting",
)


def export(messages: int, chats: int, seed: int = 10) -> dict[str, Any]:
    rng = random.Random(seed)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    per_chat = max(1, messages // chats)
    conversations = []
    n = 0
    for chat in range(chats):
        count = per_chat if chat < chats - 1 else messages - n
        items = []
        for i in range(count):
            at = start + timedelta(minutes=n)
            role = "user" if i % 2 == 0 else "assistant"
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 24))).capitalize()
            items.append({"role": role, "content": text + ".", "at": at.isoformat()})
            n += 1
        conversations.append({"id": f"chat-{chat}", "title": f"Chat {chat}", "messages": items})
    return {"conversations": conversations}


def measure(messages: int, chats: int, database: str | Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="novaberg-import-") as tmp:
        path = Path(tmp) / "export.json"
        path.write_text(json.dumps(export(messages, chats)), encoding="utf-8")
        began = time.perf_counter()
        parsed = parse(path.read_bytes(), "plain", name=str(path))
        parsed_s = time.perf_counter() - began
        target = Path(tmp) / "novaberg.db" if database == "sqlite" else create_database(database)
        db = Database(target)
        try:
            began = time.perf_counter()
            done = import_chats(db, "bench", parsed)
            stored_s = time.perf_counter() - began
            began = time.perf_counter()
            again = import_chats(db, "bench", parse(path.read_bytes(), "plain"))
            again_s = time.perf_counter() - began
            dialect = db.dialect
        finally:
            db.close()
            if isinstance(target, str):
                drop_database(str(database), target)
    total = parsed_s + stored_s
    return {
        "database": dialect,
        "messages": done.messages,
        "conversations": done.conversations,
        "parse_s": round(parsed_s, 2),
        "store_s": round(stored_s, 2),
        "total_s": round(total, 2),
        "messages_per_s": round(done.messages / total),
        "again_s": round(again_s, 2),
        "again_added": again.messages,
        "goal_met": total <= 60.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--chats", type=int, default=100)
    parser.add_argument(
        "--database",
        default="sqlite",
        help="sqlite, or a PostgreSQL server's URL (a fresh database on it, dropped afterwards)",
    )
    args = parser.parse_args()
    figures = measure(args.messages, args.chats, args.database)
    print(json.dumps(figures, indent=2))
    if not figures["goal_met"]:
        print("GOAL MISSED")


if __name__ == "__main__":
    main()
