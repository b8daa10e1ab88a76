"""Nova behind the real Open WebUI 0.12.4, used through its own UI in chromium, with its default
task settings (title, tags and follow-up suggestions on): issue 20's part 7.

Each flow is one Open WebUI user of its own (a fresh end user ``webui/<id>`` on Nova's side)
in one chat, so what Nova stored for it is the flow's alone. The assertions are on Nova's side,
through her public doors (nova_side.py): one conversation per chat; every message the person
sent stored once and answered; nothing from Open WebUI's background tasks stored as a turn or
a memory (each task is one ``frontend_task`` call); at most 6 calls of a turn's nodes per
message the person sent; the history a reply is written from follows what Open WebUI resent;
one person's data apart from another's. The model is the project's scripted Ollama-protocol
test server: each message's reply and memory are scripted for requests containing its words.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser
from tests.server_helpers import Nova

from frontends.nova_side import FRONTEND_USER, JWT_SECRET, EndUser
from frontends.openwebui import ChatPage, OpenWebUI, poll
from frontends.proxy import Exchange, RecordingProxy
from novaberg.testing import Match, OllamaTestServer, RecordedRequest, Reply

TASK_ANSWER = json.dumps(
    {"title": "Nova chat", "tags": ["nova"], "follow_ups": ["Tell me more.", "Anything else?"]}
)
"""One answer that serves each of Open WebUI's tasks (title, tags, follow-ups)."""
TURN_CALLS_PER_MESSAGE = 6
TURN_CALLERS = ("router", "responder", "thinker", "thinker_nachfass", "corrector", "salience")
CHAT_PATHS = ("/api/chat", "/v1/chat/completions")
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts" / "frontends"
STOP_DELAY_S = 30.0
"""How long the responder takes to answer the message that is stopped: far longer than the
flow needs to press Stop and send the next message."""


def is_turn_call(r: RecordedRequest) -> bool:
    return r.caller in TURN_CALLERS or r.caller.startswith("judge_")


@pytest.fixture
def server(ollama_server: OllamaTestServer) -> OllamaTestServer:
    """The session's test server, reset for each flow, answering Open WebUI's tasks."""
    ollama_server.reset()
    ollama_server.standing("frontend_task", Reply(content=TASK_ANSWER))
    return ollama_server


class Flow:
    """One person's chat in Open WebUI, and what Nova made of it."""

    def __init__(
        self,
        name: str,
        chat: ChatPage,
        user: EndUser,
        server: OllamaTestServer,
        proxy: RecordingProxy,
    ) -> None:
        self.name = name
        self.chat = chat
        self.user = user
        self.server = server
        self.proxy = proxy
        self.mark = proxy.mark()
        self.calls_mark = len(server.requests())
        self.sent: list[str] = []
        """Every message this person sent, in order (an edit's new text included)."""
        self.summaries: dict[str, str] = {}
        self.actions = 0
        """Messages sent, regenerated or resent: each is one request that is the user speaking."""
        self.answers = 0
        """Replies the page shows."""
        self._chat_id: str | None = None

    # -- driving the page ---------------------------------------------------------------------
    def expect(self, text: str, reply: str, *, delay_s: float = 0.0, remember: bool = True) -> None:
        """Script the model for the next message ``text``: the responder answers ``reply``,
        and salience keeps a memory of it (a summary of its own, never the message's words)."""
        words = Match(contains=text)
        self.server.script("responder", Reply(content=reply, delay_s=delay_s), match=words)
        if remember and text not in self.summaries:
            summary = f"({self.name}) memory {len(self.summaries) + 1} of the person."
            self.summaries[text] = summary
            score = Reply(content=json.dumps({"score": 0.9, "summary": summary}))
            self.server.script("salience", score, match=words)

    def say(self, text: str, reply: str) -> None:
        """Send ``text`` and wait until the reply is shown and Open WebUI's tasks are done."""
        self.expect(text, reply)
        self.act(lambda: self.chat.send(text), text, reply, answers=self.answers + 1)
        self.sent.append(text)

    def regenerate(self, text: str, reply: str) -> None:
        """Press Regenerate on the last reply (the answer to ``text``)."""
        self.expect(text, reply)
        self.act(self.chat.regenerate, text, reply, answers=self.answers)

    def edit(self, index: int, text: str, reply: str, answers: int) -> None:
        """Edit the ``index``-th message of the person to ``text`` and press Send; the page
        then shows ``answers`` replies (those of the new branch)."""
        self.expect(text, reply)
        self.act(lambda: self.chat.edit(index, text), text, reply, answers=answers)
        self.sent.append(text)

    def act(self, action: Callable[[], None], text: str, reply: str, answers: int) -> None:
        """Do ``action`` in the page, which makes Open WebUI send ``text`` as the user's
        message: Nova must answer it with ``reply``, and the page show it."""
        before = len(self.requests_for(text)) if self._chat_id else 0
        action()
        assert self.chat_id  # a new chat's address once Open WebUI saved it
        self.actions += 1
        self.answers = answers
        self.wait(
            lambda: len(self.requests_for(text)) > before and self.requests_for(text)[-1].done,
            f"Open WebUI's request for {text!r} to be answered",
        )
        answer = self.requests_for(text)[-1]
        assert answer.status == 200 and answer.reply == reply, (
            f"Nova answered {text!r} with {answer.status} {answer.text[-300:]!r}\n{self.evidence()}"
        )
        self.chat.wait_answered(self.answers, reply)
        self.settle()

    def requests_for(self, text: str) -> list[Exchange]:
        return [x for x in self.turn_requests() if x.last_user_text == text]

    def wait(self, condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
        poll(condition, what, timeout_s, explain=self.evidence)

    @property
    def chat_id(self) -> str:
        if self._chat_id is None:
            self._chat_id = self.chat.chat_id
        return self._chat_id

    # -- what went over the wire -------------------------------------------------------------
    def exchanges(self) -> list[Exchange]:
        """This chat's requests to Nova since the flow began."""
        chats = self.proxy.since(self.mark)
        return [x for x in chats if x.is_chat and x.chat_id == self.chat_id]

    def turn_requests(self) -> list[Exchange]:
        return [x for x in self.exchanges() if x.task is None]

    def task_requests(self) -> list[Exchange]:
        return [x for x in self.exchanges() if x.task is not None]

    def calls(self) -> list[RecordedRequest]:
        """The model calls Nova made since the flow began."""
        return [r for r in self.server.requests()[self.calls_mark :] if r.path in CHAT_PATHS]

    def prompt_for(self, text: str) -> str:
        """The responder's last prompt for the message ``text``, as JSON text."""
        prompts = [
            r.body.get("messages", [])
            for r in self.calls()
            if r.caller == "responder" and text in _last_user(r.body.get("messages", []))
        ]
        assert prompts, f"the responder was never asked about {text!r}\n{self.evidence()}"
        return json.dumps(prompts[-1], ensure_ascii=False)

    def turn_status(self, turn_id: int) -> str:
        response = self.user.turn(turn_id)
        if response.status_code == 200:
            return "done"
        detail = str(response.json().get("detail", ""))
        for status in ("running", "failed", "aborted"):
            if f"is {status}" in detail:
                return status
        return f"{response.status_code} {detail}"

    def _background_done(self) -> bool:
        if not all(x.done for x in self.proxy.since(self.mark)):
            return False
        turns = self.turn_requests()
        answered = [x for x in turns if x.status == 200 and not x.client_gone]
        tasks = Counter(x.task for x in self.task_requests())
        if tasks["follow_ups"] < len(answered):  # Open WebUI asks after every answer
            return False
        if turns and turns[0] in answered and not tasks["tags"]:  # and after a chat's first
            return False
        for x in answered:  # Nova finished each turn (its memory written, jobs enqueued)
            if x.turn is not None and self.turn_status(x.turn) == "running":
                return False
        return self.user.jobs_settled()

    def settle(self) -> None:
        """Wait until Open WebUI's background tasks for this chat were answered and Nova's
        turns and memory jobs are finished: what a step costs is all counted."""
        self.wait(self._background_done, f"Open WebUI's tasks and Nova's work ({self.name})", 90)

    # -- what Nova stored --------------------------------------------------------------------
    def conversation(self) -> int:
        conversations = self.user.conversations()
        assert len(conversations) == 1, (
            f"one Open WebUI chat became {len(conversations)} Nova conversations\n{self.evidence()}"
        )
        return int(conversations[0]["id"])

    def evidence(self) -> str:
        """What Open WebUI sent and Nova answered, stored and remembered: for failure messages."""
        lines = [f"-- {self.name}: Open WebUI sent, Nova answered:"]
        try:
            for x in self.proxy.since(self.mark):
                if x.is_chat:
                    mine = x.turn is not None and x.chat_id == self._chat_id
                    status = f" ({self.turn_status(x.turn)})" if mine and x.turn else ""
                    lines.append(f"   {x.summary()}{status}")
            for c in self.user.conversations():
                lines.append(f"-- Nova conversation {c['id']} stores:")
                for m in self.user.messages(int(c["id"])):
                    status = self.turn_status(int(m["turn_id"]))
                    lines.append(
                        f"   turn {m['turn_id']} ({status}) {m['role']}: {m['content'][:100]!r}"
                    )
            lines.append("-- memories:")
            lines += [
                f"   {m['kind']} {m['text']!r} from turn {m['source_turn_id']}"
                for m in self.user.memories()
            ]
        except AssertionError as exc:
            lines.append(f"   (could not read Nova's side: {exc})")
        calls = Counter(r.caller for r in self.calls())
        lines.append(f"-- model calls by caller: {dict(calls)}")
        return "\n".join(lines)

    def save(self) -> None:
        """What happened, passed or not, into test-artifacts/frontends/ (kept by CI)."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        (ARTIFACTS / f"{self.name}.txt").write_text(self.evidence() + "\n", encoding="utf-8")
        self.chat.page.screenshot(path=str(ARTIFACTS / f"{self.name}.png"), full_page=True)

    def check_nova(self, answered_turns: int | None = None, *, calls: bool = True) -> int:
        """The checks every flow shares (``calls``: with the model calls, see
        :func:`check_calls`); the conversation's id. ``answered_turns``: how many of the
        requests that are the user speaking must be answered (default: all)."""
        self.settle()
        evidence = self.evidence()
        turns = self.turn_requests()
        assert len(turns) == self.actions, (
            f"{self.actions} messages sent, regenerated or resent in the page, but Open WebUI "
            f"sent {len(turns)} requests that are the user speaking\n{evidence}"
        )
        conversation = self.conversation()
        # every message answered, in this chat's one conversation
        expected_answered = len(turns) if answered_turns is None else answered_turns
        answered = [x for x in turns if x.status == 200 and not x.client_gone]
        assert len(answered) == expected_answered, f"messages not answered\n{evidence}"
        assert {x.conversation for x in answered} == {conversation}, evidence
        # every message stored once; nothing of the tasks
        stored = self.user.stored(conversation)
        said = [content for role, content in stored if role == "user"]
        assert said == self.sent, f"stored user messages {said} != sent {self.sent}\n{evidence}"
        assert not any("### Task:" in content for _, content in stored), evidence
        if calls:
            check_calls(self)
        # memories: one per message the person sent, each from that message's turn
        user_turns = {int(m["turn_id"]) for m in self.user.messages(conversation)}
        memories = self.user.memories()
        short_term = sorted(m["text"] for m in memories if m["kind"] == "short_term")
        expected = sorted(self.summaries[t] for t in self.sent if t in self.summaries)
        assert short_term == expected, f"memories {short_term}\n{evidence}"
        foreign = [m for m in memories if m["source_turn_id"] not in (None, *user_turns)]
        assert not foreign, f"memories not from the person's messages: {foreign}\n{evidence}"
        return conversation


def check_calls(*flows: Flow) -> None:
    """Open WebUI's tasks in ``flows``' chats were each one plain ``frontend_task`` call,
    answered, and no turn; the turns' nodes made at most 6 calls per message the person sent
    (memory jobs, which a stored memory starts, are not counted here)."""
    evidence = "\n".join(f.evidence() for f in flows)
    tasks = [x for f in flows for x in f.task_requests()]
    turns = [x for f in flows for x in f.turn_requests()]
    assert tasks, f"Open WebUI sent no background task (title, tags, follow-ups)\n{evidence}"
    assert all(x.status == 200 for x in tasks), f"a task was refused\n{evidence}"
    mark = min(f.calls_mark for f in flows)
    calls = [r for r in flows[0].server.requests()[mark:] if r.path in CHAT_PATHS]
    task_calls = [r for r in calls if r.caller == "frontend_task"]
    assert len(task_calls) == len(tasks), (
        f"{len(tasks)} task requests cost {len(task_calls)} frontend_task calls\n{evidence}"
    )
    assert all(_task_prompt(r) for r in task_calls), evidence
    turn_calls = [r for r in calls if is_turn_call(r)]
    assert not any(_task_prompt(r) for r in turn_calls), (
        f"a turn's node was asked about one of Open WebUI's tasks\n{evidence}"
    )
    budget = TURN_CALLS_PER_MESSAGE * len(turns)
    assert len(turn_calls) <= budget, (
        f"{len(turn_calls)} calls of a turn's nodes for {len(turns)} messages (at most "
        f"{budget})\n{evidence}"
    )


def _last_user(messages: list[dict[str, Any]]) -> str:
    users = [m for m in messages if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def _task_prompt(r: RecordedRequest) -> bool:
    return _last_user(r.body.get("messages", [])).lstrip().startswith("### Task:")


@pytest.fixture
def flow(
    request: pytest.FixtureRequest,
    nova: Nova,
    proxy: RecordingProxy,
    openwebui: OpenWebUI,
    browser: Browser,
    server: OllamaTestServer,
) -> Iterator[Flow]:
    """A new Open WebUI user, signed in, on a new chat."""
    name = request.node.name.removeprefix("test_")
    account = openwebui.add_user(name.replace("_", " ").title())
    user = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, account.id)
    with ChatPage.signed_in(browser, openwebui, account) as chat:
        started = Flow(name, chat, user, server, proxy)
        try:
            yield started
        finally:
            started.save()


def test_a_new_chats_first_message(flow: Flow) -> None:
    """Open WebUI sends the title task at the same moment as a new chat's first message, with
    the same chat id (the title's answer takes a while here, so the two overlap): the message
    is answered and stored, the task is no turn and holds nothing."""
    flow.server.script("frontend_task", Reply(content=TASK_ANSWER, delay_s=2.0))
    flow.say("Hello Nova, I'm Ada and I keep bees", "Bees! How lovely, Ada.")
    [title] = [x for x in flow.task_requests() if x.task == "title"]
    [message] = flow.turn_requests()
    assert title.started < message.started < (title.ended or 0), (
        f"the title task did not overlap the first message\n{flow.evidence()}"
    )
    flow.check_nova()


def test_a_second_message(flow: Flow) -> None:
    flow.say("Hello Nova, I'm Ben and I keep goats", "Goats are great company, Ben.")
    flow.say("How much hay does a goat eat?", "About two kilos a day.")
    conversation = flow.check_nova()
    prompt = flow.prompt_for("How much hay does a goat eat?")
    assert "Hello Nova, I'm Ben and I keep goats" in prompt, flow.evidence()
    assert "Goats are great company, Ben." in prompt, flow.evidence()
    assert flow.user.stored(conversation) == [
        ("user", "Hello Nova, I'm Ben and I keep goats"),
        ("assistant", "Goats are great company, Ben."),
        ("user", "How much hay does a goat eat?"),
        ("assistant", "About two kilos a day."),
    ], flow.evidence()


def test_regenerate_the_last_reply(flow: Flow) -> None:
    flow.say("Hello Nova, I'm Cleo and I paint", "Painting is wonderful, Cleo.")
    flow.say("Which colours should I buy first?", "Start with the three primaries.")
    flow.regenerate("Which colours should I buy first?", "A warm and a cool of each primary.")
    flow.say("And brushes?", "Two rounds and one flat.")
    conversation = flow.check_nova()
    assert flow.user.stored(conversation) == [
        ("user", "Hello Nova, I'm Cleo and I paint"),
        ("assistant", "Painting is wonderful, Cleo."),
        ("user", "Which colours should I buy first?"),
        ("assistant", "A warm and a cool of each primary."),
        ("user", "And brushes?"),
        ("assistant", "Two rounds and one flat."),
    ], flow.evidence()
    # the regenerated turn ran without the old answer, and the next message after the new one
    again = flow.prompt_for("Which colours should I buy first?")
    assert "Start with the three primaries." not in again, flow.evidence()
    after = flow.prompt_for("And brushes?")
    assert "A warm and a cool of each primary." in after, flow.evidence()
    assert "Start with the three primaries." not in after, flow.evidence()


def test_stop_then_another_message(flow: Flow) -> None:
    """Stop while Nova is still writing: the turn is cancelled and stored as aborted (its
    words kept with the aborted turn and in Open WebUI's chat, no message or reply stored),
    its unseen answer is never history, the next message continues the same conversation."""
    flow.say("Hello Nova, I'm Dora and I sail", "Fair winds, Dora.")
    stopped, unseen = "Tell me a very long story about the sea", "UNSEEN: Once upon a tide..."
    flow.expect(stopped, unseen, delay_s=STOP_DELAY_S, remember=False)  # never reaches salience
    asked = len([r for r in flow.calls() if r.caller == "responder"])
    flow.chat.send(stopped)
    flow.sent.append(stopped)
    flow.actions += 1
    flow.answers += 1
    flow.wait(  # the turn is running: Nova's responder is writing the answer
        lambda: len([r for r in flow.calls() if r.caller == "responder"]) > asked,
        "the responder to be asked about the message that is stopped",
    )
    flow.chat.stop()
    flow.wait(
        lambda: any(x.done for x in flow.requests_for(stopped)),
        "Open WebUI to close the stopped request",
    )
    [cut] = flow.requests_for(stopped)
    assert cut.client_gone, f"Stop did not close the request to Nova\n{flow.evidence()}"
    flow.sent.remove(stopped)  # its turn is aborted: no message stored (Open WebUI keeps it)
    flow.say("Never mind. Is the tide high at noon?", "High tide is at half past twelve.")
    # the next reply is written from what Open WebUI resent: the stopped message, not its
    # unseen answer
    prompt = flow.prompt_for("Never mind. Is the tide high at noon?")
    assert unseen not in prompt, flow.evidence()
    assert "Fair winds, Dora." in prompt and stopped in prompt, flow.evidence()
    assert cut.turn is not None and flow.turn_status(cut.turn) == "aborted", flow.evidence()
    conversation = flow.check_nova(answered_turns=2)
    assert flow.user.stored(conversation) == [
        ("user", "Hello Nova, I'm Dora and I sail"),
        ("assistant", "Fair winds, Dora."),
        # an aborted turn stores no message (a turn is stored whole or not at all); Open
        # WebUI keeps the stopped message in its chat and resends it, above
        ("user", "Never mind. Is the tide high at noon?"),
        ("assistant", "High tide is at half past twelve."),
    ], flow.evidence()


def test_edit_an_earlier_message_and_resend(flow: Flow) -> None:
    """Open WebUI resends the edited message after the history before it: Nova's reply is
    written from that history, not from the branch the edit left (which stays stored)."""
    flow.say("Hello Nova, I'm Emil and I garden", "Gardens are good for the soul, Emil.")
    flow.say("My favourite flower is the lavender", "Lavender smells of summer.")
    flow.edit(1, "My favourite flower is the borage", "Borage feeds the bees.", answers=2)
    flow.say("What should I plant next to it?", "Plant some clover.")
    conversation = flow.check_nova()
    edited = flow.prompt_for("My favourite flower is the borage")
    assert "Gardens are good for the soul, Emil." in edited, flow.evidence()
    assert "My favourite flower is the lavender" not in edited, flow.evidence()
    assert "Lavender smells of summer." not in edited, flow.evidence()
    after = flow.prompt_for("What should I plant next to it?")
    assert "Borage feeds the bees." in after, flow.evidence()
    assert "My favourite flower is the lavender" not in after, flow.evidence()
    assert "Lavender smells of summer." not in after, flow.evidence()
    assert flow.user.stored(conversation) == [
        ("user", "Hello Nova, I'm Emil and I garden"),
        ("assistant", "Gardens are good for the soul, Emil."),
        ("user", "My favourite flower is the lavender"),
        ("assistant", "Lavender smells of summer."),
        ("user", "My favourite flower is the borage"),
        ("assistant", "Borage feeds the bees."),
        ("user", "What should I plant next to it?"),
        ("assistant", "Plant some clover."),
    ], flow.evidence()


def test_a_second_user_is_kept_apart(
    flow: Flow,
    nova: Nova,
    proxy: RecordingProxy,
    openwebui: OpenWebUI,
    browser: Browser,
    server: OllamaTestServer,
) -> None:
    """Two people of one Open WebUI at the same time, each named to Nova by the signed JWT:
    their own conversations and memories, never the other's words in a prompt, no access to
    the other's conversation."""
    account = openwebui.add_user("Finn")
    finn = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, account.id)
    with ChatPage.signed_in(browser, openwebui, account) as page:
        other = Flow("a_second_user_is_kept_apart_finn", page, finn, server, proxy)
        other.mark, other.calls_mark = flow.mark, flow.calls_mark
        try:
            two_people_at_once(flow, other)
        finally:
            other.save()


def answered(flow: Flow, text: str) -> bool:
    """Open WebUI's request for ``text`` is there and Nova's answer to it ended."""
    requests = flow.requests_for(text)
    return bool(requests) and requests[-1].done


def two_people_at_once(flow: Flow, other: Flow) -> None:
    """Fay (``flow``) and Finn (``other``) chat at the same time, each in their own tab."""
    fay = ("Hello Nova, I'm Fay and I grow tomatoes", "Tomatoes love the sun, Fay.")
    fin = ("Hello Nova, I'm Finn and I mend clocks", "Clocks keep us honest, Finn.")
    # both first messages at once: each reply takes a moment, so the turns overlap
    flow.expect(*fay, delay_s=1.5)
    other.expect(*fin, delay_s=1.5)
    flow.chat.send(fay[0])
    other.chat.send(fin[0])
    for person, (text, reply) in ((flow, fay), (other, fin)):
        assert person.chat_id
        person.sent.append(text)
        person.actions += 1
        person.answers = 1
        person.wait(partial(answered, person, text), f"Nova's answer to {text!r}")
        person.chat.wait_answered(1, reply)
    [a], [b] = flow.requests_for(fay[0]), other.requests_for(fin[0])
    assert a.started < (b.ended or 0) and b.started < (a.ended or 0), (
        f"the two first messages did not overlap\n{flow.evidence()}"
    )
    flow.settle()
    other.settle()
    flow.say("What do you know about me?", "You grow tomatoes.")
    other.say("What do you know about me?", "You mend clocks.")
    mine, theirs = flow.check_nova(calls=False), other.check_nova(calls=False)
    check_calls(flow, other)
    assert mine != theirs, flow.evidence()
    for person, name, foreign in ((flow, "Fay", "Finn"), (other, "Finn", "Fay")):
        stored = json.dumps(person.user.stored(person.conversation()))
        assert name in stored and foreign not in stored, person.evidence()
    # one cannot read the other's conversation
    assert flow.user.get(f"/api/conversations/{theirs}/messages").status_code == 404
    assert other.user.get(f"/api/conversations/{mine}/messages").status_code == 404
    # and no prompt of a turn mixed the two
    for r in flow.calls():
        if is_turn_call(r):
            text = json.dumps(r.body.get("messages", []))
            assert not ("Fay" in text and "Finn" in text), f"{r.caller}: {text[:2000]}"
