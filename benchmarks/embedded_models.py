"""The packaged embedded models side by side, on the prompts Novaberg really sends.

``python -m benchmarks.embedded_models`` (``make bench-embedded``) runs each packaged model
(``smollm2-135m``, ``gemma3-270m``) through Novaberg's embedded backend on:

- three chat turns with the responder's real system prompt: a greeting in English, a greeting in
  German (German prompts), and a personal message; each with ``--seeds`` seeds. A reply counts
  as an ECHO when the echo guard finds a run of instruction words in it (what the responder then
  regenerates or cuts); as PROMPT-LIKE when it carries chat markup or a line that instructs like
  the system prompt ("You are …", "Antworte …"): the model continues the prompt; as PARROT
  when it repeats five or more words of the user's message in a row; as IN ROLE when it is
  none of these and is written in the language asked for (a crude word check);
- the router's and salience's structured calls with their real prompts (three messages for the
  router, a salient one and a greeting for salience): VALID when the reply parses as the node's
  output model (what the node would accept); salience's score RIGHT when it is at or above the
  default threshold (0.6) for the salient message and below it for the greeting.

Tokens per second: generated pieces over the whole call's wall time (prompt reading included,
the model loaded before), the median over the chat turns. Kept small (few prompts, short
replies, 2 threads): other work shares these cores. The models take turns prompt by prompt, so
a change of load hits both alike. Prints a Markdown table (the README's "Embedded model"
table) and writes ``bench-results/embedded_models.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from novaberg.backends.base import ChatRequest
from novaberg.backends.embedded import PACKAGED, EmbeddedBackend
from novaberg.config import EmbeddedModel, Timeouts
from novaberg.echo import EchoGuard
from novaberg.nodes.responder import instruction_texts
from novaberg.nodes.router import RouterOutput
from novaberg.prompts.evaluation import Instruction, Situation, Subject, judging_messages
from novaberg.prompts.salience import OUTPUT, ROLE, SalienceOutput
from novaberg.prompts.templates import Prompts, prompts_for
from novaberg.structured import parse_json_object, schema_of

CHATS = [
    ("greeting (en)", "en", "Hello Nova! How are you today?"),
    ("greeting (de)", "de", "Hallo Nova! Wie geht es dir heute?"),
    (
        "personal (en)",
        "en",
        "My sister Lena moves to Lisbon next week and I will miss her. How do I say goodbye?",
    ),
]
ROUTED = ["Can you check how high the Zugspitze is?", "What time is it?", "Hallo Nova!"]
SALIENCE = [  # (message, Nova's answer, whether it is worth remembering: score >= 0.6)
    (
        "My sister Lena moves to Lisbon next week and I will miss her terribly.",
        "That is hard.",
        True,
    ),
    ("Hello Nova!", "Hello! How are you?", False),
]
PROMPT_LIKE = re.compile(
    r"<\|?(im_start|im_end|start_of_turn|end_of_turn)|^\s*(user|assistant|model)\s*:?\s*$"
    r"|^\s*(you are|du bist|answer in|antworte)\b",
    re.M | re.I,
)
"""Chat markup, a turn label alone on a line, or a line that instructs like the system prompt
("You are …", "Answer in …"): the model continues the prompt instead of answering it."""
PARROT_WORDS = 5
"""Words of the user's message in a row that make a reply a parrot of it."""
LANGUAGE_WORDS = {
    "en": {"i", "you", "the", "and", "is", "to", "it", "my", "your", "how", "are", "what", "hi"},
    "de": {"ich", "du", "dir", "mir", "und", "ist", "es", "nicht", "das", "gut", "danke", "wie"},
}


def responder_messages(prompts: Prompts, text: str) -> list[dict[str, Any]]:
    """The responder's messages on a first turn with nothing remembered yet."""
    system = f"{prompts.persona}\n\n{prompts.tone_line.format(tone='warm')}"
    return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def router_messages(text: str) -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": prompts_for("en").router},
        {"role": "user", "content": text},
    ]


def salience_messages(text: str, answer: str) -> list[dict[str, Any]]:
    """Salience's messages (instruction, situation with Nova's answer, subject last)."""
    situation = Situation.from_state({"reply": answer}, with_answer=True)
    instruction = Instruction(role=ROLE["en"], output=OUTPUT["en"])
    return judging_messages("en", instruction, situation, Subject(text), doubt=False)


def in_language(reply: str, language: str) -> bool:
    words = set(re.findall(r"\w+", reply.casefold()))
    return len(words & LANGUAGE_WORDS[language]) >= 2


async def _call(backend: EmbeddedBackend, request: ChatRequest) -> tuple[str, int, float]:
    started = time.perf_counter()
    response = await backend.chat(request)
    return response.content, response.eval_count, time.perf_counter() - started


def judge_chat(reply: str, language: str, user_text: str) -> dict[str, bool]:
    """The chat reply's figures: echo, prompt-like, parrot, in role."""
    echo = EchoGuard(instruction_texts(prompts_for(language))).find(reply) is not None
    prompt_like = bool(PROMPT_LIKE.search(reply))
    parrot = EchoGuard([user_text], words=PARROT_WORDS).find(reply) is not None
    in_role = not (echo or prompt_like or parrot) and in_language(reply, language)
    return {"echo": echo, "prompt_like": prompt_like, "parrot": parrot, "in_role": in_role}


async def measure(
    names: list[EmbeddedModel], home: Path, seeds: int, max_tokens: int, threads: int
) -> list[dict[str, Any]]:
    """Every prompt on every model in turn (rotating the order), so that a change of load on
    a shared machine hits both models alike."""
    backends = {
        name: EmbeddedBackend(home, Timeouts(), n_ctx=2048, n_threads=threads, packaged=name)
        for name in names
    }
    chats: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    structured: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    turn = 0
    try:
        warm_up = ChatRequest(caller="bench", messages=[{"role": "user", "content": "Hi"}])
        for backend in backends.values():  # load each model before anything is timed
            await _call(backend, replace(warm_up, max_tokens=1))
        for label, language, text in CHATS:
            messages = responder_messages(prompts_for(language), text)
            for seed in range(1, seeds + 1):
                request = ChatRequest(
                    caller="responder", messages=messages, max_tokens=max_tokens, seed=seed
                )
                turn += 1
                for name in names[turn % len(names) :] + names[: turn % len(names)]:
                    reply, tokens, seconds = await _call(backends[name], request)
                    chats[name].append(
                        {
                            "prompt": label,
                            "seed": seed,
                            **judge_chat(reply, language, text),
                            "tokens": tokens,
                            "seconds": round(seconds, 2),
                            "reply": reply,
                        }
                    )
        asks: list[tuple[str, list[dict[str, Any]], type[BaseModel], bool | None]] = [
            ("router", router_messages(text), RouterOutput, None) for text in ROUTED
        ]
        asks += [
            ("salience", salience_messages(text, answer), SalienceOutput, keep)
            for text, answer, keep in SALIENCE
        ]
        for caller, messages, model, keep in asks:
            request = ChatRequest(
                caller=caller,
                messages=messages,
                json_schema=schema_of(model),
                temperature=0.0,
                max_tokens=96,
            )
            for name in names:
                reply, _, seconds = await _call(backends[name], request)
                parsed = parse_json_object(reply, model)
                score = getattr(parsed, "score", None)
                structured[name].append(
                    {
                        "caller": caller,
                        "valid": parsed is not None,
                        "plausible": None
                        if keep is None
                        else score is not None and (score >= 0.6) == keep,
                        "parsed": parsed.model_dump() if parsed else None,
                        "seconds": round(seconds, 2),
                        "reply": reply,
                    }
                )
    finally:
        for backend in backends.values():
            await backend.aclose()
    results = []
    for name in names:
        speeds = [r["tokens"] / r["seconds"] for r in chats[name] if r["seconds"] > 0]
        results.append(
            {
                "model": name,
                "file": backends[name].model,
                "chats": chats[name],
                "structured": structured[name],
                "tokens_per_s_median": round(statistics.median(speeds), 1) if speeds else 0.0,
            }
        )
    return results


def _share(rows: list[dict[str, Any]], key: str, **where: str) -> str:
    chosen = [r for r in rows if all(r[k] == v for k, v in where.items())]
    return f"{sum(bool(r[key]) for r in chosen)}/{len(chosen)}"


def table(results: list[dict[str, Any]]) -> str:
    labels = [label for label, _, _ in CHATS]
    head = ["model", *(f"{label}: in role" for label in labels)]
    head += ["echoes", "prompt-like", "parrots"]
    head += ["router JSON valid", "salience JSON valid", "salience score right", "tokens/s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for result in results:
        rows, asks = result["chats"], result["structured"]
        cells = [PACKAGED[result["model"]].label + f" (`{result['model']}`)"]
        cells += [_share(rows, "in_role", prompt=label) for label in labels]
        cells += [_share(rows, "echo"), _share(rows, "prompt_like"), _share(rows, "parrot")]
        cells += [_share(asks, "valid", caller="router"), _share(asks, "valid", caller="salience")]
        cells += [_share(asks, "plausible", caller="salience")]
        cells += [str(result["tokens_per_s_median"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default=",".join(PACKAGED), help="comma-separated")
    parser.add_argument("--seeds", type=int, default=5, help="seeds per chat prompt")
    parser.add_argument("--max-tokens", type=int, default=64, help="per chat reply")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("bench-results/embedded_models.json"))
    args = parser.parse_args()
    names: list[Any] = args.models.split(",")
    unknown = [name for name in names if name not in PACKAGED]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(PACKAGED)}")
    with tempfile.TemporaryDirectory() as home:
        results = asyncio.run(measure(names, Path(home), args.seeds, args.max_tokens, args.threads))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", "utf-8")
    for result in results:
        print(f"\n## {result['model']} ({result['file']})")
        for row in result["chats"]:
            flags = "".join(
                f"{flag.upper()} " for flag in ("echo", "prompt_like", "parrot") if row[flag]
            )
            flags += "in role " if row["in_role"] else "off role "
            print(f"- {row['prompt']} seed {row['seed']}: {flags}{row['reply'][:160]!r}")
        for row in result["structured"]:
            verdict = "valid" if row["valid"] else "INVALID"
            print(f"- {row['caller']}: {verdict} {row['reply']!r}")
    print()
    print(table(results))


if __name__ == "__main__":
    main()
