"""The LoCoMo benchmark (benchmarks/locomo.py) on a few questions: it runs through Nova's real
retrieval, scores the turns it finds, and says clearly when its data is absent or malformed.
The figures belong to the benchmark; this only checks that it measures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.locomo import DATA, LocomoDataError, load, run


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


@pytest.mark.skipif(not DATA.is_dir(), reason=f"the LoCoMo development set is not at {DATA}")
def test_nova_finds_the_evidence_turns_of_a_few_locomo_questions() -> None:
    result = run(DATA, ["26"], questions=12)
    assert set(result["results"]) == {"nova", "fulltext", "vectors", "rrf"}
    nova = result["results"]["nova"]["1-4"]
    assert nova["questions"] == 12
    assert nova["hit@10"] >= 0.5
    assert nova["recall@5"] >= result["results"]["vectors"]["1-4"]["recall@5"]
