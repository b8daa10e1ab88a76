"""The think/content split normaliser and the control-line protocol."""

from __future__ import annotations

from novaberg.backends.base import ChatResponse
from novaberg.thinking import (
    ThinkingNormalizer,
    ThinkSplitNormalizer,
    normalizer_for,
    parse_control,
)


def test_control_lines_are_parsed_in_english_and_german() -> None:
    tool = parse_control('Let me check.\nTOOL: web_search({"query": "Zugspitze Höhe"})')
    assert tool is not None and tool.kind == "tool" and tool.tool == "web_search"
    assert tool.arguments == {"query": "Zugspitze Höhe"}
    ok = parse_control("All good.\nRESULT: OK")
    assert ok is not None and ok.kind == "ok"
    german = parse_control("Passt.\nERGEBNIS: OK")
    assert german is not None and german.kind == "ok"
    revised = parse_control("RESULT: REVISED\nThe Zugspitze is 2,962 m high.")
    assert revised is not None and revised.kind == "revised"
    assert revised.answer == "The Zugspitze is 2,962 m high."
    assert parse_control("Just prose, no decision.") is None


def test_invalid_tool_arguments_are_reported_not_guessed() -> None:
    control = parse_control("TOOL: web_search(query=Zugspitze)")
    assert control is not None and control.kind == "tool" and control.arguments is None


def test_case_1_control_line_at_the_end_of_thinking_is_moved() -> None:
    response = ChatResponse(content="", thinking="Long reasoning...\nRESULT: OK", backend="ollama")
    normalized = ThinkSplitNormalizer().normalize(response)
    assert normalized.outcome == "think_split_moved"
    assert normalized.content == "RESULT: OK"


def test_case_1_keeps_a_revised_answer_after_the_control_line() -> None:
    response = ChatResponse(
        content="", thinking="The draft is wrong.\nRESULT: REVISED\nIt is 2962 m."
    )
    normalized = ThinkSplitNormalizer().normalize(response)
    assert normalized.outcome == "think_split_moved"
    assert normalized.content == "RESULT: REVISED\nIt is 2962 m."


def test_case_2_prose_only_is_reported_for_a_follow_up() -> None:
    response = ChatResponse(content="", thinking="I checked it and the draft is wrong because...")
    normalized = ThinkSplitNormalizer().normalize(response)
    assert normalized.outcome == "think_split_prose" and normalized.content == ""


def test_content_present_is_used_as_it_came() -> None:
    response = ChatResponse(content="RESULT: OK", thinking="some prose")
    assert ThinkSplitNormalizer().normalize(response).outcome == "ok"


def test_the_noop_normalizer_never_reads_thinking() -> None:
    response = ChatResponse(content="", thinking="prose\nRESULT: OK")
    normalized = ThinkingNormalizer().normalize(response)
    assert normalized.outcome == "empty_answer" and normalized.content == ""


def test_the_factory_keys_on_the_answering_backend() -> None:
    assert isinstance(normalizer_for("ollama", "qwen3:4b"), ThinkSplitNormalizer)
    fallback = normalizer_for("openai", "qwen3:4b")  # same model name, another server answered
    assert type(fallback) is ThinkingNormalizer
    assert type(normalizer_for("embedded", "gemma-3-270m-q4_k_m")) is ThinkingNormalizer
