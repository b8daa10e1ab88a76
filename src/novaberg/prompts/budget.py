"""Sizes: what a text is estimated to cost in tokens, what each node may generate, and the one
rule that makes every prompt fit the model's context window.

**Estimate.** No tokenizer is shared by every backend, so the estimate is rough and leans high:
an ASCII character counts 1/3 token (English prose takes about 4 characters a token with the
Llama, Qwen and Gemma tokenizers, German about 3.2, JSON and code about 3), any other character
half a token per UTF-8 byte (an umlaut 1, a CJK character 1.5, an emoji 2; byte-level BPE needs
at most one token per byte). Every message adds :data:`MESSAGE_TOKENS` for its role markers,
every prompt :data:`PROMPT_TOKENS` for the chat template, and tool declarations and a JSON
schema count as their JSON text. (``memory/retrieval.py`` has its own, lighter estimate for
ranking memories inside their budget; this one decides what is sent.)

**Output limits.** :data:`OUTPUT_TOKENS` is the one table of how many tokens each node may
generate (``max_tokens``; Ollama's ``num_predict``). A limit never takes more than a quarter of
the window. What a model returns as a reply is kept up to ``limits.reply_chars`` characters
(:func:`cut_reply`, at a sentence or word boundary), whatever the server did with the limit.

**Fitting.** Each prompt gets ``window - output limit`` tokens (:class:`Budget`). The node's
instructions and its SUBJECT (the user's message, the answer under judgement) stay whole;
background goes first: the oldest history (at most ``limits.history_tokens`` of it), then the
situation (memory, timeline, profile, at most ``limits.situation_tokens``; every part gets a
fair share, so one huge part cannot crowd out the others), and only as a last resort the answer
under judgement, then the user's message, cut from the middle with a marker. Every cut is a
notice in the turn's trace naming the node and what was cut, never the text that was cut.
:func:`fit_request` applies the same rule, without knowing a node's subject, to every request
as it is sent (earlier tool results first, then the largest messages): a node that fitted its
own prompt passes it unchanged, a prompt that grows (the thinker's tool results) is kept
inside the window.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from novaberg.backends.base import ChatMessage, ChatRequest, TokenCallback, emit
from novaberg.config import Settings
from novaberg.prompts.evaluation import Instruction, Situation, Subject, judging_messages
from novaberg.telemetry import Trace

ASCII_CHARS_PER_TOKEN = 3.0
OTHER_BYTES_PER_TOKEN = 2.0
PROMPT_TOKENS = 32
"""A chat template's fixed part (begin-of-text, the assistant's opening marker)."""
MESSAGE_TOKENS = 8
"""Role markers and separators of one chat message."""

OUTPUT_TOKENS: dict[str, int] = {
    "router": 96,  # {"intent", "tone", "needs_check"}
    "responder": 512,  # a chat reply of a few sentences (a second pass too)
    "thinker": 1024,  # reasoning (counted by Ollama with think: true) + a control line/answer
    "thinker_nachfass": 512,  # a control line, or RESULT: REVISED with the answer
    "judge": 160,  # every judge_<name>: {"vote", "reason"}
    "corrector": 512,  # a rewritten reply
    "salience": 160,  # {"score", "summary"}
    "consolidate": 256,  # memory jobs (background)
    "timeline": 256,
    "profile": 512,  # profile_core, profile_adaptive
    "frontend_task": 512,  # a front-end's own task: a title, tags, a continuation, a summary
}
"""How many tokens each caller may generate, by caller name or its prefix before ``_``."""
DEFAULT_OUTPUT_TOKENS = 256
"""For a caller the table does not name."""

MIN_KEEP_TOKENS = 48
"""A message or background item is cut no shorter than this; below, it is left out whole."""
ANSWER_FLOOR_TOKENS = 64
"""The answer under judgement keeps at least this much before the user's message is cut."""
_LABEL_TOKENS = 12
_LINE_TOKENS = 2
_SLACK_TOKENS = 4


# -- the estimate ------------------------------------------------------------------------------
def estimate_tokens(text: str) -> int:
    """A conservative token count of ``text`` (see the module's docstring)."""
    if not text:
        return 0
    ascii_chars = len(text.encode("ascii", "ignore"))
    other_bytes = len(text.encode("utf-8", "surrogatepass")) - ascii_chars
    return math.ceil(ascii_chars / ASCII_CHARS_PER_TOKEN + other_bytes / OTHER_BYTES_PER_TOKEN)


def _content_tokens(message: ChatMessage) -> int:
    content = message.get("content")
    tokens = estimate_tokens(content) if isinstance(content, str) else 0
    if message.get("tool_calls"):
        tokens += estimate_tokens(json.dumps(message["tool_calls"], ensure_ascii=False))
    return tokens


def messages_tokens(
    messages: Iterable[ChatMessage],
    tools: Sequence[dict[str, Any]] = (),
    json_schema: dict[str, Any] | None = None,
) -> int:
    """The estimate of a whole prompt: its messages, tool declarations and JSON schema."""
    total = PROMPT_TOKENS + sum(MESSAGE_TOKENS + _content_tokens(m) for m in messages)
    if tools:
        total += estimate_tokens(json.dumps(list(tools), ensure_ascii=False))
    if json_schema:
        total += estimate_tokens(json.dumps(json_schema, ensure_ascii=False))
    return total


# -- windows and limits ------------------------------------------------------------------------
class BudgetContext(Protocol):
    """What the budget reads of a model caller's context: its settings, the trace its notices
    go to, and the window its prompts are sized to. Every
    :class:`~novaberg.context.CallContext` is one; this module does not import it (the
    context fits each request it sends with :func:`fit_request`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def trace(self) -> Trace: ...

    @property
    def window(self) -> int: ...


def context_window(settings: Settings, backends: Iterable[str]) -> int:
    """The window every prompt is sized to: ``limits.context_tokens``, and on the embedded
    model (primary or fallback) no more than ``embedded_ctx``."""
    window = settings.limits.context_tokens
    if "embedded" in set(backends):
        window = min(window, settings.embedded_ctx)
    return window


def output_tokens(caller: str, window: int) -> int:
    """The output limit of ``caller`` from :data:`OUTPUT_TOKENS`, at most a quarter of the
    window."""
    limit = OUTPUT_TOKENS.get(caller) or OUTPUT_TOKENS.get(
        caller.split("_", 1)[0], DEFAULT_OUTPUT_TOKENS
    )
    return min(limit, window // 4)


@dataclass(frozen=True)
class Budget:
    """What one call of one node may spend."""

    caller: str
    window: int
    output: int
    history: int
    situation: int
    reply_chars: int

    @property
    def prompt(self) -> int:
        return self.window - self.output

    @classmethod
    def of(cls, ctx: BudgetContext, caller: str) -> Budget:
        window = ctx.window
        limits = ctx.settings.limits
        return cls(
            caller=caller,
            window=window,
            output=output_tokens(caller, window),
            history=limits.history_tokens,
            situation=limits.situation_tokens,
            reply_chars=limits.reply_chars,
        )


def note(trace: Trace, caller: str, what: str) -> None:
    """A notice in the trace: the node, and what was cut (never the text itself)."""
    trace.notices.append(f"{caller}: {what}")


# -- cutting text ------------------------------------------------------------------------------
def _largest(fits: Callable[[int], bool], high: int) -> int:
    """The largest ``n`` in ``0..high`` with ``fits(n)`` (``fits`` is monotone, ``fits(0)``)."""
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def cut_middle(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: its head and tail, with a marker saying how much of the
    middle was left out; ``""`` when not even the marker fits."""
    if estimate_tokens(text) <= max_tokens:
        return text

    def render(keep: int) -> str:
        head, tail = keep - keep // 2, keep // 2
        left_out = len(text) - keep
        return f"{text[:head]}\n[… {left_out} characters left out …]\n{text[len(text) - tail :]}"

    keep = _largest(lambda n: estimate_tokens(render(n)) <= max_tokens, len(text) - 1)
    result = render(keep)
    return result if estimate_tokens(result) <= max_tokens else ""


def cut_end(text: str, max_tokens: int) -> str:
    """``text`` within ``max_tokens``: its beginning and a marker; ``""`` when nothing fits."""
    if estimate_tokens(text) <= max_tokens:
        return text

    def render(keep: int) -> str:
        return f"{text[:keep]} […]"

    keep = _largest(lambda n: estimate_tokens(render(n)) <= max_tokens, len(text) - 1)
    result = render(keep)
    return result if estimate_tokens(result) <= max_tokens else ""


_SENTENCE_END = re.compile(r"[.!?…。！？](?=[\s\"'”’»)\]]|$)|\n")


def cut_reply(text: str, max_chars: int) -> str:
    """A reply of at most ``max_chars`` characters: cut after the last sentence that fits, else
    at the last word boundary with " …" (in the second half of the limit; else hard)."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    floor = max_chars // 2
    ends = [m.end() for m in _SENTENCE_END.finditer(head) if m.end() >= floor]
    if ends:
        return head[: ends[-1]].rstrip()
    space = head.rfind(" ", floor, max_chars - 2)
    cut = space if space >= floor else max_chars - 2
    return head[:cut].rstrip() + " …"


def bounded_reply(ctx: BudgetContext, caller: str, text: str) -> str:
    """``text`` cut to ``limits.reply_chars``, with a notice when it was cut."""
    limit = ctx.settings.limits.reply_chars
    cut = cut_reply(text, limit)
    if len(cut) < len(text):
        note(
            ctx.trace,
            caller,
            f"reply cut from {len(text)} to {len(cut)} characters (limits.reply_chars = {limit})",
        )
    return cut


def capped_stream(on_token: TokenCallback | None, max_chars: int) -> TokenCallback | None:
    """Passes streamed pieces on until ``max_chars`` characters were passed, then nothing."""
    if on_token is None:
        return None
    sent = 0

    async def feed(piece: str) -> None:
        nonlocal sent
        room = max_chars - sent
        if room <= 0:
            return
        piece = piece[:room]
        sent += len(piece)
        await emit(on_token, piece)

    return feed


def fair_shares(sizes: Sequence[int], budget: int) -> list[int]:
    """Split ``budget`` over parts of ``sizes``: a part smaller than an equal share keeps its
    size, the rest is shared equally by the larger parts."""
    shares = list(sizes)
    left = max(0, budget)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for position, index in enumerate(order):
        equal = left // (len(order) - position)
        if sizes[index] <= equal:
            left -= sizes[index]
            continue
        for rest in order[position:]:
            shares[rest] = left // (len(order) - position)
        break
    return shares


# -- the situation (background) -----------------------------------------------------------------
def _item_cost(text: str) -> int:
    return estimate_tokens(text) + _LINE_TOKENS


def _keep_items(texts: Sequence[str], share: int) -> tuple[list[str], bool]:
    """The first items that fit ``share`` (the first cut at its end when none fits whole)."""
    kept: list[str] = []
    used = _LABEL_TOKENS
    for text in texts:
        cost = _item_cost(text)
        if used + cost > share:
            if not kept and share - used - _LINE_TOKENS >= MIN_KEEP_TOKENS:
                return [cut_end(text, share - used - _LINE_TOKENS)], True
            break
        kept.append(text)
        used += cost
    return kept, False


def _items_cut(part: str, total: int, kept: int, first_cut: bool) -> str:
    what = f"{part}: {total - kept} of {total} left out"
    return what + ", the first cut at its end" if first_cut else what


def fit_situation(situation: Situation, budget: int) -> tuple[Situation, list[str]]:
    """``situation`` within about ``budget`` tokens, and what was cut (for notices)."""
    memories = list(situation.memories)
    timeline = [f"{day}: {text}" for day, text in situation.timeline]
    texts = {
        "core": situation.profile_core,
        "adaptive": situation.profile_adaptive,
        "answer": situation.background_answer,
        "frontend": situation.frontend,
        "attached": situation.attached,
    }
    sizes = [
        _LABEL_TOKENS + sum(map(_item_cost, memories)) if memories else 0,
        _LABEL_TOKENS + sum(map(_item_cost, timeline)) if timeline else 0,
        *(_LABEL_TOKENS + estimate_tokens(t) if t else 0 for t in texts.values()),
    ]
    if sum(sizes) <= budget:
        return situation, []
    shares = fair_shares(sizes, budget)
    cuts: list[str] = []
    kept_memories, cut_memory = _keep_items(memories, shares[0])
    if len(kept_memories) < len(memories) or cut_memory:
        cuts.append(_items_cut("memory", len(memories), len(kept_memories), cut_memory))
    kept_timeline, cut_entry = _keep_items(timeline, shares[1])
    if len(kept_timeline) < len(timeline) or cut_entry:
        cuts.append(_items_cut("timeline", len(timeline), len(kept_timeline), cut_entry))
    fitted: dict[str, str] = {}
    for (name, text), share in zip(texts.items(), shares[2:], strict=True):
        room = share - _LABEL_TOKENS
        short = (
            text
            if estimate_tokens(text) <= room
            else (cut_middle if name == "answer" else cut_end)(text, max(room, 0))
        )
        if room < MIN_KEEP_TOKENS and short != text:
            short = ""
        fitted[name] = short
        if short != text:
            label = {
                "core": "profile (stable)",
                "adaptive": "profile (current)",
                "frontend": "the front-end's system prompt",
                "attached": "what the front-end attached",
            }.get(name, "Nova's answer (background)")
            cuts.append(
                f"{label} cut to {estimate_tokens(short)} of {estimate_tokens(text)} tokens"
            )
    kept_pairs = situation.timeline[: len(kept_timeline)]
    if cut_entry:  # the first entry, cut at its end: its date stays whole
        day = kept_pairs[0][0]
        kept_pairs = ((day, kept_timeline[0][len(day) + 2 :]),)
    return (
        replace(
            situation,
            memories=tuple(kept_memories),
            timeline=tuple(kept_pairs),
            profile_core=fitted["core"],
            profile_adaptive=fitted["adaptive"],
            background_answer=fitted["answer"],
            frontend=fitted["frontend"],
            attached=fitted["attached"],
        ),
        cuts,
    )


def fit_background(
    situation: Situation, allowed: int, cost: Callable[[Situation], int]
) -> tuple[Situation, list[str]]:
    """:func:`fit_situation`, checked against ``cost`` (the tokens the situation adds to the
    node's prompt as rendered, 0 for an empty one) until it is within ``allowed``."""
    for _ in range(4):
        fitted, cuts = fit_situation(situation, allowed)
        spent = cost(fitted)
        if spent <= allowed:
            return fitted, cuts
        allowed = max(0, 2 * allowed - spent)
    bare = _bare(situation)
    return bare, [] if bare == situation else ["situation left out"]


def _bare(situation: Situation) -> Situation:
    return replace(
        situation,
        memories=(),
        timeline=(),
        profile_core="",
        profile_adaptive="",
        background_answer="",
        frontend="",
        attached="",
    )


def fit_subject(subject: Subject, over: int) -> tuple[Subject, list[str]]:
    """Last resort when the subject alone does not fit: ``over`` tokens come out of the answer
    under judgement (from the middle, down to :data:`ANSWER_FLOOR_TOKENS`), then out of the
    user's message."""
    cuts: list[str] = []
    answer, message = subject.answer, subject.user_message
    if answer:
        size = estimate_tokens(answer)
        answer = cut_middle(answer, max(ANSWER_FLOOR_TOKENS, size - over))
        over -= size - estimate_tokens(answer)
        if answer != subject.answer:
            cuts.append("the answer under judgement cut from the middle to fit the window")
    if over > 0:
        size = estimate_tokens(message)
        message = cut_middle(message, max(0, size - over))
        cuts.append("the user's message cut from the middle to fit the window")
    return Subject(message, answer), cuts


def judging_prompt(
    ctx: BudgetContext,
    caller: str,
    instruction: Instruction,
    situation: Situation,
    subject: Subject,
    *,
    review: Sequence[str] = (),
    doubt: bool = True,
    json_schema: dict[str, Any] | None = None,
) -> list[ChatMessage]:
    """:func:`~novaberg.prompts.evaluation.judging_messages` within the caller's budget: the
    instructions and the subject whole, the situation within ``limits.situation_tokens`` and
    whatever the window leaves; the answer under judgement is cut only when nothing else helps.
    ``json_schema``: the schema the request will carry (it counts as part of the prompt)."""
    language = ctx.settings.language
    budget = Budget.of(ctx, caller)

    def build(sit: Situation, sub: Subject) -> list[ChatMessage]:
        return judging_messages(language, instruction, sit, sub, review=review, doubt=doubt)

    cuts: list[str] = []
    bare = _bare(situation)
    schema = messages_tokens((), json_schema=json_schema) - PROMPT_TOKENS
    fixed = messages_tokens(build(bare, subject)) + schema
    if fixed > budget.prompt:
        subject, cuts = fit_subject(subject, fixed - budget.prompt + _SLACK_TOKENS)
        fixed = messages_tokens(build(bare, subject)) + schema
    allowed = min(budget.situation, max(0, budget.prompt - fixed))
    measured: list[tuple[Situation, list[ChatMessage]]] = []  # the last one built, kept

    def cost(sit: Situation) -> int:
        measured[:] = [(sit, build(sit, subject))]
        return messages_tokens(measured[0][1]) + schema - fixed

    fitted, situation_cuts = fit_background(situation, allowed, cost)
    for what in [*situation_cuts, *cuts]:
        note(ctx.trace, caller, what)
    if measured and measured[0][0] is fitted:  # the prompt measured is the one sent
        return measured[0][1]
    return build(fitted, subject)


# -- history -----------------------------------------------------------------------------------
def fit_history(
    history: Sequence[ChatMessage], budget: int
) -> tuple[list[ChatMessage], str | None]:
    """The newest messages of ``history`` within ``budget`` tokens (the newest cut from the
    middle when it alone is too long), starting with a user message; and what was cut."""
    kept: list[ChatMessage] = []
    used = 0
    cut = False
    for position in range(len(history) - 1, -1, -1):
        message = history[position]
        cost = MESSAGE_TOKENS + _content_tokens(message)
        if used + cost <= budget:
            kept.append(message)
            used += cost
            continue
        if kept:
            break
        # The newest message alone is too long: cut it, leaving room for the user's message
        # it answers when there is room for both.
        room = budget - MESSAGE_TOKENS
        before = history[position - 1] if position > 0 else None
        asked = before is not None and before["role"] == "user"
        reserve = MESSAGE_TOKENS + _content_tokens(before) if before and asked else 0
        if room - reserve >= MIN_KEEP_TOKENS:
            room -= reserve
        if room < MIN_KEEP_TOKENS:
            break
        short = cut_middle(str(message.get("content", "")), room)
        kept.append({**message, "content": short})
        used += MESSAGE_TOKENS + estimate_tokens(short)
        cut = True
    kept.reverse()
    if len(kept) < len(history) or cut:
        while kept and kept[0].get("role") != "user" and len(kept) < len(history):
            kept.pop(0)  # a chat template wants the user's turn first
    if len(kept) == len(history) and not cut:
        return kept, None
    what = f"history: {len(history) - len(kept)} of {len(history)} messages left out"
    if cut:
        what += ", the newest cut from the middle"
    return kept, f"{what} (within {max(budget, 0)} tokens)"


# -- every request ------------------------------------------------------------------------------
def _shrink_to_shares(
    messages: list[ChatMessage], indexes: Sequence[int], over: int, cuts: list[str]
) -> None:
    sizes = [estimate_tokens(str(messages[i].get("content") or "")) for i in indexes]
    shares = fair_shares(sizes, sum(sizes) - over)
    for index, size, share in zip(indexes, sizes, shares, strict=True):
        if share < size:
            content = str(messages[index].get("content") or "")
            messages[index] = {**messages[index], "content": cut_middle(content, share)}
            role = messages[index].get("role", "chat")
            cuts.append(f"a message ({role}) cut from the middle")


def fit_messages(
    messages: Sequence[ChatMessage],
    budget: int,
    *,
    tools: Sequence[dict[str, Any]] = (),
    json_schema: dict[str, Any] | None = None,
) -> tuple[list[ChatMessage], list[str]]:
    """Messages within ``budget``: earlier tool results first (oldest first, down to a stub),
    then the largest non-system messages (fair shares), the instructions only when nothing else
    is left to cut; and what was cut."""
    out = [m.copy() for m in messages]
    cuts: list[str] = []

    def over() -> int:
        return messages_tokens(out, tools, json_schema) - budget

    if over() <= 0:
        return out, cuts
    tool_results = [i for i, m in enumerate(out) if m.get("role") == "tool"]
    for index in tool_results:
        excess = over()
        if excess <= 0:
            break
        content = str(out[index].get("content") or "")
        size = estimate_tokens(content)
        target = max(MIN_KEEP_TOKENS, size - excess)
        if target < size:
            out[index]["content"] = cut_middle(content, target)
            cuts.append("an earlier tool result cut from the middle")
    for system in (False, True):
        excess = over()
        if excess <= 0:
            break
        indexes = [i for i, m in enumerate(out) if (m.get("role") == "system") == system]
        _shrink_to_shares(out, indexes, excess, cuts)
    return out, cuts


def fit_request(request: ChatRequest, window: int, trace: Trace) -> ChatRequest:
    """The request as it is sent: its output limit (from :data:`OUTPUT_TOKENS` unless the node
    set one; at most half the window) and messages that fit the rest of the window."""
    limit = request.max_tokens or output_tokens(request.caller, window)
    limit = min(limit, window // 2)
    messages, cuts = fit_messages(
        request.messages, window - limit, tools=request.tools, json_schema=request.json_schema
    )
    for what in dict.fromkeys(cuts):
        note(trace, request.caller, f"{what} to fit the context window ({window} tokens)")
    if not cuts and limit == request.max_tokens:
        return request
    return replace(request, max_tokens=limit, messages=messages if cuts else request.messages)
