"""Requests that are not the user speaking: a front-end's own tasks and generation modes.

Front-ends ask the chat model for things of their own, in the chat's words: a title for a new
chat, tags, follow-up suggestions, search queries, an autocompletion (Open WebUI's background
tasks), a continuation of the last reply, a reply in the user's name, a summary of the chat
(SillyTavern's Continue, Impersonate and Summarize), the next member's reply in a group chat.
None of them is a message of the user, so none is a turn: no conversation is chosen or held,
no memory is read or written, no judge votes, nothing is stored but the call records.

The shapes recognised (:func:`recognise`), in this order:

- ``tasks_model``: the request names the model ``nova-tasks`` (``GET /v1/models`` lists it:
  a front-end whose task model can be set uses it for all of its tasks);
- ``no_user_message``: the request has no user message (a greeting asked for, a quiet prompt);
- Open WebUI's tasks: the last user message begins ``### Task:`` — ``title``, ``tags``,
  ``follow_ups``, ``queries``, ``autocomplete``, ``emoji``, else ``task`` (its RAG template
  around a message with sources is no task: :mod:`novaberg.engine.attached` unwraps it
  first); and ``tools``, the choice of tools of its *legacy* function calling: a system
  message ``Available Tools: …`` and a last user message ``Query: …`` (or ``History: …``);
- ``connection_test``: SillyTavern's API panel *Test Message* — one user message "Hi" and
  nothing else, not streamed, with the sampling fields SillyTavern always sends
  (``logit_bias``); a chat of SillyTavern's always begins with its card's system messages;
- generation modes: an assistant message after the last user message — ``continue`` (the
  trailing instruction begins ``[Continue``), ``impersonate`` (it asks for a reply "from the
  point of view of" someone), ``summarize`` (it asks to summarize), else ``generation`` (the
  next member of a group chat); and a summary asked for by a system message right after the
  last user message (``summarize``), and the Summarize extension's *Raw* modes: one system
  message asking for a summary, then the transcript as one user message (``summarize``).

Each is answered by one plain backend call (:func:`run_task`): the front-end's messages as it
sent them, as text, with no persona, no memory and no judges; its records in ``llm_calls``
carry the caller ``frontend_task``, the kind (``task``) and the user (``user_id``), so
``novaberg stats`` and ``/api/stats`` count them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from novaberg.backends.base import ChatRequest, TokenCallback
from novaberg.context import CallContext
from novaberg.queue import CALL_OWNER, FOREGROUND
from novaberg.storage.db import Database, insert_calls
from novaberg.telemetry import CallRecord

if TYPE_CHECKING:
    from novaberg.engine.core import Engine

TASKS_MODEL_ID = "nova-tasks"
CALLER = "frontend_task"
OPENWEBUI_TASK = "### Task:"
OPENWEBUI_TOOLS = "Available Tools:"
OPENWEBUI_TOOLS_ASKED = ("Query:", "History:")
_OPENWEBUI_KINDS = (  # words of the task's first lines, and the kind they name
    ("title", "title"),
    ("tags", "tags"),
    ("follow-up", "follow_ups"),
    ("messages this user might", "follow_ups"),
    ("search queries", "queries"),
    ("autocompletion", "autocomplete"),
    ("emoji", "emoji"),
)
_HEAD_CHARS = 300
"""How much of a task's text is read to tell its kind."""

Said = tuple[str, str]
"""(role, text) of one message as the front-end sent it."""


@dataclass(frozen=True)
class FrontendTask:
    kind: str
    messages: tuple[Said, ...]


@dataclass(frozen=True)
class TaskResult:
    text: str
    calls: list[CallRecord]


def _openwebui_kind(text: str) -> str:
    head = text[len(OPENWEBUI_TASK) : _HEAD_CHARS].lower()
    return next((kind for words, kind in _OPENWEBUI_KINDS if words in head), "task")


def _generation_kind(after: Sequence[Said]) -> str:
    instruction = next((t for r, t in reversed(after) if r == "system"), "")
    head = instruction.lstrip()[:_HEAD_CHARS].lower()
    if head.startswith("[continue"):
        return "continue"
    if "point of view of" in head:
        return "impersonate"
    if "summar" in head:
        return "summarize"
    return "generation"


CONNECTION_TEST: tuple[Said, ...] = (("user", "Hi"),)
"""SillyTavern's Test Message (``testApiConnection`` in its ``openai.js``)."""


def recognise(
    messages: Sequence[Said], model: str, *, stream: bool = False, logit_bias: bool = False
) -> FrontendTask | None:
    """The task a chat request is, or ``None`` when it is the user speaking (a turn);
    ``stream`` and ``logit_bias`` (whether the request has that field) tell SillyTavern's
    connection test from a first "Hi"."""
    said = tuple(messages)
    if model == TASKS_MODEL_ID:
        return FrontendTask("tasks_model", said)
    if said == CONNECTION_TEST and not stream and logit_bias:
        return FrontendTask("connection_test", said)
    last_user = next((i for i in range(len(said) - 1, -1, -1) if said[i][0] == "user"), None)
    if last_user is None:
        return FrontendTask("no_user_message", said)
    if said[last_user][1].lstrip().startswith(OPENWEBUI_TASK):
        return FrontendTask(_openwebui_kind(said[last_user][1].lstrip()), said)
    if said[last_user][1].lstrip().startswith(OPENWEBUI_TOOLS_ASKED) and any(
        role == "system" and text.lstrip().startswith(OPENWEBUI_TOOLS)
        for role, text in said[:last_user]
    ):
        return FrontendTask("tools", said)
    after = said[last_user + 1 :]
    if any(role == "assistant" for role, _ in after):
        return FrontendTask(_generation_kind(after), said)
    if after and after[0][0] == "system" and _generation_kind(after[:1]) == "summarize":
        return FrontendTask("summarize", said)
    if _raw_summary(said):
        return FrontendTask("summarize", said)
    return None


def _raw_summary(said: Sequence[Said]) -> bool:
    """SillyTavern's Summarize extension in its *Raw* prompt modes (``generateRaw``): one
    system message that asks for a summary, then the chat's transcript as one user message."""
    roles = [role for role, _ in said]
    return roles == ["system", "user"] and _generation_kind(said[:1]) == "summarize"


def _store(db: Database, calls: list[CallRecord], user: str, kind: str) -> None:
    with db.transaction() as c:
        insert_calls(c, calls, turn_id=None, task=(user, kind))


async def run_task(
    engine: Engine,
    user: str,
    task: FrontendTask,
    on_token: TokenCallback | None = None,
) -> TaskResult:
    """One plain call for ``task`` (see the module text) through ``engine``'s model queue;
    its records are stored whether it answered or failed (then its
    :class:`~novaberg.errors.BackendError` is raised)."""
    ctx = CallContext(settings=engine.settings, queue=engine.queue)
    db = engine.db
    CALL_OWNER.set(user)  # the model queue takes different users' calls in turn
    request = ChatRequest(
        caller=CALLER,
        messages=[{"role": role, "content": text} for role, text in task.messages],
        think=False,
    )
    status = "failed"
    try:
        result = await ctx.llm(request, priority=FOREGROUND, on_token=on_token)
        status = "done"
    finally:
        await db.run(_store, db, ctx.trace.calls, user, task.kind)
        ctx.queue.observers.task_ended(task.kind, status, ctx.trace.calls)
    return TaskResult(result.response.content, ctx.trace.calls)
