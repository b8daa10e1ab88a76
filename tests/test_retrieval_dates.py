"""The date signal: a question naming a day or a month ("on 7 July, 2023", "in August")
prefers, among what its words and meaning found, what was told then (issue 22; both
databases). It reorders, never finds by the date alone."""

from __future__ import annotations

from datetime import UTC, datetime

from novaberg.memory.dates import Named, named_dates
from novaberg.memory.retrieval import Retriever
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database


def _add(db: Database, user: str, told: list[tuple[str, datetime]]) -> list[int]:
    ids = []
    with db.transaction() as c:
        for n, (text, at) in enumerate(told):
            stamp = at.isoformat(timespec="milliseconds")
            ids.append(
                MemoryStore.add(c, user, "short_term", text, 0.5, f"d:{n}", valid_from=stamp).id
            )
    return ids


def _found(db: Database, user: str, question: str) -> list[tuple[int, str]]:
    retriever = Retriever(MemoryStore(db), budget_tokens=10**6, max_items=10)
    return [(r.item.id, r.reason) for r in retriever.retrieve(user, question)]


def test_named_dates_reads_days_months_and_iso_dates_in_english_and_german() -> None:
    assert named_dates("What did I cook on 7 July, 2023?") == [Named(7, 2023, 7)]
    assert named_dates("What did Tim share on October 13, 2023?") == [Named(10, 2023, 13)]
    assert named_dates("the book he finished on 8th December, 2023") == [Named(12, 2023, 8)]
    assert named_dates("What happened in August 2023?") == [Named(8, 2023)]
    assert named_dates("Where did we go camping in July?") == [Named(7)]
    assert named_dates("Was war am 14. Juni?") == [Named(6, None, 14)]
    assert named_dates("the meeting of 2023-05-03") == [Named(5, 2023, 3)]
    assert named_dates("Who came to dinner on May 3, 2023?") == [Named(5, 2023, 3)]


def test_may_and_short_month_names_need_a_day_or_a_year_beside_them() -> None:
    assert named_dates("May I ask what my sister's name is?") == []
    assert named_dates("Which dec did we mar?") == []
    assert named_dates("What is my favourite food?") == []


def test_a_named_day_holds_a_day_either_side_and_a_month_without_year_holds_every_year() -> None:
    day = Named(7, 2023, 7)
    assert day.holds("2023-07-07T13:56:00.000+00:00")
    assert day.holds("2023-07-08T01:00:00.000+00:00")
    assert not day.holds("2023-07-10T13:56:00.000+00:00")
    assert Named(7).holds("2021-07-30T09:00:00.000+00:00")
    assert not Named(7, 2023).holds("2022-07-30T09:00:00.000+00:00")


def test_the_item_told_on_the_day_the_question_names_comes_first(db: Database) -> None:
    # both match the question's words equally; without the date the newer would come first
    july, august = _add(
        db,
        "ada",
        [
            ("I cooked a risotto with mushrooms", datetime(2023, 7, 7, 13, 56, tzinfo=UTC)),
            ("I cooked a risotto with tomatoes", datetime(2023, 8, 20, 13, 56, tzinfo=UTC)),
        ],
    )
    found = _found(db, "ada", "Which risotto did I cook on 7 July, 2023?")
    assert [i for i, _ in found][:2] == [july, august]
    assert "date: told on 7 July 2023, as asked (rank 1)" in found[0][1]
    undated = _found(db, "ada", "Which risotto did I cook?")
    assert [i for i, _ in undated][:2] == [august, july]


def test_a_month_named_without_a_year_prefers_that_month_of_any_year(db: Database) -> None:
    july, _ = _add(
        db,
        "ada",
        [
            ("We went camping by the lake", datetime(2022, 7, 15, tzinfo=UTC)),
            ("We went camping in the hills", datetime(2023, 3, 2, tzinfo=UTC)),
        ],
    )
    assert next(i for i, _ in _found(db, "ada", "Where did we go camping in July?")) == july


def test_an_item_is_never_found_by_the_named_date_alone(db: Database) -> None:
    _, risotto = _add(
        db,
        "ada",
        [
            ("The plumber fixed the sink", datetime(2023, 7, 7, tzinfo=UTC)),
            ("I cooked a risotto", datetime(2023, 8, 1, tzinfo=UTC)),
        ],
    )
    found = _found(db, "ada", "Which risotto did I cook on 7 July, 2023?")
    assert [i for i, _ in found] == [risotto]
    assert "date:" not in found[0][1]


def _say(db: Database, user: str, told: list[tuple[str, datetime]]) -> None:
    """Each text as the user's message of a finished turn of its own conversation."""
    with db.transaction() as c:
        for text, at in told:
            stamp = at.isoformat(timespec="milliseconds")
            chat = c.execute(
                "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
                (user, stamp),
            ).rows[0]["id"]
            turn = c.execute(
                "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
                "finished_at) VALUES (?, 'user', ?, 'done', ?, ?) RETURNING id",
                (chat, text, stamp, stamp),
            ).rows[0]["id"]
            c.execute(
                "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
                "VALUES (?, ?, 'user', ?, ?)",
                (chat, turn, text, stamp),
            )


def test_a_message_said_on_the_day_the_question_names_comes_first(db: Database) -> None:
    july = "I cooked a risotto with mushrooms and a little thyme from the balcony garden"
    august = "I cooked a risotto"
    _say(
        db,
        "ada",
        [(july, datetime(2023, 7, 7, 19, tzinfo=UTC)), (august, datetime(2023, 8, 20, tzinfo=UTC))],
    )
    retriever = Retriever(MemoryStore(db))
    undated = retriever.heard("ada", "Which risotto did I cook?", 2)
    assert [h.message.text for h in undated] == [august, july]  # the shorter match ranks first
    [first] = retriever.heard("ada", "Which risotto did I cook on 7 July, 2023?", 1)
    assert first.message.text == july
    assert "said on 7 July 2023" in first.reason
