"""Bring your history (issue 23, part 4): ``novaberg import-chats`` reads Open WebUI's chat
export, SillyTavern's .jsonl, ChatGPT's conversations.json and the plain format (fixtures in
each tool's documented shape, written here), keeps the messages' dates, makes them Nova's
conversation history found by their words, imports nothing twice, and refuses a bad file
whole. Through the real command and database."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine.chat_formats import parse
from novaberg.errors import UsageError
from novaberg.memory.retrieval import Heed, recall
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.memories import MemoryItem
from novaberg.testing import Match, OllamaTestServer, Reply
from tests.test_cli import NOVABERG, run

OPENWEBUI = [
    {
        "id": "7f1c",
        "user_id": "u1",
        "title": "Vet question",
        "created_at": 1715155200,
        "chat": {
            "id": "7f1c",
            "title": "Vet question",
            "history": {
                "currentId": "a2",
                "messages": {
                    "u1": {"id": "u1", "parentId": None, "childrenIds": ["a1", "a2"],
                           "role": "user", "content": "Our vet Dr. Zarnowicz moved his practice.",
                           "timestamp": 1715155200},
                    "a1": {"id": "a1", "parentId": "u1", "childrenIds": [], "role": "assistant",
                           "content": "A discarded swipe about Quorblat.", "timestamp": 1715155201},
                    "a2": {"id": "a2", "parentId": "u1", "childrenIds": [], "role": "assistant",
                           "content": "Where to?", "timestamp": 1715155202},
                },
            },
            "messages": [],
        },
    }
]  # fmt: skip
SILLYTAVERN = "\n".join(
    json.dumps(line)
    for line in [
        {"user_name": "Ada", "character_name": "Seraphina", "create_date": "2024-05-09T10:00:00Z"},
        {"name": "Seraphina", "is_user": False, "is_system": False,
         "send_date": "2024-05-09T10:00:01Z", "mes": "Welcome to the glade."},
        {"name": "Ada", "is_user": True, "is_system": False,
         "send_date": "2024-05-09T10:00:05Z", "mes": "I brought my hawk, Vistrelle."},
        {"name": "System", "is_user": False, "is_system": True, "send_date": "", "mes": "note"},
    ]
)  # fmt: skip
CHATGPT = [
    {
        "id": "c-1",
        "conversation_id": "c-1",
        "title": "Garden",
        "create_time": 1715241600.5,
        "current_node": "n3",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["n0"]},
            "n0": {"id": "n0", "parent": "root", "children": ["n1"], "message": {
                "author": {"role": "system"}, "content": {"parts": [""]}, "create_time": None}},
            "n1": {"id": "n1", "parent": "n0", "children": ["n2", "n3"], "message": {
                "author": {"role": "user"}, "content": {"parts": ["My tomatoes are Brandywyne."]},
                "create_time": 1715241601}},
            "n2": {"id": "n2", "parent": "n1", "children": [], "message": {
                "author": {"role": "assistant"}, "content": {"parts": ["An old branch: Flimbo."]},
                "create_time": 1715241602}},
            "n3": {"id": "n3", "parent": "n1", "children": [], "message": {
                "author": {"role": "assistant"}, "content": {"parts": ["Lovely heirlooms."]},
                "create_time": 1715241603}},
        },
    }
]  # fmt: skip
PLAIN = {
    "conversations": [
        {
            "id": "trip",
            "messages": [
                {"role": "user", "content": "We fly to Kyrgrad on Friday.",
                 "at": "2024-05-10T08:00:00Z"},
                {"role": "assistant", "content": "Safe travels!", "at": "2024-05-10T08:00:02Z"},
            ],
        }
    ]
}  # fmt: skip


def _heard(query: str) -> list[tuple[str, str, str]]:
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        found = asyncio.run(
            recall(db, Settings(memory={"embedder": "off"}), settings.user, query, messages=Heed(5))
        )
    finally:
        db.close()
    return [(h.message.role, h.message.text, h.message.at[:10]) for h in found.heard]


@pytest.mark.parametrize(
    ("name", "content", "query", "found"),
    [
        ("owui.json", json.dumps(OPENWEBUI), "Zarnowicz",
         [("user", "Our vet Dr. Zarnowicz moved his practice.", "2024-05-08")]),
        ("chat.jsonl", SILLYTAVERN, "Vistrelle",
         [("user", "I brought my hawk, Vistrelle.", "2024-05-09")]),
        ("conversations.json", json.dumps(CHATGPT), "Brandywyne",
         [("user", "My tomatoes are Brandywyne.", "2024-05-09")]),
        ("plain.json", json.dumps(PLAIN), "Kyrgrad",
         [("user", "We fly to Kyrgrad on Friday.", "2024-05-10")]),
    ],
)  # fmt: skip
def test_each_format_becomes_dated_history_found_by_its_words_and_imports_once(
    tmp_path: Path, name: str, content: str, query: str, found: list[tuple[str, str, str]]
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    done = run("import-chats", str(path), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["conversations"] == 1
    assert _heard(query) == found
    again = run("import-chats", str(path), "--json")
    assert json.loads(again.stdout) == {"conversations": 0, "messages": 0, "skipped": 1}
    assert _heard(query) == found  # nothing twice


def test_only_the_branch_shown_last_is_imported() -> None:
    owui = parse(json.dumps(OPENWEBUI).encode())
    assert owui.format == "openwebui"
    assert [m.text for m in owui.chats[0].messages] == [
        "Our vet Dr. Zarnowicz moved his practice.",
        "Where to?",
    ]
    gpt = parse(json.dumps(CHATGPT).encode())
    assert gpt.format == "chatgpt"
    assert [(m.role, m.text) for m in gpt.chats[0].messages] == [
        ("user", "My tomatoes are Brandywyne."),
        ("assistant", "Lovely heirlooms."),
    ]  # the system message and the old branch left out
    tavern = parse(SILLYTAVERN.encode())
    assert tavern.format == "sillytavern"
    assert [m.role for m in tavern.chats[0].messages] == ["assistant", "user"]  # no system line


def test_a_bad_file_is_refused_whole_and_nothing_is_imported(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not UTF-8"):
        parse(b'{"conversations": [\xff]}')
    with pytest.raises(UsageError, match="none of the formats"):
        parse(b'{"hello": 1}')
    broken = {"conversations": [PLAIN["conversations"][0], {"messages": [{"role": "user"}]}]}
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken), encoding="utf-8")
    done = run("import-chats", str(path), "--format", "plain")
    assert done.returncode != 0 and "not a plain export" in " ".join(done.stderr.split())
    assert _heard("Kyrgrad") == []  # the first, good conversation was not imported either
    wrong = run("import-chats", str(path), "--format", "chatgpt")
    assert wrong.returncode != 0 and "not a chatgpt export" in " ".join(wrong.stderr.split())


def test_nul_bytes_are_removed_with_a_notice() -> None:
    raw = json.dumps(
        {"conversations": [{"messages": [{"role": "user", "content": "Hi\u0000 there"}]}]}
    )
    parsed = parse(raw.encode())
    assert parsed.chats[0].messages[0].text == "Hi there"
    assert any("NUL bytes" in n for n in parsed.notices)


# -- --remember: salience and the memory jobs over the imported user messages -------------
REMEMBERED = {
    "conversations": [
        {
            "id": "family",
            "messages": [
                {"role": "user", "content": "Hello there.", "at": "2024-03-01T09:00:00Z"},
                {"role": "assistant", "content": "Your brother Quillon says hi.",
                 "at": "2024-03-01T09:00:02Z"},
                {"role": "user", "content": "My sister Wenna lives in Tromsø.",
                 "at": "2024-03-02T09:00:00Z"},
                {"role": "assistant", "content": "Quillon must miss her.",
                 "at": "2024-03-02T09:00:02Z"},
                {"role": "user", "content": "Nice weather today.", "at": "2024-03-03T09:00:00Z"},
            ],
        }
    ]
}  # fmt: skip
SALIENT = Reply(content='{"score": 0.9, "summary": "The user\'s sister Wenna lives in Tromsø."}')
SMALL_TALK = Reply(content='{"score": 0.1, "summary": ""}')


def _script_salience(server: OllamaTestServer) -> None:
    server.standing("salience", SMALL_TALK)
    # twice: an interrupted run's request may have taken the first
    server.script("salience", SALIENT, SALIENT, match=Match(contains="Wenna"))


def _memories() -> list[MemoryItem]:
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        return MemoryStore(db).items(settings.user, kind="short_term")
    finally:
        db.close()


def _weigh_events() -> list[str]:
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        return [r["status"] for r in db.query("SELECT status FROM events WHERE type = 'weigh'")]
    finally:
        db.close()


def test_remember_weighs_each_imported_user_message_once_never_the_other_assistant(
    ollama_env: OllamaTestServer, tmp_path: Path
) -> None:
    _script_salience(ollama_env)
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(REMEMBERED), encoding="utf-8")
    assert run("import-chats", str(path)).returncode == 0  # imported first without --remember
    assert ollama_env.requests("/api/chat") == []
    done = run("import-chats", str(path), "--remember", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["skipped"] == 1
    assert out["remember"]["estimate"]["messages"] == 3
    assert out["remember"]["estimate"]["calls"][0] == 3
    assert "Remembering 3 imported message(s)" in " ".join(done.stderr.split())
    assert (out["remember"]["weighed"], out["remember"]["remembered"]) == (3, 1)
    assert out["remember"]["jobs"] >= 3  # consolidate, timeline, profile_adaptive at least
    weighed = ollama_env.requests("/api/chat", caller="salience")
    assert len(weighed) == 3
    prompts = [json.dumps(r.body["messages"], ensure_ascii=False) for r in weighed]
    assert not any("Quillon" in p for p in prompts)  # the other system's assistant: never
    [item] = _memories()
    assert item.text == "The user's sister Wenna lives in Tromsø."
    assert item.valid_from.startswith("2024-03-02")  # dated by the message, not by the import
    again = run("import-chats", str(path), "--remember", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["remember"]["weighed"] == 0
    assert len(ollama_env.requests("/api/chat", caller="salience")) == 3  # nothing twice
    assert len(_memories()) == 1


def test_an_interrupted_remember_goes_on_where_it_stopped(
    ollama_env: OllamaTestServer, tmp_path: Path
) -> None:
    _script_salience(ollama_env)
    ollama_env.set_delay(0.5)
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(REMEMBERED), encoding="utf-8")
    first = subprocess.Popen(
        [*NOVABERG, "import-chats", str(path), "--remember"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(ollama_env.requests("/api/chat", caller="salience")) < 2:  # one answered
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.05)
    first.send_signal(signal.SIGINT)
    _, err = first.communicate(timeout=60)
    assert first.returncode == 130, err
    assert "run the same command again to go on" in " ".join(err.split())
    statuses = _weigh_events()
    assert len(statuses) == 3 and 1 <= statuses.count("done") < 3
    ollama_env.set_delay(0.0)
    second = run("import-chats", str(path), "--remember", "--json")
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert out["skipped"] == 1 and out["remember"]["weighed"] == 3 - statuses.count("done")
    assert _weigh_events() == ["done", "done", "done"]
    assert [m.text for m in _memories()] == ["The user's sister Wenna lives in Tromsø."]


def test_remember_is_refused_on_the_embedded_model_before_anything_is_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "embedded")
    path = tmp_path / "plain.json"
    path.write_text(json.dumps(PLAIN), encoding="utf-8")
    done = run("import-chats", str(path), "--remember")
    assert done.returncode != 0
    assert "embedded model" in " ".join(done.stderr.split())
    assert _heard("Kyrgrad") == []
