"""``novaberg stats`` over real turns: the engine, the Ollama test server with scripted faults,
and the database (SQLite and PostgreSQL); exact counts per caller, outcome, judge, status and
job, percentiles checked against an independent computation, the window, the user filter, and
the command as a user runs it."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.errors import BackendError, UsageError
from novaberg.stats import collect, parse_since, percentile
from novaberg.storage.db import Database
from novaberg.telemetry import OUTCOMES
from novaberg.testing import OllamaTestServer, Reply

NOVABERG = [sys.executable, "-m", "novaberg"]
CHAT = Reply(content=json.dumps({"intent": "smalltalk", "tone": "warm", "needs_check": False}))
CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))
OK_VOTE = Reply(content=json.dumps({"vote": "ok", "reason": ""}))
REVISE = Reply(content=json.dumps({"vote": "revise", "reason": "too long"}))
DRAFT = "The Zugspitze is 3,100 m high."
QUESTION = "How high is the Zugspitze?"
WEEK = timedelta(days=7)


def script_quiet_defaults(server: OllamaTestServer) -> None:
    """Unless scripted otherwise: nothing is salient, every judge approves."""
    server.standing("salience", said({"score": 0.1, "summary": ""}))
    for judge in ("legal", "psychology", "persona"):
        server.standing(f"judge_{judge}", OK_VOTE)


def script_faults_of_turn_b(server: OllamaTestServer) -> None:
    """Turn B of the stats scenario (also counted by the server's /metrics test): router JSON
    malformed once, responder 500 once, the thinker's tool call dropped then prose in thinking
    and one follow-up decides; the legal judge asks for one revision; salient."""
    server.standing("router", CHECK)
    server.script("router", Reply(content="not json"))
    server.script("responder", Reply.http_error(500), Reply(content=DRAFT))
    server.script(
        "thinker",
        Reply.dropped_tool_call("launch_rockets"),
        Reply.thinking_swallowed_answer("Let me think; it is about right."),
    )
    server.script("thinker_nachfass", Reply(content="RESULT: OK"))
    server.script("judge_legal", REVISE)
    server.script("corrector", Reply(content="The Zugspitze is 2,962 m high."))
    server.script("salience", said({"score": 0.9, "summary": "Asked about the Zugspitze."}))


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


def outcomes(**counts: int) -> dict[str, int]:
    return {o: counts.get(o, 0) for o in OUTCOMES}


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command in its own process; a wide terminal, so that no line is wrapped."""
    return subprocess.run(
        [*NOVABERG, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**env, "COLUMNS": "200"},
    )


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


async def run_scenario(engine: Engine, server: OllamaTestServer) -> None:
    """Five turns and three memory jobs, each fault scripted:

    A (user bob): a plain turn, every call ok.
    B: the router's JSON is malformed once; the responder gets HTTP 500 once; the thinker's
       tool call is dropped, then its answer is prose in thinking (case 2) and one follow-up
       decides; the legal judge asks for a revision once (one correction); salient: jobs.
    C: case 2 twice over: both follow-ups malformed, last resort; its second pass (C2) runs.
    D: the responder fails on every retry: the turn fails.
    Jobs: consolidation fails on every retry; the profile succeeds; the timeline needs no
    model call (no date in the message).
    """
    script_quiet_defaults(server)
    # A
    engine.settings.user = "bob"
    server.script("router", CHAT)
    server.script("responder", Reply(content="Hallo!"))
    await engine.run_turn("Hallo Nova")
    engine.settings.user = "default"
    # B
    script_faults_of_turn_b(server)
    b = await engine.run_turn(QUESTION)
    assert b.contract_json()["thinker"]["result"] == "ok"
    assert b.contract_json()["tribunal"]["rounds"] == 2
    # C and its second pass C2
    server.script("responder", Reply(content=DRAFT), Reply(content="A second look: 2,962 m."))
    server.script(
        "thinker",
        Reply.thinking_swallowed_answer("Hmm, prose only."),
        Reply(content="RESULT: OK"),
    )
    server.script("thinker_nachfass", Reply(content="still prose"), Reply(content="more prose"))
    c = await engine.run_turn(QUESTION)
    assert c.contract_json()["thinker"]["result"] == "last_resort"
    assert len(c.followups) == 1
    # D
    server.script("responder", *[Reply.http_error(500)] * engine.settings.retries.attempts)
    with pytest.raises(BackendError):
        await engine.run_turn("Are you there?")
    # the jobs of B's memory item
    server.standing("consolidate", Reply.http_error(500))
    statement = {"text": "Curious about mountains.", "sources": [b.memory_id]}
    server.script("profile_adaptive", said({"statements": [statement]}))
    done = await engine.finish_background()
    assert sorted((o.type, o.status) for o in done) == [
        ("consolidate", "failed"),
        ("profile_adaptive", "done"),
        ("timeline", "done"),
    ]


def shift_turn(db: Database, turn_id: int, days: int) -> None:
    """Move a turn and its calls ``days`` into the past."""
    then = (datetime.now(UTC) - timedelta(days=days)).isoformat(timespec="milliseconds")
    with db.transaction() as c:
        c.execute("UPDATE turns SET started_at = ? WHERE id = ?", (then, turn_id))
        c.execute("UPDATE llm_calls SET created_at = ? WHERE turn_id = ?", (then, turn_id))


def independent_percentiles(db: Database, caller: str) -> tuple[float, float]:
    """p50 and p95 of one caller's durations, not by :func:`novaberg.stats.percentile`:
    PostgreSQL's own percentile_cont there, Python's statistics module on SQLite."""
    if db.dialect == "postgres":
        row = db.one(
            "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) AS p50, "
            "percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) AS p95 "
            "FROM llm_calls WHERE caller = ?",
            (caller,),
        )
        assert row is not None
        return float(row["p50"]), float(row["p95"])
    values = [
        r["duration_ms"]
        for r in db.query("SELECT duration_ms FROM llm_calls WHERE caller = ?", (caller,))
    ]
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return cuts[49], cuts[94]


async def test_stats_count_every_defence_of_real_turns_exactly(
    engine: Engine, server: OllamaTestServer, database_target: Path | str
) -> None:
    await run_scenario(engine, server)
    stats = collect(engine.db, WEEK).contract_json()
    by_caller = {(c["caller"], c["backend"]): c for c in stats["calls"]}
    counted = {k[0]: (c["count"], c["outcomes"]) for k, c in by_caller.items()}
    attempts = engine.settings.retries.attempts
    assert {k[1] for k in by_caller} == {"ollama"}
    assert counted == {
        "router": (6, outcomes(ok=5, malformed=1)),
        "responder": (4 + 1 + attempts, outcomes(ok=4, error=1 + attempts)),
        "thinker": (4, outcomes(ok=1, dropped_tool_call=1, think_split_prose=2)),
        "thinker_nachfass": (3, outcomes(ok=1, malformed=2)),
        "judge_legal": (5, outcomes(ok=5)),
        "judge_psychology": (5, outcomes(ok=5)),
        "judge_persona": (5, outcomes(ok=5)),
        "corrector": (1, outcomes(ok=1)),
        "salience": (3, outcomes(ok=3)),  # a second pass scores nothing
        "consolidate": (attempts, outcomes(error=attempts)),
        "profile_adaptive": (1, outcomes(ok=1)),
    }
    assert [c["caller"] for c in stats["calls"]] == sorted(counted)
    assert stats["turns"] == {"done": 4, "failed": 1}
    assert stats["thinker"] == {"last_resort": 1, "ok": 2}
    assert stats["followup_calls"] == {"calls": 3, "turns": 2}
    assert stats["last_resorts"] == {"count": 1, "second_passes": {"delivered": 1}}
    votes = {"votes": 5, "revise": 0, "corrections": 0, "abstained": 0, "malformed": 0}
    assert stats["corrections"] == {
        "legal": {**votes, "revise": 1, "corrections": 1},
        "persona": votes,
        "psychology": votes,
    }
    assert stats["jobs"] == {
        "consolidate": {"failed": 1},
        "profile_adaptive": {"done": 1},
        "timeline": {"done": 1},
    }
    for caller in ("router", "responder", "salience"):
        p50, p95 = independent_percentiles(engine.db, caller)
        row = by_caller[(caller, "ollama")]
        assert row["p50_ms"] == round(p50, 1) and row["p95_ms"] == round(p95, 1)

    # the user filter: bob's plain turn alone
    bob = collect(engine.db, WEEK, user="bob").contract_json()
    assert bob["turns"] == {"done": 1}
    assert [(c["caller"], c["count"]) for c in bob["calls"]] == [
        ("judge_legal", 1),
        ("judge_persona", 1),
        ("judge_psychology", 1),
        ("responder", 1),
        ("router", 1),
        ("salience", 1),
    ]
    assert bob["jobs"] == {} and bob["last_resorts"]["count"] == 0
    mine = collect(engine.db, WEEK, user="default").contract_json()
    assert mine["turns"] == {"done": 3, "failed": 1}
    assert mine["jobs"] == stats["jobs"]  # jobs belong to their turn's conversation

    # the window: bob's turn moved ten days back leaves the week, stays in the month
    [bobs] = engine.db.query(
        "SELECT t.id FROM turns t JOIN conversations v ON v.id = t.conversation_id "
        "WHERE v.user_id = 'bob'"
    )
    shift_turn(engine.db, bobs["id"], days=10)
    week = collect(engine.db, WEEK).contract_json()
    assert week["turns"] == {"done": 3, "failed": 1}
    assert {c["caller"]: c["count"] for c in week["calls"]}["router"] == 5
    assert collect(engine.db, timedelta(days=30)).contract_json()["turns"] == stats["turns"]
    bob_week = collect(engine.db, WEEK, user="bob")
    assert bob_week.empty and bob_week.older_records

    # the command as a user runs it prints the same figures
    env = dict(os.environ)
    done = run_cli("stats", "--json", "--since", "30d", env=env)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["calls"] == stats["calls"] and printed["turns"] == stats["turns"]
    shown = run_cli("stats", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "thinker_nachfass" in shown.stdout
    assert "dropped_tool_call 1 (25%)" in shown.stdout
    assert "Last resorts: 1 (second passes: delivered 1)" in shown.stdout


def test_an_empty_database_says_there_is_nothing_yet(
    database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    env = dict(os.environ)
    done = run_cli("stats", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Nothing recorded yet in the last 7d.")
    as_json = run_cli("stats", "--json", env=env)
    assert as_json.returncode == 0, as_json.stderr
    out = json.loads(as_json.stdout)
    assert out["calls"] == [] and out["turns"] == {}


def test_a_bad_since_is_a_usage_error() -> None:
    done = run_cli("stats", "--since", "7 weeks", env=dict(os.environ))
    assert done.returncode == 2
    assert "usage error" in done.stderr and "7d, 24h or 30m" in done.stderr


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("7d", timedelta(days=7)),
        ("24h", timedelta(hours=24)),
        ("30m", timedelta(minutes=30)),
        (" 2d ", timedelta(days=2)),
    ],
)
def test_since_parses_days_hours_and_minutes(text: str, span: timedelta) -> None:
    assert parse_since(text) == span


@pytest.mark.parametrize("text", ["", "7", "d", "0d", "-1d", "1w", "1.5h", "7d ago", "[/b]"])
def test_since_refuses_anything_else(text: str) -> None:
    with pytest.raises(UsageError):
        parse_since(text)


def test_percentiles_interpolate_between_ranks_like_percentile_cont() -> None:
    assert percentile([], 0.5) == 0.0
    assert percentile([7.0], 0.95) == 7.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.5) == 25.0
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.95) == pytest.approx(38.5)
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 0.95) == pytest.approx(95.05)


def test_names_from_the_database_are_printed_as_text(isolated_env: Path) -> None:
    """A judge's name (custom judges are named by the user) never becomes markup."""
    hostile = "[/b]x[link=https://example.invalid]y[/link]"
    db = Database(isolated_env / "novaberg.db")
    try:
        turn = db.start_turn(db.new_conversation("default"), "x")
        vote = {"judge": hostile, "vote": "revise", "reason": "", "malformed": False}
        trace = {"tribunal": {"rounds": 1, "votes": [vote], "history": [[vote]]}}
        with db.transaction() as c:
            c.execute(
                "UPDATE turns SET status = 'done', trace_json = ? WHERE id = ?",
                (json.dumps(trace), turn),
            )
    finally:
        db.close()
    done = run_cli("stats", env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    assert hostile in done.stdout


def test_a_window_longer_than_the_calendar_means_everything(tmp_path: Path) -> None:
    db = Database(tmp_path / "n.db")
    try:
        db.start_turn(db.new_conversation("default"), "x")
        stats = collect(db, parse_since("999999d"))
        assert stats.turns == {"running": 1} and stats.since.year == 1
    finally:
        db.close()


def test_stats_read_traces_they_cannot_parse_without_failing(tmp_path: Path) -> None:
    """A forgotten turn's trace is ``{"forgotten": true}``; a damaged one is skipped."""
    db = Database(tmp_path / "n.db")
    try:
        conversation = db.new_conversation("default")
        for trace in ('{"forgotten": true}', "not json", "[1, 2]"):
            turn = db.start_turn(conversation, "x")
            with db.transaction() as c:
                c.execute(
                    "UPDATE turns SET status = 'done', trace_json = ? WHERE id = ?",
                    (trace, turn),
                )
        stats = collect(db, WEEK)
        assert stats.turns == {"done": 3}
        assert stats.thinker == {} and stats.corrections == {}
    finally:
        db.close()
