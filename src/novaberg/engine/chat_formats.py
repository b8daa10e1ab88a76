"""Reading other systems' chat exports (``novaberg import-chats``): parsed and checked whole,
before anything is written (:mod:`novaberg.engine.chat_import` writes them).

Formats, each as its tool writes it:

- ``openwebui``: Open WebUI's "Export chats" file, a JSON list of chats, each with ``title``,
  ``created_at`` (seconds) and ``chat.history.messages`` (by id, each with ``parentId``,
  ``role``, ``content``, ``timestamp``) and ``chat.history.currentId``: the branch shown last
  is read, from ``currentId`` back to its root; a chat with only ``chat.messages`` is read in
  order.
- ``sillytavern``: a chat's ``.jsonl``: a first line of metadata (``user_name``,
  ``character_name``), then one message a line (``name``, ``is_user``, ``is_system``,
  ``send_date``, ``mes``); system lines are left out, the swipe shown (``mes``) is kept.
- ``chatgpt``: ChatGPT's ``conversations.json``: a list of conversations, each a ``mapping``
  of nodes (``message.author.role``, ``message.content.parts``, ``message.create_time``,
  ``parent``) and a ``current_node``: the branch shown last, from it back to its root; system,
  tool and empty messages are left out.
- ``plain``: Novaberg's own, for anything else: ``{"conversations": [{"id"?, "title"?,
  "messages": [{"role": "user"|"assistant", "content", "at": ISO 8601}]}]}``.

``auto`` tells them apart by their shape. Another system's assistant is stored as Nova's side
of the conversation (role ``assistant``), never as something the user said.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from novaberg.errors import UsageError
from novaberg.storage.text import clean_text

Format = Literal["auto", "openwebui", "sillytavern", "chatgpt", "plain"]
FORMATS: tuple[str, ...] = ("auto", "openwebui", "sillytavern", "chatgpt", "plain")
MESSAGE_CHARS = 100_000
"""Longest message kept; a longer one is cut, with a notice."""


@dataclass(frozen=True)
class ChatMessage:
    role: Literal["user", "assistant"]
    text: str
    at: str
    """When it was said, ISO 8601 in UTC (the chat's own time where a message has none)."""


@dataclass(frozen=True)
class Chat:
    key: str
    """What makes the chat the same chat on a second import: its source's id, or its words."""
    title: str
    messages: list[ChatMessage]


@dataclass(frozen=True)
class Parsed:
    format: str
    chats: list[Chat]
    notices: list[str]

    @property
    def messages(self) -> int:
        return sum(len(chat.messages) for chat in self.chats)


def parse(raw: bytes, fmt: str = "auto", *, name: str = "the file") -> Parsed:
    """The chats of an export; :class:`UsageError` naming what is wrong when it is not one."""
    if fmt not in FORMATS:
        raise UsageError(f"Unknown format {fmt!r}: use one of {', '.join(FORMATS)}.")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{name} is not UTF-8 text (byte {exc.start}): export it again as UTF-8."
        ) from None
    data: Any = None
    try:
        data = json.loads(text)
    except ValueError:
        if fmt not in ("auto", "sillytavern"):
            raise UsageError(f"{name} is not JSON, so not a {fmt} export.") from None
    found = _detect(data, text) if fmt == "auto" else fmt
    notices: list[str] = []
    reader = _READERS[found]
    try:
        chats = reader(data if found != "sillytavern" else text, notices)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise UsageError(
            f"{name} is not a {found} export ({type(exc).__name__}: {exc}); nothing was imported."
        ) from None
    return Parsed(found, [c for c in chats if c.messages], notices)


def _detect(data: Any, text: str) -> str:
    if isinstance(data, dict) and isinstance(data.get("conversations"), list):
        return "plain"
    if isinstance(data, list) and data and all(isinstance(c, dict) for c in data):
        if all("mapping" in c for c in data):
            return "chatgpt"
        if all(isinstance(c.get("chat"), dict) for c in data):
            return "openwebui"
    if data is None and text.strip():
        first = text.strip().splitlines()[0]
        try:
            head = json.loads(first)
        except ValueError:
            head = None
        if isinstance(head, dict):
            return "sillytavern"
    raise UsageError(
        "The file is none of the formats import-chats reads (Open WebUI's chat export, "
        "SillyTavern's .jsonl, ChatGPT's conversations.json, the plain format): name one with "
        "--format to see what does not fit."
    )


def _message(role: str, text: Any, at: str, notices: list[str]) -> ChatMessage | None:
    if role not in ("user", "assistant") or not isinstance(text, str) or not text.strip():
        return None
    cleaned = clean_text(text, MESSAGE_CHARS, what="an imported message")
    notices.extend(cleaned.notices)
    return ChatMessage("user" if role == "user" else "assistant", cleaned.text, at)


def _stamp(value: Any, fallback: str) -> str:
    """Seconds or milliseconds since 1970, or an ISO 8601 text, as ISO 8601 in UTC."""
    if isinstance(value, bool) or value is None or value == "":
        return fallback
    if isinstance(value, int | float):
        seconds = value / 1000 if value > 1e11 else value
        return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
    text = str(value).strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        import dateparser

        found = dateparser.parse(
            text, settings={"TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True}
        )
        if found is None:
            return fallback
        when = found
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="milliseconds")


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _branch(nodes: dict[str, Any], current: Any, parent_of: Callable[[Any], Any]) -> list[Any]:
    """The nodes from ``current`` back to its root, root first (a cycle ends the walk)."""
    path: list[Any] = []
    seen: set[str] = set()
    while current is not None and str(current) in nodes and str(current) not in seen:
        seen.add(str(current))
        node = nodes[str(current)]
        path.append(node)
        current = parent_of(node)
    return list(reversed(path))


def _plain(data: Any, notices: list[str]) -> list[Chat]:
    chats = []
    for n, conv in enumerate(data["conversations"]):
        messages = [
            m
            for raw in conv["messages"]
            if (m := _message(raw["role"], raw["content"], _stamp(raw.get("at"), _now()), notices))
        ]
        key = str(conv.get("id") or _key([(m.role, m.text, m.at) for m in messages]))
        chats.append(Chat(key, str(conv.get("title") or f"conversation {n + 1}"), messages))
    return chats


def _openwebui(data: Any, notices: list[str]) -> list[Chat]:
    chats = []
    for chat in data:
        body = chat["chat"]
        start = _stamp(chat.get("created_at") or body.get("timestamp"), _now())
        history = body.get("history") or {}
        nodes = history.get("messages") or {}
        if nodes and history.get("currentId"):
            ordered: Iterable[Any] = _branch(
                nodes, history["currentId"], lambda node: node.get("parentId")
            )
        else:
            ordered = body.get("messages") or []
        messages = [
            m
            for raw in ordered
            if (
                m := _message(
                    raw["role"], raw.get("content"), _stamp(raw.get("timestamp"), start), notices
                )
            )
        ]
        key = str(chat.get("id") or body.get("id") or _key([(m.role, m.text) for m in messages]))
        chats.append(Chat(key, str(chat.get("title") or body.get("title") or ""), messages))
    return chats


def _sillytavern(text: Any, notices: list[str]) -> list[Chat]:
    lines = [json.loads(line) for line in str(text).splitlines() if line.strip()]
    head = lines[0] if lines and "mes" not in lines[0] else {}
    body = lines[1:] if head else lines
    start = _stamp(head.get("create_date"), _now())
    messages = []
    for raw in body:
        if raw.get("is_system"):
            continue
        role = "user" if raw["is_user"] else "assistant"
        m = _message(role, raw["mes"], _stamp(raw.get("send_date"), start), notices)
        if m is not None:
            messages.append(m)
    title = str(head.get("character_name") or "SillyTavern chat")
    key = _key(head.get("create_date"), title, [(m.role, m.text) for m in messages[:3]])
    return [Chat(key, title, messages)]


def _chatgpt(data: Any, notices: list[str]) -> list[Chat]:
    chats = []
    for conv in data:
        nodes = conv["mapping"]
        start = _stamp(conv.get("create_time"), _now())
        current = conv.get("current_node")
        if current is None:  # no branch marked: the newest leaf
            leaves = [k for k, v in nodes.items() if not v.get("children")]
            current = leaves[-1] if leaves else None
        messages = []
        for node in _branch(nodes, current, lambda node: node.get("parent")):
            message = node.get("message") or {}
            parts = (message.get("content") or {}).get("parts") or []
            words = "\n".join(p for p in parts if isinstance(p, str))
            role = (message.get("author") or {}).get("role", "")
            m = _message(role, words, _stamp(message.get("create_time"), start), notices)
            if m is not None:
                messages.append(m)
        key = str(conv.get("conversation_id") or conv.get("id") or _key(conv.get("title"), start))
        chats.append(Chat(key, str(conv.get("title") or ""), messages))
    return chats


_READERS: dict[str, Callable[[Any, list[str]], list[Chat]]] = {
    "plain": _plain,
    "openwebui": _openwebui,
    "sillytavern": _sillytavern,
    "chatgpt": _chatgpt,
}
