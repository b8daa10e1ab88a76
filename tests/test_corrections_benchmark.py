"""The scripted corrections benchmark (issue 23, ``python -m benchmarks.corrections``), run
small: corrections and retractions, English and German, through the real engine, each taking
before the next answer, no old version recalled as current or given in the next prompt, none
left in the profile. SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from benchmarks.corrections import run, script, words

from novaberg.testing import OllamaTestServer


def test_the_made_up_words_name_one_fact_each() -> None:
    made = words(400)
    assert len(set(made)) == 400
    assert not any(a.lower() in b.lower() for a in made for b in made if a != b)
    facts, changes = script(20, 5, 3)
    assert [c.kind for c in changes] == ["correct"] * 5 + ["retract"] * 3
    assert {f.language for f in facts} == {"en", "de"}
    for change in changes:  # the router only keeps a correction whose words are in the message
        assert change.fact.word in change.message
        assert change.right is None or change.right in change.message


async def test_every_scripted_correction_and_retraction_takes_and_nothing_old_comes_back(
    server: OllamaTestServer, database_target: Path | str
) -> None:
    database = database_target if isinstance(database_target, str) else None
    figures = await run(24, 6, 4, embedder="off", database=database, server=server)
    assert figures.taken_before_next_answer == 10
    assert figures.old_returned_as_current == 0
    assert figures.current_above_old == 6
    assert (figures.old_in_next_prompt, figures.new_in_next_prompt) == (0, 6)
    assert figures.profile_rests_on_old == 0
    assert figures.goals_met()
