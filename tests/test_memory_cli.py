"""``novaberg memory``: what Nova remembers, as the user sees and controls it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.test_cli import run

FACT = "The user's name is Ada and she sails on the Baltic."


def remember(server: OllamaTestServer) -> None:
    server.script("salience", Reply(content=json.dumps({"score": 0.9, "summary": FACT})))
    done = run("ask", "I'm Ada and I sail on the Baltic.", "--json")
    assert done.returncode == 0, done.stderr


def test_a_remembered_fact_is_listed_searched_shown_and_used_next_time(
    ollama_env: OllamaTestServer,
) -> None:
    remember(ollama_env)
    items = json.loads(run("memory", "list", "--json").stdout)
    assert [i["text"] for i in items] == [FACT]
    found = json.loads(run("memory", "search", "Baltic", "--json").stdout)
    assert [i["id"] for i in found] == [items[0]["id"]]
    shown = json.loads(run("memory", "show", str(items[0]["id"]), "--json").stdout)
    assert shown["source"]["user_text"] == "I'm Ada and I sail on the Baltic."
    run("ask", "Do you know me?")  # a new process
    prompt = json.dumps(ollama_env.requests("/api/chat", caller="responder")[-1].body)
    assert FACT in prompt


def test_forget_makes_it_gone_for_good(ollama_env: OllamaTestServer) -> None:
    remember(ollama_env)
    memory_id = json.loads(run("memory", "list", "--json").stdout)[0]["id"]
    done = run("memory", "forget", str(memory_id), "--json")
    assert json.loads(done.stdout) == {"forgotten": memory_id}
    assert json.loads(run("memory", "list", "--json").stdout) == []
    run("ask", "Do you know me?")
    prompt = json.dumps(ollama_env.requests("/api/chat", caller="responder")[-1].body)
    assert FACT not in prompt
    again = run("memory", "forget", str(memory_id))
    assert again.returncode == 1 and "no memory" in again.stderr


def test_export_then_import_restores_everything(
    ollama_env: OllamaTestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    remember(ollama_env)
    exported = run("memory", "export").stdout
    data = json.loads(exported)
    assert data["user"] == "default" and [m["text"] for m in data["memories"]] == [FACT]
    file = tmp_path / "export.json"
    file.write_text(exported, encoding="utf-8")
    monkeypatch.setenv("NOVABERG_HOME", str(tmp_path / "new-home"))
    done = run("memory", "import", str(file), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"imported": {"memories": 1, "profile": 0, "timeline": 0}}
    assert [i["text"] for i in json.loads(run("memory", "list", "--json").stdout)] == [FACT]


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


def test_an_export_of_another_user_is_refused(ollama_env: OllamaTestServer, tmp_path: Path) -> None:
    remember(ollama_env)
    data = json.loads(run("memory", "export").stdout)
    data["user"] = "bob"
    file = tmp_path / "bob.json"
    file.write_text(json.dumps(data), encoding="utf-8")
    done = run("memory", "import", str(file))
    assert done.returncode == 2 and "belongs to user 'bob'" in done.stderr
    assert len(json.loads(run("memory", "list", "--json").stdout)) == 1


def test_users_see_only_their_own_memory(ollama_env: OllamaTestServer) -> None:
    remember(ollama_env)
    assert json.loads(run("memory", "list", "--json", "--user", "bob").stdout) == []
