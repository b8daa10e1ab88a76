"""The stored trace document (novaberg.trace_document): written as it always was, read back
whatever an older version or a hand wrote."""

from __future__ import annotations

import json

from novaberg.graph.channels import Ballot, Chosen, Court, Salience, ThinkerRun
from novaberg.trace_document import CourtTrace, GivenTrace, TraceDocument, VoteTrace


def _document() -> TraceDocument:
    ok = Ballot(judge="persona", vote="ok", reason="warm")
    failed = Ballot(judge="facts", vote="abstained", reason="", abstained=True)
    return TraceDocument(
        nodes=["router", "enricher", "responder"],
        retrieval=[
            Chosen(tokens=12, reason="fact: words", id=7, score=0.5).view(),
            Chosen(tokens=9, reason="conversation", message_id=3).view(),
        ],
        salience=Salience(score=0.9, summary="likes bees").view(),
        thinker=ThinkerRun(iterations=1, followup_calls=0, result="ok", recalled=(4,)).view(),
        tribunal=Court(
            rounds=1, votes=(ok, failed), history=((ok, failed),), correcting=False
        ).view(),
        answered_by="ollama/qwen3:4b",
        call_sent_ms=[0.0, 12.5, None],
    )


def test_a_trace_reads_back_as_it_was_written() -> None:
    document = _document()
    assert TraceDocument.read(document.text()) == document


def test_a_flag_a_stage_did_not_set_is_not_written() -> None:
    stored = json.loads(_document().text())
    persona, facts = stored["tribunal"]["votes"]
    assert "abstained" not in persona and facts["abstained"] is True
    assert stored["salience"] == {"score": 0.9, "summary": "likes bees"}  # no malformed, failed
    # an item keeps its score, a message has none; the thinker's recalled item its id alone
    assert stored["retrieval"] == [
        {"id": 7, "score": 0.5, "tokens": 12, "reason": "fact: words"},
        {"message_id": 3, "tokens": 9, "reason": "conversation"},
    ]
    assert stored["thinker"]["recalled"] == [{"id": 4}]
    assert "origin" not in stored and "forgotten" not in stored  # parts nobody set


def test_the_stored_text_spells_ids_as_the_forget_filter_looks_for_them() -> None:
    text = _document().text()
    assert '"id": 7' in text and '"message_id": 3' in text  # LIKE '%"id": 7%'


def test_a_remembered_statement_and_a_forgotten_turn_store_only_their_marks() -> None:
    assert json.loads(TraceDocument(origin="remember", via="MCP").text()) == {
        "origin": "remember",
        "via": "MCP",
    }
    assert TraceDocument(forgotten=True).text() == '{"forgotten": true}'


def test_what_is_not_a_trace_reads_as_an_empty_one() -> None:
    for text in (None, "", "not json", "[1, 2]", '"a string"', "{"):
        assert TraceDocument.read(text) == TraceDocument()


def test_a_part_that_does_not_read_is_left_out_and_the_others_kept() -> None:
    text = json.dumps({"nodes": ["router"], "thinker": {"recalled": 5}, "notices": ["n"]})
    read = TraceDocument.read(text)
    assert read.thinker is None
    assert (read.nodes, read.notices) == (["router"], ["n"])


def test_an_older_trace_without_the_rounds_history_reads_its_last_round() -> None:
    text = json.dumps({"tribunal": {"rounds": 1, "votes": [{"judge": "persona", "vote": "ok"}]}})
    court = TraceDocument.read(text).tribunal
    assert court == CourtTrace(rounds=1, votes=[VoteTrace(judge="persona", vote="ok")])
    assert court.every_round() == [[VoteTrace(judge="persona", vote="ok")]]


def test_what_a_turn_drew_on_is_retrieval_and_what_the_thinker_recalled() -> None:
    assert _document().given() == [
        GivenTrace(id=7, score=0.5, tokens=12, reason="fact: words"),
        GivenTrace(message_id=3, tokens=9, reason="conversation"),
        GivenTrace(id=4),
    ]
