"""Load: 20 conversations of 5 turns each, all at once, against one ``novaberg serve`` process
over the test server answering every call after 200 ms — on SQLite and on PostgreSQL.

Every turn must finish (no error), and every reply must belong to its own conversation: the
test server's responder echoes the user's message, and each message carries its
conversation's and turn's tag, so a reply built from another conversation's state shows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import openai
import pytest

from novaberg.testing import OllamaTestServer
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, running_nova

CONVERSATIONS = 20
TURNS = 5
DELAY_S = 0.2
CONCURRENCY = 8
"""Model calls the server runs at once (``concurrency.ollama``): enough to keep the test
near 20 seconds here; the benchmark measures throughput at the default of 3."""


@pytest.fixture(scope="module")
def slow_backend() -> Iterator[OllamaTestServer]:
    with OllamaTestServer(delay_s=DELAY_S) as server:
        yield server


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nova(
    request: pytest.FixtureRequest,
    slow_backend: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Nova]:
    database = None
    server_url = None
    if request.param == "postgres":
        server_url = request.getfixturevalue("postgres_server")
        database = create_database(server_url)
    try:
        with running_nova(
            slow_backend,
            tmp_path_factory.mktemp(f"load-{request.param}") / "home",
            users=("ada", "bob"),
            extra_env={"NOVABERG_CONCURRENCY__OLLAMA": str(CONCURRENCY)},
            database=database,
        ) as started:
            yield started
    finally:
        if server_url is not None and database is not None:
            drop_database(server_url, database)


async def _conversation(client: openai.AsyncOpenAI, index: int) -> list[tuple[str, str, str]]:
    """Five turns in one conversation; (tag, conversation id, reply) per turn."""
    conversation: str | None = None
    seen = []
    for turn in range(TURNS):
        tag = f"conv{index:02d}turn{turn}"
        headers = {} if conversation is None else {"X-Novaberg-Conversation-Id": conversation}
        raw = await client.chat.completions.with_raw_response.create(
            model="nova",
            messages=[{"role": "user", "content": f"Remember the tag {tag}, please."}],
            extra_headers=headers,
        )
        completion = raw.parse()
        given = raw.headers["X-Novaberg-Conversation-Id"]
        if conversation is None:
            conversation = given
        seen.append((tag, given, completion.choices[0].message.content or ""))
    return seen


async def _load(nova: Nova) -> list[list[tuple[str, str, str]]]:
    clients = [
        openai.AsyncOpenAI(
            base_url=f"{nova.url}/v1", api_key=nova.keys[user], max_retries=0, timeout=300
        )
        for user in ("ada", "bob")
    ]
    try:
        return await asyncio.gather(
            *(_conversation(clients[i % 2], i) for i in range(CONVERSATIONS))
        )
    finally:
        for client in clients:
            await client.close()


def test_twenty_conversations_of_five_turns_all_finish_without_cross_talk(
    nova: Nova, slow_backend: OllamaTestServer
) -> None:
    results = asyncio.run(_load(nova))

    assert len(results) == CONVERSATIONS
    conversations = set()
    for index, turns in enumerate(results):
        assert len(turns) == TURNS
        ids = {conversation for _, conversation, _ in turns}
        assert len(ids) == 1, f"conversation {index} moved between {ids}"
        conversations |= ids
        for tag, _, reply in turns:
            assert tag in reply, f"{tag!r} missing from its reply {reply!r}"
            others = [t for t, _, _ in turns if t != tag] + [
                f"conv{j:02d}" for j in range(CONVERSATIONS) if j != index
            ]
            assert not any(other in reply for other in others), reply
    assert len(conversations) == CONVERSATIONS

    db = nova.db()
    try:
        statuses = db.query("SELECT status, COUNT(*) AS n FROM turns GROUP BY status")
        users = db.query(
            "SELECT c.user_id, COUNT(*) AS n FROM messages m "
            "JOIN conversations c ON c.id = m.conversation_id WHERE m.role = 'user' "
            "GROUP BY c.user_id ORDER BY c.user_id"
        )
    finally:
        db.close()
    done = {r["status"]: int(r["n"]) for r in statuses}
    assert done.get("done", 0) >= CONVERSATIONS * TURNS, done
    assert set(done) <= {"done"}, f"turns not done: {done}"
    # each key's user holds exactly its own conversations' messages
    assert [(r["user_id"], int(r["n"])) for r in users] == [
        ("ada", CONVERSATIONS // 2 * TURNS),
        ("bob", CONVERSATIONS // 2 * TURNS),
    ]
    assert "Traceback" not in nova.logs()
