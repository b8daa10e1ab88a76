"""The native API under ``/api`` (turns, conversations, memory) through httpx against a real
``novaberg serve`` process over the shipped Ollama-protocol test server."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import CONTRACT_KEYS
from tests.server_helpers import Nova, running_nova


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-api") / "home"
    # a chat export may be larger than any other body: its own cap, small here
    limits = {"NOVABERG_SERVER__MAX_IMPORT_BYTES": str(IMPORT_CAP)}
    with running_nova(ollama_server, home, extra_env=limits) as started:
        yield started


IMPORT_CAP = 2_000_000


def salient(summary: str) -> Reply:
    return Reply(content=json.dumps({"score": 0.9, "summary": summary}))


def api(nova: Nova, method: str, path: str, user: str | None = "ada", **kw: Any) -> httpx.Response:
    headers = nova.auth(user) if user is not None else {}
    return httpx.request(method, f"{nova.url}{path}", headers=headers, timeout=60, **kw)


def assert_detail(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"} and body["detail"], body
    assert "Traceback" not in response.text
    return str(body["detail"])


def turn(nova: Nova, message: str, user: str = "ada", **extra: Any) -> dict[str, Any]:
    response = api(nova, "POST", "/api/turns", user, json={"message": message, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_post_turn_is_the_ask_json_object_and_get_turn_gives_it_back(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Hello Ada, good to see you."))
    server.script("salience", salient("The user is called Ada."))
    posted = turn(nova, "Hello Nova, I am Ada")
    assert set(posted) == CONTRACT_KEYS
    assert posted["reply"] == "Hello Ada, good to see you."
    assert posted["salience"] == {"score": 0.9, "stored": True}
    assert posted["calls"] and posted["tribunal"] is not None
    got = api(nova, "GET", f"/api/turns/{posted['turn_id']}")
    assert got.status_code == 200, got.text
    stored = got.json()
    assert set(stored) == CONTRACT_KEYS
    for key in ("reply", "turn_id", "conversation_id", "followups", "thinker", "tribunal"):
        assert stored[key] == posted[key], key
    assert stored["salience"] == posted["salience"]
    # every call reads as it did live: its timings, the server's own time, how it asked for JSON
    assert stored["calls"] == posted["calls"]
    assert any(c["backend_ms"] > 0 for c in stored["calls"])
    assert {c["json_mode"] for c in stored["calls"]} >= {"json_schema", ""}
    # an event's status is as it is now (a memory job may have finished since)
    assert [e["id"] for e in stored["events"]] == [e["id"] for e in posted["events"]]


def test_conversations_continue_list_newest_first_and_show_their_messages(
    nova: Nova, server: OllamaTestServer
) -> None:
    first = turn(nova, "first message", user="bob")
    second = turn(nova, "second message", user="bob", conversation_id=first["conversation_id"])
    assert second["conversation_id"] == first["conversation_id"]
    newer = turn(nova, "a new conversation", user="bob")
    listed = api(nova, "GET", "/api/conversations", "bob").json()["items"]
    ids = [c["id"] for c in listed]
    assert ids[:2] == [newer["conversation_id"], first["conversation_id"]]
    assert ids == sorted(ids, reverse=True)
    assert listed[1]["turns"] == 2
    conversation = first["conversation_id"]
    messages = api(nova, "GET", f"/api/conversations/{conversation}/messages", "bob").json()
    assert [(m["role"], m["turn_id"]) for m in messages["items"]] == [
        ("user", first["turn_id"]),
        ("assistant", first["turn_id"]),
        ("user", second["turn_id"]),
        ("assistant", second["turn_id"]),
    ]
    assert messages["items"][0]["content"] == "first message"
    ada_ids = {c["id"] for c in api(nova, "GET", "/api/conversations", "ada").json()["items"]}
    assert not ada_ids & set(ids)


def test_another_users_turn_and_conversation_are_404_like_missing_ones(
    nova: Nova, server: OllamaTestServer
) -> None:
    theirs = turn(nova, "eve's secret", user="eve")
    missing = 10**9
    for target, absent in (
        (f"/api/turns/{theirs['turn_id']}", f"/api/turns/{missing}"),
        (
            f"/api/conversations/{theirs['conversation_id']}/messages",
            f"/api/conversations/{missing}/messages",
        ),
    ):
        leaked = assert_detail(api(nova, "GET", target), 404)
        none = assert_detail(api(nova, "GET", absent), 404)
        assert leaked.replace(str(theirs["turn_id"]), "N").replace(
            str(theirs["conversation_id"]), "N"
        ) == none.replace(str(missing), "N")
    body = {"message": "hi", "conversation_id": theirs["conversation_id"]}
    detail = assert_detail(api(nova, "POST", "/api/turns", json=body), 404)
    assert "eve" not in detail
    body = {"message": "hi", "conversation_id": missing}
    assert_detail(api(nova, "POST", "/api/turns", json=body), 404)


def test_bad_turn_input_is_a_4xx_detail_and_a_backend_failure_a_502(
    nova: Nova, server: OllamaTestServer
) -> None:
    assert_detail(api(nova, "POST", "/api/turns", json={"message": "  \u200b "}), 400)
    assert_detail(api(nova, "POST", "/api/turns", json={"message": "x" * 200_000}), 400)
    assert_detail(api(nova, "POST", "/api/turns", json={}), 422)
    assert_detail(api(nova, "POST", "/api/turns", json={"message": 5}), 422)
    assert_detail(api(nova, "POST", "/api/turns", content=b"{not json"), 422)
    assert_detail(api(nova, "GET", "/api/turns/not-a-number"), 422)
    assert_detail(api(nova, "GET", f"/api/turns/{2**70}"), 404)
    server.standing("responder", Reply(status=400, error="the model refused"))
    assert_detail(api(nova, "POST", "/api/turns", json={"message": "fail"}), 502)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/turns"),
        ("GET", "/api/turns/1"),
        ("GET", "/api/conversations"),
        ("GET", "/api/conversations/1/messages"),
        ("GET", "/api/memory"),
        ("GET", "/api/memory/1"),
        ("DELETE", "/api/memory/1"),
        ("PATCH", "/api/memory/1"),
        ("POST", "/api/conversations/import"),
        ("POST", "/api/memory/1/retract"),
        ("GET", "/api/memory/export"),
        ("POST", "/api/memory/import"),
        ("GET", "/api/memory/profile"),
        ("GET", "/api/memory/jobs"),
    ],
)
def test_every_api_route_needs_a_key(nova: Nova, method: str, path: str) -> None:
    assert_detail(api(nova, method, path, None, json={"message": "hi"}), 401)
    wrong = {"Authorization": "Bearer not-a-key"}
    response = httpx.request(method, f"{nova.url}{path}", headers=wrong, json={"message": "hi"})
    assert_detail(response, 401)


def test_memory_search_show_forget_and_another_users_ids(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("salience", salient("The user's cat is called Quokkamiso."))
    told = turn(nova, "My cat is called Quokkamiso.")
    found = api(nova, "GET", "/api/memory", params={"query": "Quokkamiso"}).json()["items"]
    [item] = [i for i in found if "Quokkamiso" in i["text"]]
    assert {"id", "text", "score", "reason"} <= set(item)
    listed = api(nova, "GET", "/api/memory", params={"limit": 1}).json()
    assert len(listed["items"]) == 1 and {"id", "text"} <= set(listed["items"][0])
    shown = api(nova, "GET", f"/api/memory/{item['id']}").json()
    assert shown["text"] == item["text"] and shown["source"]["turn_id"] == told["turn_id"]
    # another user: the same 404 as for a memory that does not exist, and nothing forgotten
    missing = 10**9
    for method in ("GET", "DELETE"):
        leaked = assert_detail(api(nova, method, f"/api/memory/{item['id']}", "eve"), 404)
        none = assert_detail(api(nova, method, f"/api/memory/{missing}", "eve"), 404)
        assert leaked.replace(str(item["id"]), "N") == none.replace(str(missing), "N")
    assert api(nova, "GET", "/api/memory", "eve", params={"query": "Quokkamiso"}).json() == {
        "items": [],
        "messages": [],
    }
    jobs = api(nova, "GET", "/api/memory/jobs").json()["items"]
    assert any(j["turn_id"] == told["turn_id"] for j in jobs)
    assert not any(
        j["turn_id"] == told["turn_id"]
        for j in api(nova, "GET", "/api/memory/jobs", "eve").json()["items"]
    )
    forgotten = api(nova, "DELETE", f"/api/memory/{item['id']}")
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json()["forgotten"] == item["id"] and item["id"] in forgotten.json()["ids"]
    again = api(nova, "GET", "/api/memory", params={"query": "Quokkamiso"}).json()["items"]
    assert not any("Quokkamiso" in i["text"] for i in again)
    assert_detail(api(nova, "GET", f"/api/memory/{item['id']}"), 404)
    assert_detail(api(nova, "DELETE", f"/api/memory/{item['id']}"), 404)


def test_export_import_round_trip_and_profile(nova: Nova, server: OllamaTestServer) -> None:
    server.script("salience", salient("The user plays the oboe."))
    turn(nova, "I play the oboe.", user="bob")
    exported = api(nova, "GET", "/api/memory/export", "bob")
    assert exported.status_code == 200
    data = exported.json()
    assert data["user"] == "bob"
    assert any("oboe" in m["text"] for m in data["memories"])
    [oboe] = [m for m in data["memories"] if "oboe" in m["text"] and m["kind"] == "short_term"]
    assert api(nova, "DELETE", f"/api/memory/{oboe['id']}", "bob").status_code == 200
    assert not api(nova, "GET", "/api/memory", "bob", params={"query": "oboe"}).json()["items"]
    restored = api(nova, "POST", "/api/memory/import", "bob", content=exported.content)
    assert restored.status_code == 200, restored.text
    assert restored.json()["imported"]["memories"] >= 1
    found = api(nova, "GET", "/api/memory", "bob", params={"query": "oboe"}).json()["items"]
    assert any("oboe" in i["text"] for i in found)
    refused = assert_detail(
        api(nova, "POST", "/api/memory/import", "ada", content=exported.content), 400
    )
    assert "nothing was imported" in refused
    assert not any(
        "oboe" in i["text"] for i in api(nova, "GET", "/api/memory", "ada").json()["items"]
    )
    assert_detail(api(nova, "POST", "/api/memory/import", "bob", content=b"{not json"), 400)
    profile = api(nova, "GET", "/api/memory/profile", "bob")
    assert profile.status_code == 200 and isinstance(profile.json(), dict)


def test_the_readme_api_curl_example_runs(nova: Nova, server: OllamaTestServer) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Nova over HTTP\n", 1)[1].split("\n## ", 1)[0]
    blocks: list[str] = re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL)
    example = next(b for b in blocks if "/api/turns" in b)
    server.script("responder", Reply(content="Hello from the API example."))
    server.script("salience", salient("The user loves sailing."))
    done = subprocess.run(
        ["bash", "-c", example.replace("http://127.0.0.1:8484", nova.url)],
        env={**os.environ, "NOVA_KEY": nova.keys["eve"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    decoder = json.JSONDecoder()
    posted, end = decoder.raw_decode(done.stdout)
    found, _ = decoder.raw_decode(done.stdout[end:].lstrip())
    assert posted["reply"] == "Hello from the API example." and set(posted) == CONTRACT_KEYS
    assert any("sailing" in item["text"] for item in found["items"])


def test_memory_correct_retract_and_history_over_http(nova: Nova, server: OllamaTestServer) -> None:
    server.script("salience", salient("The user's sister Quillana lives in Berlin."))
    turn(nova, "My sister Quillana lives in Berlin.")
    # the turn's item (a consolidation job may add a fact saying the same meanwhile)
    item = api(nova, "GET", "/api/memory", params={"query": "Quillana"}).json()["items"][0]
    path = f"/api/memory/{item['id']}"
    # another user: the same 404 as a memory that does not exist, and nothing changed
    assert_detail(api(nova, "PATCH", path, "eve", json={"text": "x"}), 404)
    assert_detail(api(nova, "POST", f"{path}/retract", "eve"), 404)
    assert "needs its text" in assert_detail(api(nova, "PATCH", path, json={"text": ""}), 400)
    new = api(nova, "PATCH", path, json={"text": "Quillana lives in Munich."})
    assert new.status_code == 200, new.text
    assert new.json()["text"] == "Quillana lives in Munich." and new.json()["valid_to"] is None
    found = api(nova, "GET", "/api/memory", params={"query": "Quillana"}).json()["items"]
    assert "Quillana lives in Munich." in [i["text"] for i in found]
    assert item["id"] not in [i["id"] for i in found]  # the old version is never current
    assert "no longer current" in assert_detail(api(nova, "PATCH", path, json={"text": "y"}), 409)
    shown = api(nova, "GET", f"/api/memory/{new.json()['id']}").json()
    assert [v["id"] for v in shown["history"]] == [new.json()["id"], item["id"]]
    ended = api(nova, "POST", f"/api/memory/{new.json()['id']}/retract")
    assert ended.status_code == 200 and ended.json()["valid_to"] is not None
    after = api(nova, "GET", "/api/memory", params={"query": "Quillana"}).json()["items"]
    assert new.json()["id"] not in [i["id"] for i in after]


def test_chats_imported_over_http_are_the_key_users_history(nova: Nova) -> None:
    export = {
        "conversations": [
            {"id": "zz", "messages": [
                {"role": "user", "content": "My vet is Dr. Plovdarian.",
                 "at": "2024-05-08T09:00:00Z"},
                {"role": "assistant", "content": "Noted.", "at": "2024-05-08T09:00:01Z"},
            ]}
        ]
    }  # fmt: skip
    before = len(api(nova, "GET", "/api/conversations", "bob").json()["items"])
    done = api(nova, "POST", "/api/conversations/import", "bob", json=export)
    assert done.status_code == 200, done.text
    assert done.json() == {"conversations": 1, "messages": 2, "skipped": 0}
    again = api(nova, "POST", "/api/conversations/import", "bob", json=export)
    assert again.json()["skipped"] == 1
    listed = api(nova, "GET", "/api/conversations", "bob").json()["items"]
    assert len(listed) == before + 1 and listed[0]["turns"] == 1  # newest first: it
    shown = api(nova, "GET", f"/api/conversations/{listed[0]['id']}/messages", "bob").json()
    assert [m["content"] for m in shown["items"]] == ["My vet is Dr. Plovdarian.", "Noted."]
    found = api(nova, "GET", "/api/memory", "bob", params={"query": "Plovdarian"}).json()
    assert [(m["role"], m["said_at"][:10]) for m in found["messages"]] == [("user", "2024-05-08")]
    other = api(nova, "GET", "/api/memory", "eve", params={"query": "Plovdarian"}).json()
    assert other["messages"] == []
    bad = api(nova, "POST", "/api/conversations/import", "bob", content=b"not json at all")
    assert "none of the formats" in assert_detail(bad, 400)


def _export_of(size: int, word: str) -> bytes:
    said = {"role": "user", "content": f"{word} " + "x" * 990, "at": "2024-05-08T09:00:00Z"}
    return json.dumps(
        {"conversations": [{"id": word, "messages": [said] * (size // 1000)}]}
    ).encode()


def test_a_chat_export_larger_than_other_bodies_is_taken_up_to_its_own_cap(nova: Nova) -> None:
    bigger = _export_of(1_300_000, "Quintebald")  # over server.max_body_bytes (1 MiB)
    assert len(bigger) > 1_048_576
    done = api(nova, "POST", "/api/conversations/import", "bob", content=bigger)
    assert done.status_code == 200, done.text
    assert done.json()["messages"] == 1300
    huge = _export_of(IMPORT_CAP + 10_000, "Vortemund")
    refused = api(nova, "POST", "/api/conversations/import", "bob", content=huge)
    assert "server.max_import_bytes" in assert_detail(refused, 413)
    found = api(nova, "GET", "/api/memory", "bob", params={"query": "Vortemund"}).json()
    assert found["messages"] == []  # nothing of it imported


def test_reminders_over_http_are_the_key_users_and_follow_the_contract(nova: Nova) -> None:
    made = api(
        nova, "POST", "/api/proactive", "bob", json={"text": "call Mirabel", "at": "in 2 hours"}
    )
    assert made.status_code == 200, made.text
    body = made.json()
    assert {"id", "due_at", "kind", "status", "cause", "text"} <= set(body)
    assert (body["kind"], body["status"], body["text"]) == ("reminder", "scheduled", "call Mirabel")
    listed = api(nova, "GET", "/api/proactive", "bob").json()
    assert [s["id"] for s in listed["scheduled"]] == [body["id"]]
    assert api(nova, "GET", "/api/proactive", "eve").json()["scheduled"] == []
    unreadable = api(nova, "POST", "/api/proactive", "bob", json={"text": "x", "at": "someday"})
    assert "Cannot tell a time" in assert_detail(unreadable, 400)
    assert api(nova, "DELETE", f"/api/proactive/{body['id']}", "eve").status_code == 404
    cancelled = api(nova, "DELETE", f"/api/proactive/{body['id']}", "bob")
    assert cancelled.json()["status"] == "cancelled"
    again = api(nova, "DELETE", f"/api/proactive/{body['id']}", "bob")
    assert "cancelled already" in assert_detail(again, 409)
    every = api(nova, "GET", "/api/proactive", "bob", params={"all": "true"}).json()
    assert [s["status"] for s in every["scheduled"]] == ["cancelled"]
    switched = api(nova, "PUT", "/api/proactive/switches", "bob", json={"enabled": False})
    assert switched.json() == dict.fromkeys(("reminder", "event", "checkin", "followup"), False)
    api(nova, "PUT", "/api/proactive/switches", "bob", json={"enabled": True})
