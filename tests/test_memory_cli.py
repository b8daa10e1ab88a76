"""``novaberg memory``: what Nova remembers, as the user sees and controls it — through real
processes, on SQLite and on PostgreSQL (``NOVABERG_DATABASE_URL``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.test_cli import run

FACT = "The user's name is Ada and she sails on the Baltic."
SAID = "I'm Ada and I sail on the Baltic."


@pytest.fixture
def memory_env(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> OllamaTestServer:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    return ollama_env


def remember(server: OllamaTestServer) -> None:
    """One `novaberg ask` process: a salient turn, then its memory jobs (after the reply)."""
    server.script("salience", Reply(content=json.dumps({"score": 0.9, "summary": FACT})))
    server.script(
        "consolidate", Reply(content=json.dumps({"action": "new", "fact_id": None, "fact": FACT}))
    )
    server.script(
        "profile_adaptive",
        Reply(content=json.dumps({"statements": [{"text": "Loves sailing.", "sources": [2]}]})),
    )
    done = run("ask", SAID, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0])["salience"]["stored"] is True


def items(*args: str) -> list[dict[str, object]]:
    done = run("memory", *args, "--json")
    assert done.returncode == 0, done.stderr
    parsed: list[dict[str, object]] = json.loads(done.stdout)
    return parsed


def test_a_fact_told_in_one_process_is_kept_consolidated_and_used_in_the_next(
    memory_env: OllamaTestServer,
) -> None:
    remember(memory_env)
    listed = items("list")
    assert [(i["kind"], i["text"]) for i in listed] == [("long_term", FACT), ("short_term", FACT)]
    fact, item = listed
    assert fact["derived_from"] == [item["id"]] and item["consolidated_into"] == fact["id"]
    found = items("search", "Baltic")
    assert [i["id"] for i in found] == [fact["id"]]  # the covered item is not returned twice
    assert "'baltic'" in str(found[0]["reason"])
    shown = json.loads(run("memory", "show", str(item["id"]), "--json").stdout)
    assert shown["source"]["user_text"] == SAID and shown["source"]["message_id"] is not None
    jobs = json.loads(run("memory", "jobs", "--json").stdout)
    assert [(j["type"], j["status"]) for j in jobs] == [
        ("consolidate", "done"),
        ("profile_adaptive", "done"),
        ("timeline", "done"),
    ]
    profile = json.loads(run("memory", "profile", "--json").stdout)
    assert profile["adaptive"]["statements"] == [{"text": "Loves sailing.", "sources": [2]}]
    run("ask", "Do you know me?")  # a new process
    prompt = json.dumps(memory_env.requests("/api/chat", caller="responder")[-1].body)
    assert FACT in prompt and "Loves sailing." in prompt


def test_forget_makes_it_gone_for_good(memory_env: OllamaTestServer) -> None:
    remember(memory_env)
    item_id = items("list", "--kind", "short_term")[0]["id"]
    done = run("memory", "forget", str(item_id), "--json")
    report = json.loads(done.stdout)
    assert report["forgotten"] == item_id and len(report["ids"]) == 2  # the item and its fact
    assert report["profile_versions"] == 1 and report["turns_scrubbed"] == 1
    assert items("list") == []
    assert FACT not in run("memory", "export").stdout
    assert "Loves sailing." not in run("memory", "export").stdout
    assert json.loads(run("memory", "profile", "--json").stdout)["adaptive"]["statements"] == []
    emptied = run("memory", "profile").stdout
    assert "No profile yet" in emptied and "adaptive (version" not in emptied  # no bare heading
    run("ask", "Do you know me?")
    prompt = json.dumps(memory_env.requests("/api/chat", caller="responder")[-1].body)
    assert FACT not in prompt and "Baltic" not in prompt and "Loves sailing." not in prompt
    again = run("memory", "forget", str(item_id))
    assert again.returncode == 1 and "no memory" in again.stderr


def test_export_then_import_restores_everything(
    memory_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remember(memory_env)
    exported = run("memory", "export").stdout
    data = json.loads(exported)
    assert data["user"] == "default" and data["schema_version"] == 2
    assert [m["text"] for m in data["memories"]] == [FACT, FACT]
    file = tmp_path / "export.json"
    file.write_text(exported, encoding="utf-8")
    monkeypatch.setenv("NOVABERG_HOME", str(tmp_path / "new-home"))
    monkeypatch.delenv("NOVABERG_DATABASE_URL", raising=False)
    done = run("memory", "import", str(file), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["imported"] == {
        "memories": 2,
        "profile": 1,
        "truncated": 0,
        "invalid_utf8": 0,
    }
    restored = items("list")
    assert [(i["kind"], i["text"]) for i in restored] == [("long_term", FACT), ("short_term", FACT)]
    assert restored[1]["consolidated_into"] == restored[0]["id"]
    again = run("memory", "import", str(file), "--json")
    assert json.loads(again.stdout)["imported"]["memories"] == 0
    assert json.loads(again.stdout)["imported"]["profile"] == 0


def test_a_version_1_export_is_still_read(memory_env: OllamaTestServer, tmp_path: Path) -> None:
    old = {
        "format": "novaberg-memory-export",
        "schema_version": 1,
        "user": "default",
        "exported_at": "2026-11-01T10:00:00+00:00",
        "memories": [
            {
                "id": 1,
                "kind": "short_term",
                "text": "Ada keeps bees.",
                "score": 0.8,
                "source_turn_id": 4,
                "created_at": "2026-11-01T09:00:00+00:00",
            }
        ],
        "profile": [],
        "timeline": [
            {"happens_on": "2026-12-24", "text": "Christmas", "created_at": "2026-11-01T09:00Z"}
        ],
    }
    file = tmp_path / "v1.json"
    file.write_text(json.dumps(old), encoding="utf-8")
    done = run("memory", "import", str(file), "--json")
    assert done.returncode == 0, done.stderr
    assert sorted((i["kind"], i["text"]) for i in items("list")) == [
        ("event", "Christmas"),
        ("short_term", "Ada keeps bees."),
    ]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not JSON"),
        ('{"format": "something-else"}', "not a Novaberg memory export"),
        ('{"format": "novaberg-memory-export", "schema_version": 99}', "schema version 99"),
    ],
)
def test_a_bad_export_file_changes_nothing(
    ollama_env: OllamaTestServer, tmp_path: Path, content: str, message: str
) -> None:
    remember(ollama_env)
    before = run("memory", "export").stdout
    file = tmp_path / "bad.json"
    file.write_text(content, encoding="utf-8")
    done = run("memory", "import", str(file))
    assert done.returncode == 2 and message in done.stderr
    assert json.loads(run("memory", "export").stdout)["memories"] == json.loads(before)["memories"]


def test_an_export_of_another_user_or_with_dangling_links_is_refused(
    ollama_env: OllamaTestServer, tmp_path: Path
) -> None:
    remember(ollama_env)
    data = json.loads(run("memory", "export").stdout)
    file = tmp_path / "other.json"
    file.write_text(json.dumps({**data, "user": "bob"}), encoding="utf-8")
    done = run("memory", "import", str(file))
    assert done.returncode == 2 and "belongs to user 'bob'" in done.stderr
    data["memories"][0]["derived_from"] = [777]
    file.write_text(json.dumps(data), encoding="utf-8")
    done = run("memory", "import", str(file))
    assert done.returncode == 2 and "refers to 777" in done.stderr
    assert len(items("list")) == 2


def test_users_see_only_their_own_memory(ollama_env: OllamaTestServer) -> None:
    remember(ollama_env)
    assert items("list", "--user", "bob") == []
    # and only their own memory jobs (they were everyone's)
    assert json.loads(run("memory", "jobs", "--json").stdout)
    bobs = run("memory", "jobs", "--user", "bob", "--json")
    assert bobs.returncode == 0, bobs.stderr
    assert json.loads(bobs.stdout) == []


def v1_export(texts: list[str]) -> str:
    return json.dumps(
        {
            "format": "novaberg-memory-export",
            "schema_version": 1,
            "user": "default",
            "exported_at": "2026-11-01T10:00:00+00:00",
            "memories": [
                {
                    "id": i,
                    "kind": "short_term",
                    "text": text,
                    "score": 0.8,
                    "source_turn_id": i,
                    "created_at": "2026-11-01T09:00:00+00:00",
                }
                for i, text in enumerate(texts, start=1)
            ],
            "profile": [],
            "timeline": [],
        }
    )


def test_memory_list_pages_and_says_when_there_is_more(
    memory_env: OllamaTestServer, tmp_path: Path
) -> None:
    file = tmp_path / "five.json"
    file.write_text(v1_export([f"Item number {i}." for i in range(1, 6)]), encoding="utf-8")
    assert run("memory", "import", str(file)).returncode == 0
    first = run("memory", "list", "--limit", "2", "--json")
    assert [i["text"] for i in json.loads(first.stdout)] == ["Item number 5.", "Item number 4."]
    assert "--offset 2" in first.stderr
    last = run("memory", "list", "--limit", "2", "--offset", "4")
    assert "Item number 1." in last.stdout and "Item number 2." not in last.stdout
    assert "more" not in last.stderr  # the last page says nothing more
    middle = run("memory", "list", "--limit", "2", "--offset", "2")
    assert "Item number 3." in middle.stdout and "--offset 4" in middle.stderr


def test_import_says_what_it_did_in_sentences(ollama_env: OllamaTestServer, tmp_path: Path) -> None:
    file = tmp_path / "two.json"
    file.write_text(v1_export(["Ada keeps bees.", "Ada sails."]), encoding="utf-8")
    done = run("memory", "import", str(file))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Imported 2 memory item(s).\nNo new profile versions.\n"
    again = run("memory", "import", str(file))
    assert "No new memory items (all were there already)." in again.stdout
    assert "{" not in done.stdout + again.stdout


def test_import_cleans_long_texts_and_invalid_utf8_and_says_so(
    ollama_env: OllamaTestServer, tmp_path: Path
) -> None:
    raw = v1_export(["x" * 2500, "Ada keeps bees MARK."]).encode("utf-8")
    file = tmp_path / "dirty.json"
    file.write_bytes(raw.replace(b"MARK", b"\xff\xfe"))
    done = run("memory", "import", str(file))
    assert done.returncode == 0, done.stderr
    assert "Imported 2 memory item(s)." in done.stdout
    assert "1 text(s) were over the length limit and were truncated." in done.stdout
    assert "1 text(s) had invalid UTF-8, replaced by U+FFFD." in done.stdout
    texts = sorted(str(i["text"]) for i in items("list"))
    assert texts == ["Ada keeps bees \ufffd\ufffd.", "x" * 2000]
