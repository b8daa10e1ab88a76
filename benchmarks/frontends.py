"""Open WebUI and SillyTavern replayed against ``novaberg serve`` (issue 20's figures):
``python -m benchmarks.frontends``.

Every ``POST /v1/chat/completions`` the real Open WebUI 0.12.4 (three sessions) and SillyTavern
1.12.6 (one) sent while people used them (``../shared/data``, read at run time, never copied) is
sent again, in the recorded order, to a real ``novaberg serve`` process
(``tests/server_helpers.running_nova``) with a fresh home per session, over the scripted
Ollama-protocol test server in this process. Each front-end gets one table:

- model calls per user message (goal: ≤ 6 + 1 per task or generation-mode request), from
  Nova's ``llm_calls``: the calls of turns and of front-end tasks (caller ``frontend_task``);
  the memory jobs' calls are shown beside, not counted;
- turns and memories stored from front-end tasks and generation modes (goal: 0): the turn a
  task request was answered with (its ``X-Novaberg-Turn-Id``, or a turn holding the task's
  text) and the memories taken from those turns;
- user messages refused or lost (goal: 0): a user message (not a task) answered with an error,
  or whose turn stored neither the message nor, after a Stop, an aborted turn keeping it.
  Refusals the recording shows to be the user's own (a message refused with the same 4xx in
  the recording, e.g. an over-long one; a second message while their first still ran) are
  counted apart;
- Nova conversations per front-end chat (goal: 1, trimming included), by the conversation
  header of each answer, and conversations no chat reached;
- first content after the tribunal's last vote (goal: ≤ 50 ms): the client's time of the first
  ``content`` chunk of a streamed turn minus the time the test server finished answering that
  turn's last judge call (:attr:`novaberg.testing.RecordedRequest.answered_at`), median and
  worst.

What is a user message and what is not (the ground truth, taken from the recorded shapes, not
from Nova): Open WebUI's background tasks are the requests whose last user message begins
``### Task:`` (title, tags, follow-ups, search queries, autocomplete); SillyTavern's generation
modes have an assistant message after the last user message (Continue, Impersonate, Summarize,
the next member of a group chat) or a Summarize instruction right after it; a request with no
user message, and SillyTavern's request without its character's system messages (the API
panel's Test Message), are the front-end's too. Everything else is a user message, including
regenerates, swipes, edits and a group chat's first reply.

Which requests belong to one front-end chat: Open WebUI's ``X-OpenWebUI-Chat-Id`` where it was
forwarded. Elsewhere it is derived from the recording: a user message whose resent history holds
earlier user messages continues the chat (of the same key) that holds the most of them, the
newest among equals (so SillyTavern's trimmed head, edited or deleted messages keep the chat);
one with no earlier user message starts a new chat, unless it resends exactly the messages of
the previous user message (a regenerate or swipe of a chat's first reply). A task belongs to the
chat of its user messages, or to none.

How the requests are adapted: each key becomes one of a user added with ``novaberg users add``
(``--frontend`` for the forwarded-header sessions; the forwarded ``X-OpenWebUI-*`` headers are
sent as recorded). The redacted JWT is a fresh HS256 token with the claims Open WebUI sends
(``sub``, ``email``, ``name``, ``role``, ``iss`` = ``open-webui``, ``exp``), signed with the
secret given to Nova as ``NOVABERG_FRONTEND_JWT_SECRET``; whose it is the recording does not
say, so it is told from the tools Open WebUI attached (its admin gets more tools than a plain
user: the forwarded-headers session shows both counts next to plain ids) and a task is its
chat's user's. Requests in that session with no end-user header at all (sent with curl) use a
plain key. Every one of Nova's recorded replies in a later request (resent history, a task's
``<chat_history>``, a Continue instruction, a group chat's "Name: " reply) is replaced by the
reply Nova gave to the same request in this replay (by its text, the newest request with that
text); where the recorded Nova refused a message this replay answered, its answer is inserted
after that message in the chat's later histories, as the front-end would have shown it. A Stop
(a streamed 200 whose recording has no end of stream) is a client that closes the stream at the
recorded moment (at most 2 s) while the responder still writes (its call takes 4 s here).

Timing: a request waits for every request that had ended before it started in the recording
(plus the recorded gap, at most 0.2 s, or 1 s after a Stop), and starts at its recorded offset
(at most 1 s) after those it overlapped (Open WebUI sends a new chat's title task with its first
message). The test server answers the router in 40 ms, the responder in 150 ms, the three judges
in 60, 90 and 120 ms, salience in 50 ms and a task in 80 ms; the memory jobs get its defaults.

Writes ``bench-results/frontends.json``; options ``--data``, ``--only``, ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jwt
from tests.server_helpers import Nova, novaberg_env, running_nova

from novaberg.testing import OllamaTestServer, RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
CHAT_PATH = "/v1/chat/completions"
OWUI, ST = "Open WebUI", "SillyTavern"
FRONTEND_USER = "webui"
PLAIN_USER = "ada"
CURL_USER = "curl"

# the test server's answers and delays (seconds)
ROUTER_S, RESPONDER_S, SALIENCE_S, TASK_S = 0.04, 0.15, 0.05, 0.08
JUDGES_S = {"judge_legal": 0.06, "judge_psychology": 0.09, "judge_persona": 0.12}
STOPPED_RESPONDER_S = 4.0
STOP_AT_MOST_S = 2.0
OVERLAP_AT_MOST_S = 1.0
GAP_AT_MOST_S, GAP_AFTER_STOP_AT_MOST_S = 0.2, 1.0
ROUTE = {"intent": "chat", "tone": "friendly", "needs_check": False}
VOTE_OK = {"vote": "ok", "reason": ""}
TASK_ANSWERS = {
    "title": '{"title": "Bees and hives"}',
    "tags": '{"tags": ["Hobbies", "Beekeeping"]}',
    "follow-ups": '{"follow_ups": ["How do I start?", "What do bees eat?"]}',
    "search queries": '{"queries": ["beekeeping for beginners"]}',
    "autocomplete": '{"text": "busy in the spring."}',
}
GOAL_CALLS_PER_TURN, GOAL_CONTENT_MS = 6, 50


@dataclass(frozen=True)
class Session:
    frontend: str
    name: str
    path: str
    keys: str
    """``plain`` (one user's key), ``headers`` (a front-end key, plain end-user headers) or
    ``jwt`` (a front-end key, the signed end-user token)."""


SESSIONS = (
    Session(OWUI, "single-key", "openwebui-0.12.4/single-key.jsonl", "plain"),
    Session(OWUI, "forwarded-headers", "openwebui-0.12.4/forwarded-headers.jsonl", "headers"),
    Session(OWUI, "forwarded-jwt", "openwebui-0.12.4/forwarded-jwt.jsonl", "jwt"),
    Session(ST, "session", "sillytavern-1.12.6/session.jsonl", "plain"),
)


# -- the recording -----------------------------------------------------------------------------
@dataclass
class Recorded:
    n: int
    t: float
    duration: float
    headers: dict[str, str]
    """Lower-case names."""
    body: dict[str, Any]
    status: int
    reply: str
    """The content Nova sent (streamed deltas joined, or the message); "" for an error."""
    error: str
    stopped: bool
    """A streamed 200 with no end of stream: the client closed it (Stop)."""
    kind: str | None = None
    """The front-end's own request (a task or generation mode), or None: a user message."""
    chat: str | None = None
    user: str = ""
    """Who sends it in the replay: a Nova user of a plain key, or an end user's name."""


def parse_answer(text: str) -> tuple[str, str, bool]:
    """(content, error message, whether a stream ended) of a chat completion's response."""
    if text.lstrip().startswith("data:"):
        content, error, ended = [], "", False
        for line in text.splitlines():
            if line == "data: [DONE]":
                ended = True
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if "error" in chunk:
                error = str(chunk["error"].get("message", chunk["error"]))
            for choice in chunk.get("choices") or []:
                content.append((choice.get("delta") or {}).get("content") or "")
                ended = ended or choice.get("finish_reason") is not None
        return "".join(content), error, ended
    try:
        data = json.loads(text)
    except ValueError:
        return "", text[:200], True
    if "error" in data:
        return "", str(data["error"].get("message", data["error"])), True
    choices = data.get("choices") or [{}]
    return str((choices[0].get("message") or {}).get("content") or ""), "", True


def load(path: Path) -> tuple[list[Recorded], int]:
    """The recorded chat requests in the order they were sent, and how many others there were
    (``GET /v1/models``). Open WebUI's and SillyTavern's recordings name their fields apart."""
    records, others = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        if raw["path"] != CHAT_PATH or raw["method"] != "POST":
            others += 1
            continue
        if "req_body" in raw:  # SillyTavern's proxy
            body, headers, duration = (
                json.loads(raw["req_body"]),
                raw["req_headers"],
                raw["t_total"],
            )
        else:
            body, headers, duration = raw["body"], raw["headers"], raw["dur_s"]
        content, error, ended = parse_answer(raw["resp_body"] or "")
        stopped = bool(body.get("stream")) and raw["status"] == 200 and not ended
        records.append(
            Recorded(
                n=raw["n"],
                t=raw["t"],
                duration=duration,
                headers={k.lower(): v for k, v in headers.items()},
                body=body,
                status=raw["status"],
                reply=content,
                error=error,
                stopped=stopped,
            )
        )
    return sorted(records, key=lambda r: r.t), others


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if p.get("type") == "text")
    return str(content or "")


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [text_of(m) for m in messages if m.get("role") == "user"]


def task_kind(record: Recorded, frontend: str) -> str | None:
    """The front-end's own request this is (see the module text), or None: a user message."""
    messages = record.body.get("messages") or []
    last = next(
        (i for i in range(len(messages) - 1, -1, -1) if messages[i]["role"] == "user"), None
    )
    if last is None:
        return "no user message"
    text = text_of(messages[last]).lstrip()
    if text.startswith("### Task:"):
        head = text[:300].lower()
        for words, kind in (
            ("title", "title"),
            ("tags", "tags"),
            ("follow-up", "follow-ups"),
            ("messages this user might", "follow-ups"),
            ("search queries", "search queries"),
            ("autocompletion", "autocomplete"),
        ):
            if words in head:
                return kind
        return "task"
    after = messages[last + 1 :]
    instruction = " ".join(text_of(m) for m in after if m["role"] == "system").lower()
    if any(m["role"] == "assistant" for m in after):
        if instruction.lstrip().startswith("[continue"):
            return "Continue"
        if "point of view of" in instruction:
            return "Impersonate"
        if "summar" in instruction:
            return "Summarize"
        return "group member's reply"
    if after and after[0]["role"] == "system" and "summar" in text_of(after[0]).lower():
        return "Summarize"
    if frontend == ST and not any(m["role"] == "system" for m in messages):
        return "Test Message"
    return None


# -- who sends what, and the chats --------------------------------------------------------------
def assign_users(session: Session, records: list[Recorded], data: Path) -> dict[str, str]:
    """Each record's sender (``Recorded.user``); for the JWT session, the end users' Open WebUI
    ids, keyed by name (the other sessions' senders need none)."""
    if session.keys == "plain":
        for r in records:
            r.user = PLAIN_USER
        return {}
    if session.keys == "headers":
        for r in records:
            r.user = r.headers.get("x-openwebui-user-name", FRONTEND_USER)
        return {}
    # the JWT hides its user: the forwarded-headers session tells who gets how many tools
    by_tools: dict[int, tuple[str, str, str]] = {}
    plain, _ = load(data / "openwebui-0.12.4/forwarded-headers.jsonl")
    for r in plain:
        if r.body.get("tools") and "x-openwebui-user-name" in r.headers:
            by_tools[len(r.body["tools"])] = (
                r.headers["x-openwebui-user-name"],
                r.headers.get("x-openwebui-user-id", ""),
                r.headers.get("x-openwebui-user-role", "user"),
            )
    ids = {name: f"{uid}|{role}" for name, uid, role in by_tools.values()}
    chat_user: dict[str, str] = {}
    for r in records:
        if "x-openwebui-user-jwt" in r.headers and r.body.get("tools"):
            count = len(r.body["tools"])
            r.user = by_tools.get(count, (f"unknown ({count} tools)", "", "user"))[0]
            if "x-openwebui-chat-id" in r.headers:
                chat_user.setdefault(r.headers["x-openwebui-chat-id"], r.user)
    previous = ""
    for r in records:
        if "x-openwebui-user-jwt" not in r.headers:
            r.user = CURL_USER if not any(k.startswith("x-openwebui") for k in r.headers) else ""
        elif not r.user:
            r.user = chat_user.get(r.headers.get("x-openwebui-chat-id", ""), previous)
        previous = r.user or previous
    return ids


def assign_chats(records: list[Recorded]) -> None:
    """Each record's front-end chat (``Recorded.chat``; see the module text)."""
    chats: dict[str, set[str]] = {}
    newest: dict[str, int] = {}
    count = 0
    last_message: dict[str, tuple[list[dict[str, Any]], str]] = {}
    """Per user: the messages of their latest user message, and its chat."""
    for i, r in enumerate(records):
        if "x-openwebui-chat-id" in r.headers:
            r.chat = f"{r.user}: {r.headers['x-openwebui-chat-id'][:8]}"
            continue
        messages = r.body.get("messages") or []
        said = user_texts(messages)
        earlier = said if r.kind is not None else said[:-1]
        mine = [c for c in chats if c.startswith(f"{r.user}:")]
        shared = {c: len(chats[c] & set(earlier)) for c in mine}
        best = max(mine, key=lambda c: (shared[c], newest[c]), default=None)
        if best is not None and shared[best] > 0:
            r.chat = best
        elif r.kind is not None:
            continue  # a task outside any chat (a Test Message, a request with no user message)
        elif not earlier and r.user in last_message and last_message[r.user][0] == messages:
            r.chat = last_message[r.user][1]  # a regenerate or swipe of a chat's first reply
        else:
            count += 1
            r.chat = f"{r.user}: chat {count}"
            chats[r.chat] = set()
        chats[r.chat] |= set(said)
        newest[r.chat] = i
        if r.kind is None:
            last_message[r.user] = (messages, r.chat)


# -- the replay ---------------------------------------------------------------------------------
ANSWER = re.compile(r"(?:answer to|asked for in) request (\d+)\.")
"""How this replay's answers name their request (``Replay.answer_of``, the tasks' texts)."""


def answers_in(messages: list[dict[str, Any]]) -> set[int]:
    """The requests whose replay answers the assistant messages of ``messages`` hold."""
    found: set[int] = set()
    for m in messages:
        if m.get("role") == "assistant":
            found |= {int(n) for n in ANSWER.findall(text_of(m))}
    return found


@dataclass
class Outcome:
    status: int = 0
    reply: str = ""
    error: str = ""
    conversation: int | None = None
    turn: int | None = None
    sent: float = 0.0
    """``time.time()`` when the request went out (the test server's clock)."""
    sent_mono: float = 0.0
    first_content: float | None = None
    done: float = 0.0
    done_mono: float = 0.0
    closed_early: bool = False
    replaced: int = 0
    """How many of Nova's recorded replies the adapted request holds in this replay's words."""
    shown: set[int] = field(default_factory=set)
    """The requests whose answers (in this replay) the adapted history shows as the assistant's."""
    in_flight: list[int] = field(default_factory=list)
    """Requests of this replay still open when this one went out."""
    adapted: list[str] = field(default_factory=list)


class Replay:
    """One session sent to one ``novaberg serve``: scheduling, adaptation, scripting."""

    def __init__(
        self,
        session: Session,
        records: list[Recorded],
        server: OllamaTestServer,
        nova: Nova,
        keys: dict[str, str],
        end_users: dict[str, str],
        secret: str,
    ) -> None:
        self.session, self.records, self.server, self.nova = session, records, server, nova
        self.keys, self.end_users, self.secret = keys, end_users, secret
        self.by_n = {r.n: r for r in records}
        self.outcomes: dict[int, Outcome] = {}
        self.sent = {r.n: asyncio.Event() for r in records}
        self.finished = {r.n: asyncio.Event() for r in records}
        self.open: set[int] = set()
        self.replies: dict[str, tuple[int, str]] = {}
        """A recorded reply's text -> (the newest request that gave it, this replay's reply)."""
        self.inserted: list[tuple[str, str, str, int]] = []
        """(chat, user message, this replay's answer, request) for messages the recording
        refused and this replay answered."""
        self.seen: list[RecordedRequest] = []
        self.stop_after = {r.n: min(r.duration, STOP_AT_MOST_S) for r in records if r.stopped}

    # scheduling
    def _waits(self, r: Recorded) -> tuple[list[Recorded], list[Recorded]]:
        """(requests that ended before ``r`` started or whose reply it resends, requests it
        overlapped that started before it), in the recording."""
        before = [q for q in self.records if q.t < r.t]
        said = "\n".join(text_of(m) for m in r.body.get("messages") or [])
        after = [q for q in before if q.t + q.duration <= r.t or (q.reply and q.reply in said)]
        overlapped = [q for q in before if q not in after]
        return after, overlapped

    async def run(self) -> None:
        origin = time.monotonic()
        await asyncio.gather(*(self._one(r, origin) for r in self.records))

    async def _one(self, r: Recorded, origin: float) -> None:
        after, overlapped = self._waits(r)
        for q in after:
            await self.finished[q.n].wait()
        for q in overlapped:
            await self.sent[q.n].wait()
        at = origin
        for q in after:
            gap = r.t - (q.t + q.duration)
            cap = GAP_AFTER_STOP_AT_MOST_S if q.stopped else GAP_AT_MOST_S
            at = max(at, self.outcomes[q.n].done_mono + max(0.0, min(gap, cap)))
        for q in overlapped:
            at = max(at, self.outcomes[q.n].sent_mono + min(r.t - q.t, OVERLAP_AT_MOST_S))
        await asyncio.sleep(max(0.0, at - time.monotonic()))
        try:
            await self._send(r)
        finally:
            self.finished[r.n].set()

    # scripting
    def _script(self, r: Recorded) -> None:
        """Queue the test server's answers for ``r``; when nothing else is open, first keep what
        the server recorded and forget leftover scripts (a refused request's)."""
        if not self.open:
            self.seen += self.server.requests()
            self.server.reset()
            self.server.standing("router", Reply(content=json.dumps(ROUTE)))
            for judge in JUDGES_S:
                self.server.standing(judge, Reply(content=json.dumps(VOTE_OK)))
            self.server.standing("salience", Reply(content='{"score": 0.1, "summary": ""}'))
        if r.kind is not None:
            answer = TASK_ANSWERS.get(r.kind, f"The {r.kind} asked for in request {r.n}.")
            self.server.script("frontend_task", Reply(content=answer, delay_s=TASK_S))
            return
        said = user_texts(r.body.get("messages") or [])
        summary = f"The user said: {said[-1][:120] if said else ''}".strip()
        delay = STOPPED_RESPONDER_S if r.stopped else RESPONDER_S
        self.server.script("router", Reply(content=json.dumps(ROUTE), delay_s=ROUTER_S))
        self.server.script("responder", Reply(content=self.answer_of(r), delay_s=delay))
        for judge, seconds in JUDGES_S.items():
            self.server.script(judge, Reply(content=json.dumps(VOTE_OK), delay_s=seconds))
        salience = {"score": 0.8, "summary": summary}
        self.server.script("salience", Reply(content=json.dumps(salience), delay_s=SALIENCE_S))

    @staticmethod
    def answer_of(r: Recorded) -> str:
        return f"Nova's answer to request {r.n}."

    # adaptation
    def _adapt(self, r: Recorded, outcome: Outcome) -> tuple[dict[str, str], dict[str, Any]]:
        body = copy.deepcopy(r.body)
        messages: list[dict[str, Any]] = body.get("messages") or []
        replies = {old: new for old, (n, new) in self.replies.items() if n != r.n}
        pattern = (
            re.compile("|".join(re.escape(k) for k in sorted(replies, key=len, reverse=True)))
            if replies
            else None
        )
        changed = 0

        def swap(text: str) -> str:
            nonlocal changed
            if pattern is None:
                return text
            new, count = pattern.subn(lambda m: replies[m.group(0)], text)
            changed += count
            return new

        for m in messages:
            content = m.get("content")
            if isinstance(content, str):
                m["content"] = swap(content)
            elif isinstance(content, list):
                for part in content:
                    if part.get("type") == "text" and isinstance(part.get("text"), str):
                        part["text"] = swap(part["text"])
        outcome.replaced = changed
        for chat, said, answer, n in self.inserted:
            if chat != r.chat:
                continue
            for i, m in enumerate(messages[:-1]):
                if m["role"] == "user" and text_of(m) == said and messages[i + 1]["role"] == "user":
                    messages.insert(i + 1, {"role": "assistant", "content": answer})
                    outcome.adapted.append(f"this replay's answer to {n} inserted after it")
                    break
        outcome.shown = answers_in(messages)
        return self._headers(r), body

    def _headers(self, r: Recorded) -> dict[str, str]:
        if self.session.keys == "plain" or r.user == CURL_USER:
            key = self.keys[CURL_USER if r.user == CURL_USER else PLAIN_USER]
            return {"Authorization": f"Bearer {key}"}
        headers = {"Authorization": f"Bearer {self.keys[FRONTEND_USER]}"}
        for name, value in r.headers.items():
            if name.startswith("x-openwebui-") and name != "x-openwebui-user-jwt":
                headers[name] = value
        if "x-openwebui-user-jwt" in r.headers:
            uid, _, role = self.end_users.get(r.user, f"{r.user}|user").partition("|")
            now = int(time.time())
            claims = {
                "sub": uid or r.user.lower(),
                "email": f"{r.user.lower()}@example.com",
                "name": r.user,
                "role": role,
                "iss": "open-webui",
                "iat": now,
                "exp": now + 300,
            }
            headers["x-openwebui-user-jwt"] = jwt.encode(claims, self.secret, algorithm="HS256")
        return headers

    # sending
    async def _send(self, r: Recorded) -> None:
        outcome = Outcome()
        self.outcomes[r.n] = outcome
        self._script(r)
        headers, body = self._adapt(r, outcome)
        outcome.in_flight = sorted(self.open)
        self.open.add(r.n)
        outcome.sent, outcome.sent_mono = time.time(), time.monotonic()
        self.sent[r.n].set()
        try:
            async with httpx.AsyncClient(base_url=self.nova.url, timeout=120) as http:
                if body.get("stream"):
                    await self._stream(http, r, headers, body, outcome)
                else:
                    response = await http.post(CHAT_PATH, json=body, headers=headers)
                    self._headers_of(response, outcome)
                    outcome.reply, outcome.error, _ = parse_answer(response.text)
        finally:
            outcome.done, outcome.done_mono = time.time(), time.monotonic()
            self.open.discard(r.n)
        if r.reply and outcome.status == 200 and outcome.reply:
            self.replies[r.reply] = (r.n, outcome.reply)
        if r.status != 200 and outcome.status == 200 and outcome.reply and r.kind is None:
            said = user_texts(r.body.get("messages") or [])
            if r.chat is not None and said:
                self.inserted.append((r.chat, said[-1], outcome.reply, r.n))

    @staticmethod
    def _headers_of(response: httpx.Response, outcome: Outcome) -> None:
        outcome.status = response.status_code
        for name, attr in (
            ("x-novaberg-conversation-id", "conversation"),
            ("x-novaberg-turn-id", "turn"),
        ):
            if name in response.headers:
                setattr(outcome, attr, int(response.headers[name]))

    async def _stream(
        self,
        http: httpx.AsyncClient,
        r: Recorded,
        headers: dict[str, str],
        body: dict[str, Any],
        outcome: Outcome,
    ) -> None:
        async with http.stream("POST", CHAT_PATH, json=body, headers=headers) as response:
            self._headers_of(response, outcome)
            if response.status_code != 200:
                outcome.reply, outcome.error, _ = parse_answer((await response.aread()).decode())
                return
            pieces: list[str] = []

            async def read() -> None:
                async for line in response.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    chunk = json.loads(line[6:])
                    if "error" in chunk:
                        outcome.error = str(chunk["error"].get("message", chunk["error"]))
                    for choice in chunk.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content") or ""
                        if piece and outcome.first_content is None:
                            outcome.first_content = time.time()
                        pieces.append(piece)

            stop = self.stop_after.get(r.n)
            if stop is None:
                await read()
            else:  # Stop: the client goes away while Nova still works
                try:
                    await asyncio.wait_for(read(), stop - (time.monotonic() - outcome.sent_mono))
                except TimeoutError:
                    outcome.closed_early = True
            outcome.reply = "".join(pieces)


# -- one session against one server --------------------------------------------------------------
def add_user(server: OllamaTestServer, home: Path, name: str, *, frontend: bool = False) -> str:
    """A key from ``novaberg users add NAME [--frontend]``, as the README has people make it."""
    args = [sys.executable, "-m", "novaberg", "users", "add", name, "--json"]
    done = subprocess.run(
        args + (["--frontend"] if frontend else []),
        env=novaberg_env(server.url, home),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"novaberg users add {name} failed: {done.stderr[-2000:]}")
    return str(json.loads(done.stdout)["key"])


def settle(nova: Nova, timeout_s: float = 60.0) -> bool:
    """Wait until no turn runs and no memory job waits (True), or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        db = nova.db()
        try:
            busy = int(db.scalar("SELECT COUNT(*) FROM turns WHERE status = 'running'")) + int(
                db.scalar("SELECT COUNT(*) FROM events WHERE status IN ('pending', 'running')")
            )
        finally:
            db.close()
        if not busy:
            return True
        time.sleep(0.2)
    return False


def snapshot(nova: Nova) -> dict[str, list[dict[str, Any]]]:
    db = nova.db()
    try:
        return {
            "calls": db.query("SELECT id, turn_id, caller, task, event_id FROM llm_calls"),
            "turns": db.query(
                "SELECT id, conversation_id, origin, status, user_text, parent_turn_id, error "
                "FROM turns"
            ),
            "messages": db.query("SELECT conversation_id, turn_id, role, content FROM messages"),
            "memories": db.query(
                "SELECT id, user_id, kind, source_turn_id, derived_from, text, valid_to "
                "FROM memories"
            ),
            "conversations": db.query("SELECT id, user_id FROM conversations"),
            "events": db.query("SELECT id, turn_id, type, status FROM events"),
        }
    finally:
        db.close()


@contextmanager
def nova_for(session: Session, server: OllamaTestServer, home: Path) -> Iterator[Nova]:
    env = {}
    if session.keys == "jwt":
        env["NOVABERG_FRONTEND_JWT_SECRET"] = secrets.token_urlsafe(48)
    with running_nova(server, home, (), extra_env=env) as nova:
        nova.keys["secret"] = env.get("NOVABERG_FRONTEND_JWT_SECRET", "")
        yield nova


def replay_session(session: Session, data: Path) -> dict[str, Any]:
    started = time.monotonic()
    records, others = load(data / session.path)
    skipped = [(r.n, "no messages to send") for r in records if not r.body.get("messages")]
    records = [r for r in records if r.body.get("messages")]
    for r in records:
        r.kind = task_kind(r, session.frontend)
    end_users = assign_users(session, records, data)
    assign_chats(records)
    with OllamaTestServer() as server, tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        with nova_for(session, server, home) as nova:
            keys: dict[str, str] = {}
            if session.keys == "plain":
                keys[PLAIN_USER] = add_user(server, home, PLAIN_USER)
            else:
                keys[FRONTEND_USER] = add_user(server, home, FRONTEND_USER, frontend=True)
                if any(r.user == CURL_USER for r in records):
                    keys[CURL_USER] = add_user(server, home, CURL_USER)
            replay = Replay(session, records, server, nova, keys, end_users, nova.keys["secret"])
            asyncio.run(replay.run())
            settled = settle(nova)
            replay.seen += server.requests()
            stored = snapshot(nova)
    result = analyse(session, replay, stored)
    result |= {
        "recorded_other_requests": others,
        "skipped": skipped,
        "settled": settled,
        "wall_s": round(time.monotonic() - started, 1),
    }
    return result


# -- the figures -----------------------------------------------------------------------------------
def _short(text: str, size: int = 50) -> str:
    text = " ".join(text.split())
    return text if len(text) <= size else text[: size - 1] + "…"


def analyse(
    session: Session, replay: Replay, stored: dict[str, list[dict[str, Any]]]
) -> dict[str, Any]:
    records, outcomes = replay.records, replay.outcomes
    turns = {int(t["id"]): t for t in stored["turns"]}
    user_rows = {int(m["turn_id"]) for m in stored["messages"] if m["role"] == "user"}
    messages, tasks = [r for r in records if r.kind is None], [r for r in records if r.kind]
    findings: list[str] = []

    # model calls
    kinds: Counter[str] = Counter()
    for c in stored["calls"]:
        if c["event_id"] is not None:
            kinds["job"] += 1
        elif c["caller"] == "frontend_task":
            kinds["task"] += 1
        elif c["turn_id"] is not None:
            kinds["turn"] += 1
        else:
            kinds["other"] += 1

    # turns and memories from tasks
    task_turns = {o.turn: r.n for r in tasks if (o := outcomes[r.n]).turn is not None}
    prompts = {}  # Open WebUI's task prompts: a turn holding one is that task's
    for r in tasks:
        said = user_texts(r.body["messages"])
        if said and said[-1].lstrip().startswith("### Task:"):
            prompts[said[-1].strip()] = r.n
    answered_with = {o.turn for o in outcomes.values() if o.turn is not None}
    for t in stored["turns"]:
        if int(t["id"]) in answered_with or t["origin"] == "self_trigger":
            continue
        if t["user_text"].strip() in prompts:
            task_turns[int(t["id"])] = prompts[t["user_text"].strip()]
        else:
            findings.append(
                f"turn {t['id']} no request was answered with: {_short(t['user_text'])!r}"
            )
    from_tasks = {int(m["id"]) for m in stored["memories"] if m["source_turn_id"] in task_turns}
    for m in stored["memories"]:
        derived = set(json.loads(m["derived_from"] or "[]"))
        if derived & from_tasks:
            from_tasks.add(int(m["id"]))
    task_jobs = [e for e in stored["events"] if e["turn_id"] in task_turns]
    current = Counter(
        (str(m["user_id"]), " ".join(str(m["text"]).lower().split()))
        for m in stored["memories"]
        if m["kind"] == "short_term" and m["valid_to"] is None
    )
    for (owner, text), times in sorted(current.items()):
        if times > 1:
            findings.append(f"{owner}'s memory {_short(text)!r} is stored {times} times")
    for turn_id, n in sorted(task_turns.items(), key=lambda kv: kv[1]):
        r = replay.by_n[n]
        status = turns.get(turn_id, {}).get("status")
        findings.append(f"request {n} ({r.kind}) was stored as turn {turn_id} ({status})")
    for r in tasks:
        o = outcomes[r.n]
        if o.status != 200:
            findings.append(f"request {r.n} ({r.kind}) answered {o.status}: {_short(o.error, 90)}")

    # user messages refused or lost
    refused: list[str] = []
    own: list[str] = []
    for r in messages:
        o = outcomes[r.n]
        if o.status == 200:
            turn = turns.get(o.turn or -1)
            if turn is None:
                refused.append(f"{r.n}: answered without a stored turn")
            elif r.stopped:
                if turn["status"] == "done":
                    findings.append(
                        f"request {r.n} (Stop): its turn {o.turn} ran on and was stored"
                    )
                elif turn["status"] != "aborted" or not turn["user_text"]:
                    refused.append(
                        f"{r.n} (Stop): turn {o.turn} {turn['status']}, message not kept"
                    )
            elif turn["status"] != "done":
                refused.append(
                    f"{r.n}: turn {o.turn} {turn['status']} ({_short(turn['error'] or '', 80)})"
                )
            elif turn["origin"] == "regenerate":
                if turn["parent_turn_id"] not in user_rows:
                    refused.append(
                        f"{r.n}: a regenerate of turn {turn['parent_turn_id']}, whose message "
                        "is not stored"
                    )
            elif int(turn["id"]) not in user_rows:
                refused.append(f"{r.n}: turn {o.turn} stored no user message")
            if o.error:
                findings.append(f"request {r.n}: an error in the stream: {_short(o.error, 90)}")
            continue
        running = [
            q for q in o.in_flight if replay.by_n[q].kind is None and replay.by_n[q].user == r.user
        ]
        if o.status == r.status and r.status != 409:
            own.append(f"{r.n}: {o.status} both times ({_short(o.error, 70)})")
        elif o.status == 409 and running:
            own.append(f"{r.n}: 409 while the same user's request {running[0]} still ran")
        else:
            was = f"recorded {r.status}" if r.status != o.status else "as recorded"
            refused.append(f"{r.n}: {o.status} ({was}): {_short(o.error, 80)}")

    # conversations per chat
    chats: dict[str, set[int]] = {}
    for r in records:
        o = outcomes[r.n]
        if r.chat is not None and (r.kind is None or o.conversation is not None):
            chats.setdefault(r.chat, set())
            if o.conversation is not None:
                chats[r.chat].add(o.conversation)
    for chat, conversations in sorted(chats.items()):
        if len(conversations) > 1:
            split = [
                f"{r.n}→{outcomes[r.n].conversation}"
                for r in records
                if r.chat == chat and outcomes[r.n].conversation
            ]
            findings.append(
                f"chat {chat!r} became {len(conversations)} conversations ({', '.join(split)})"
            )
        if conversations:
            kept = Counter(
                str(m["content"])
                for m in stored["messages"]
                if m["role"] == "user" and m["conversation_id"] in conversations
            )
            for text, times in kept.items():
                if times > 1:
                    senders = [
                        r.n
                        for r in records
                        if r.chat == chat
                        and r.kind is None
                        and user_texts(r.body["messages"])[-1:] == [text]
                    ]
                    findings.append(
                        f"chat {chat!r}: the message {_short(text)!r} is stored {times} times "
                        f"(requests {senders})"
                    )
    holders: dict[int, list[str]] = {}
    for chat, conversations in sorted(chats.items()):
        for conversation in conversations:
            holders.setdefault(conversation, []).append(chat)
    merged = {c: held for c, held in holders.items() if len(held) > 1}
    for conversation, held in sorted(merged.items()):
        sent = [r.n for r in records if outcomes[r.n].conversation == conversation]
        findings.append(
            f"conversation {conversation} holds {len(held)} front-end chats ({', '.join(held)}; "
            f"requests {sent})"
        )
    reached = set().union(*chats.values()) if chats else set()
    orphans = [int(c["id"]) for c in stored["conversations"] if int(c["id"]) not in reached]
    if orphans:
        findings.append(f"conversations no front-end chat reached: {orphans}")

    # Stop
    later_prompts = [json.dumps(q.body) for q in replay.seen if q.caller == "responder"]
    stored_text = "\n".join(str(m["content"]) for m in stored["messages"])
    for r in records:
        if not r.stopped:
            continue
        o, unseen = outcomes[r.n], Replay.answer_of(r)
        if not o.closed_early:
            findings.append(f"request {r.n} (Stop): the stream ended before the client left")
        if unseen in stored_text:
            findings.append(f"request {r.n} (Stop): the reply nobody saw is stored")
        if any(unseen in p for p in later_prompts):
            findings.append(f"request {r.n} (Stop): the reply nobody saw was sent as history later")

    # the responder's history against what the front-end showed
    responder = [q for q in replay.seen if q.caller == "responder"]
    for r in messages:
        o = outcomes[r.n]
        if o.status != 200 or r.stopped:
            continue
        prompt = next((q for q in responder if o.sent <= q.at <= o.done), None)
        if prompt is None:
            continue
        sent_as_history = answers_in(prompt.body.get("messages") or []) - {r.n}
        if extra := sorted(sent_as_history - o.shown):
            findings.append(
                f"request {r.n}: the responder's history held answers the front-end did not show "
                f"(to requests {extra})"
            )
        if missing := sorted(o.shown - sent_as_history):
            findings.append(
                f"request {r.n}: answers the front-end showed were not in the responder's "
                f"history (to requests {missing})"
            )

    # first content after the tribunal's last vote
    judged = [q for q in replay.seen if q.caller.startswith("judge") and q.answered_at is not None]
    after_vote, after_send = [], []
    for r in messages:
        o = outcomes[r.n]
        if not r.body.get("stream") or o.status != 200 or r.stopped or o.first_content is None:
            continue
        after_send.append((o.first_content - o.sent) * 1000)
        votes = [
            q.answered_at
            for q in judged
            if q.answered_at is not None and o.sent <= q.at <= q.answered_at <= o.first_content
        ]
        if votes:
            after_vote.append((o.first_content - max(votes)) * 1000)
        else:
            findings.append(f"request {r.n}: no judge answered before its first content")

    adapted = [
        f"{r.n}: {'; '.join(outcomes[r.n].adapted)}" for r in records if outcomes[r.n].adapted
    ]
    replaced = [outcomes[r.n].replaced for r in records if outcomes[r.n].replaced]
    if replaced:
        adapted.insert(
            0,
            f"Nova's recorded replies replaced by this replay's: {sum(replaced)} in "
            f"{len(replaced)} requests",
        )
    headed = [r for r in records if r.chat is not None and "x-openwebui-chat-id" in r.headers]
    by_history = [
        r for r in records if r.chat is not None and "x-openwebui-chat-id" not in r.headers
    ]
    source = " and ".join(
        f"{how} for {len(rs)} requests"
        for how, rs in (("X-OpenWebUI-Chat-Id", headed), ("derived from the history", by_history))
        if rs
    )
    return {
        "frontend": session.frontend,
        "session": session.name,
        "user_messages": len(messages),
        "tasks": len(tasks),
        "task_kinds": dict(Counter(str(r.kind) for r in tasks)),
        "calls": dict(kinds),
        "task_turns": len(task_turns),
        "task_memories": len(from_tasks),
        "task_memory_jobs": len(task_jobs),
        "memories": len(stored["memories"]),
        "refused_or_lost": refused,
        "refused_as_recorded": own,
        "chats": {k: sorted(v) for k, v in chats.items()},
        "chat_source": source,
        "curl_requests": sum(r.user == CURL_USER for r in records),
        "memory_repeats": sum(t - 1 for t in current.values() if t > 1),
        "conversations": len(stored["conversations"]),
        "merged_conversations": len(merged),
        "content_after_vote_ms": [round(v, 1) for v in after_vote],
        "content_after_send_ms": [round(v, 1) for v in after_send],
        "findings": findings,
        "adapted": adapted,
        "requests": [
            {
                "n": r.n,
                "kind": r.kind or "user message",
                "chat": r.chat,
                "user": r.user,
                "recorded": r.status,
                "status": outcomes[r.n].status,
                "conversation": outcomes[r.n].conversation,
                "turn": outcomes[r.n].turn,
                "stopped": r.stopped,
            }
            for r in records
        ],
    }


def _ms(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{statistics.median(values):.0f} / {max(values):.0f} ms"


def _cells(results: list[dict[str, Any]]) -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}

    def add(name: str, value: str) -> None:
        rows.setdefault(name, []).append(value)

    for s in results:
        u, t, calls = s["user_messages"], s["tasks"], s["calls"]
        counted = calls.get("turn", 0) + calls.get("task", 0) + calls.get("other", 0)
        add("requests: user messages / tasks", f"{u} / {t}")
        add(
            "model calls per user message",
            f"{counted / max(1, u):.2f} (goal ≤ {GOAL_CALLS_PER_TURN + t / max(1, u):.2f})",
        )
        add(
            "  turn calls per user message / calls per task",
            f"{calls.get('turn', 0) / max(1, u):.2f} / {calls.get('task', 0) / max(1, t):.2f}",
        )
        add("  memory-job calls (not counted above)", str(calls.get("job", 0)))
        add("turns / memories from tasks", f"{s['task_turns']} / {s['task_memories']}")
        add("user messages refused or lost", str(len(s["refused_or_lost"])))
        add("  refused as in the recording (the user's own)", str(len(s["refused_as_recorded"])))
        chats = s["chats"]
        most = max((len(v) for v in chats.values()), default=0)
        notes = f"{s['conversations']} for {len(chats)} chats"
        if unanswered := sum(not v for v in chats.values()):
            notes += f", {unanswered} with no message answered"
        if s["merged_conversations"]:
            notes += f"; {s['merged_conversations']} holding 2+ chats"
        add("Nova conversations per front-end chat", f"≤ {most} ({notes})")
        add(
            "  memories stored / exact repeats among them",
            f"{s['memories']} / {s['memory_repeats']}",
        )
        add("first content after the last vote (median / worst)", _ms(s["content_after_vote_ms"]))
        add("  first content after sending (median / worst)", _ms(s["content_after_send_ms"]))
    return rows


GOALS = {
    "requests: user messages / tasks": "",
    "model calls per user message": "≤ 6 + 1 per task",
    "turns / memories from tasks": "0 / 0",
    "user messages refused or lost": "0",
    "Nova conversations per front-end chat": "1",
    "first content after the last vote (median / worst)": f"≤ {GOAL_CONTENT_MS} ms",
}


def render(frontend: str, results: list[dict[str, Any]]) -> str:
    names = [s["session"] for s in results]
    lines = [f"## {frontend}", "", "| figure | goal | " + " | ".join(names) + " |"]
    lines.append("|---|---|" + "---|" * len(names))
    for name, cells in _cells(results).items():
        lines.append(f"| {name} | {GOALS.get(name, 'report')} | " + " | ".join(cells) + " |")
    lines.append("")
    for s in results:
        tasks = ", ".join(f"{kind} {count}" for kind, count in s["task_kinds"].items())
        lines.append(
            f"{s['session']} ({s['wall_s']} s): {s['user_messages']} user messages, tasks: "
            f"{tasks or 'none'}; chats: {s['chat_source']}"
        )
        if s["curl_requests"]:
            lines.append(
                f"  {s['curl_requests']} of its requests were sent with curl (a plain key)"
            )
        lines.append(
            f"  not replayed: {s['recorded_other_requests']} GET /v1/models (not chat requests)"
        )
        for title, key in (
            ("refused or lost", "refused_or_lost"),
            ("refused as in the recording", "refused_as_recorded"),
            ("skipped", "skipped"),
            ("adapted", "adapted"),
            ("what the replay shows", "findings"),
        ):
            entries = s[key]
            if key == "skipped":
                entries = [f"{n}: {why}" for n, why in entries]
            if entries:
                lines.append(f"  {title}:")
                lines += [f"    - {e}" for e in entries]
        if not s["settled"]:
            lines.append("  (turns or memory jobs were still running after 60 s)")
        lines.append("")
    return "\n".join(lines)


LEGEND = f"""\
Open WebUI 0.12.4 and SillyTavern 1.12.6 as recorded (../shared/data), replayed against a real
`novaberg serve` over the scripted test server: router {ROUTER_S * 1000:.0f} ms, responder \
{RESPONDER_S * 1000:.0f} ms,
judges {", ".join(f"{v * 1000:.0f}" for v in JUDGES_S.values())} ms, \
salience {SALIENCE_S * 1000:.0f} ms, a task {TASK_S * 1000:.0f} ms; a Stop closes the stream \
while the responder writes.
A task: Open WebUI's "### Task:" prompts; SillyTavern's Continue, Impersonate, Summarize, a group
member's reply, its Test Message; a request with no user message. A front-end chat: Open WebUI's
X-OpenWebUI-Chat-Id; without it, derived from the history: a user message continues the chat
holding the most of its earlier user messages (trimmed, edited or deleted ones keep the chat), one
with none starts a chat unless it resends the previous request's messages (a first reply's swipe).
Calls per user message count turns' and tasks' calls (llm_calls), not the memory jobs'.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="the recordings (../shared/data)")
    parser.add_argument(
        "--only", default=",".join(s.name for s in SESSIONS), help="comma-separated sessions"
    )
    parser.add_argument("--out", type=Path, default=Path("bench-results/frontends.json"))
    args = parser.parse_args()
    started = time.monotonic()
    wanted = args.only.split(",")
    print(LEGEND)
    results = [replay_session(s, args.data) for s in SESSIONS if s.name in wanted]
    for frontend in (OWUI, ST):
        mine = [r for r in results if r["frontend"] == frontend]
        if mine:
            print(render(frontend, mine))
    print(f"Replayed {len(results)} sessions in {time.monotonic() - started:.0f} s.")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    os.environ.pop("NOVABERG_HOME", None)
    main()
