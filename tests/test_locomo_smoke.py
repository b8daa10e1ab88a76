"""The LoCoMo benchmark (benchmarks/locomo.py) on a few questions: it runs through Nova's real
retrieval, scores the turns it finds, and says clearly when its data is absent or malformed.
The figures belong to the benchmark; this only checks that it measures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.locomo import LocomoDataError, load, run


def test_an_absent_data_folder_is_named_in_a_clear_message(tmp_path: Path) -> None:
    with pytest.raises(LocomoDataError, match="not there") as caught:
        load(tmp_path / "locomo-dev")
    assert str(tmp_path / "locomo-dev") in str(caught.value)


def test_a_malformed_conversation_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "26.json").write_text(json.dumps({"speaker_a": "A", "qa": []}), encoding="utf-8")
    (tmp_path / "41.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(LocomoDataError, match=r"26\.json"):
        load(tmp_path, ["26"])
    with pytest.raises(LocomoDataError, match=r"41\.json"):
        load(tmp_path, ["41"])


def _conversation() -> dict[str, object]:
    """A small conversation of our own in LoCoMo's shape (its fields, dates and evidence ids;
    the real data stays in ../shared/data and is the benchmark's)."""
    said = [
        ("Ada", "I finally bought a car last week, a little blue Prius."),
        ("Ben", "Nice! I spent the weekend repairing my bicycle chain."),
        ("Ada", "My sister Clara moved to Lisbon for her new job."),
        ("Ben", "I adopted a grey cat from the shelter and named her Pebble."),
        ("Ada", "We hiked up the mountain near Graz on Sunday."),
        ("Ben", "The concert of the city orchestra was wonderful."),
    ]
    sessions: dict[str, object] = {}
    for n, start in ((1, 0), (2, 3)):
        sessions[f"session_{n}_date_time"] = f"1:56 pm on {n + 7} May, 2023"
        sessions[f"session_{n}"] = [
            {"speaker": who, "dia_id": f"D{n}:{i + 1}", "text": text}
            for i, (who, text) in enumerate(said[start : start + 3])
        ]
    return {
        "speaker_a": "Ada",
        "speaker_b": "Ben",
        **sessions,
        "qa": [
            {
                "question": "What car did Ada buy?",
                "answer": "Prius",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "Where did Clara move?",
                "answer": "Lisbon",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What is the name of Ben's cat?",
                "answer": "Pebble",
                "evidence": ["D2:1"],
                "category": 4,
            },
            {
                "question": "Which mountain did Ada hike?",
                "answer": "near Graz",
                "evidence": ["D2:2"],
                "category": 1,
            },
        ],
    }


def test_nova_and_the_textbook_retrievers_are_scored_on_a_conversation(tmp_path: Path) -> None:
    (tmp_path / "1.json").write_text(json.dumps(_conversation()), encoding="utf-8")
    result = run(tmp_path, ["1"], questions=4)
    assert set(result["results"]) == {"nova", "fulltext", "vectors", "rrf", "history"}
    nova = result["results"]["nova"]["1-4"]
    assert nova["questions"] == 4
    assert nova["hit@5"] == 1.0  # each question shares a rare word with its one turn
    assert result["results"]["fulltext"]["1-4"]["hit@5"] == 1.0
    # the second way in: the same turns as conversation history, found as stored messages
    assert result["results"]["history"]["1-4"]["hit@5"] == 1.0
