"""The days a message names: "on 7 July, 2023", "October 13, 2023", "in August 2023", "am
14. Juni", "2023-05-03", "in July" — for retrieval, which prefers what was told then.

Read word by word, as :mod:`novaberg.proactive.when` reads a reminder (no pattern is built from
the text): a month name with a day before or after it, a year, or both; an ISO date. A month
named alone counts when its name cannot be an ordinary word ("July" does, "May" and "Mar" do
not: "may" needs a day or a year beside it). A month without a year is that month of any year.
Relative days ("yesterday", "last week") are not read here: they name a day only against the
time the question is asked, and what Nova was told is dated by when it was told.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from novaberg.proactive.when import MONTHS

_ALONE = frozenset(name for name in MONTHS if len(name) > 3 and name != "sept")
"""Month names that name a month by themselves: the full names but "may" and "mai" (not the
short forms "jan", "mar", …), which need a day or a year beside them."""
_TOKEN = re.compile(r"\d{4}-\d{2}-\d{2}|\w+", re.UNICODE)
_DAY = re.compile(r"(\d{1,2})(?:st|nd|rd|th)?")
_YEAR = re.compile(r"(?:19|20)\d{2}")


@dataclass(frozen=True)
class Named:
    """A day or a month a message names; ``year`` ``None``: that month of any year."""

    month: int
    year: int | None = None
    day: int | None = None

    def holds(self, at: str, slack_days: int = 1) -> bool:
        """Whether the stored time ``at`` (ISO 8601) falls on it: a named day with
        ``slack_days`` either side (a time zone apart, or the evening before); a month
        within the month."""
        when = datetime.fromisoformat(at).date()
        if self.day is None:
            return when.month == self.month and self.year in (None, when.year)
        years = [self.year] if self.year is not None else [when.year - 1, when.year, when.year + 1]
        for year in years:
            try:
                named = date(year, self.month, self.day)
            except ValueError:
                continue
            if abs((when - named).days) <= slack_days:
                return True
        return False


def named_dates(text: str) -> list[Named]:
    """The days and months ``text`` names, in order (none: it names no date)."""
    tokens = [t.lower() for t in _TOKEN.findall(text)]
    found: list[Named] = []
    for n, token in enumerate(tokens):
        if len(token) == 10 and token[4] == "-":
            iso = _iso(token)
            if iso is not None:
                found.append(iso)
            continue
        month = MONTHS.get(token)
        if month is None:
            continue
        named = _around(month, tokens[max(0, n - 1) : n], tokens[n + 1 : n + 3])
        if named is not None or token in _ALONE:
            found.append(named or Named(month))
    return list(dict.fromkeys(found))


def _around(month: int, before: list[str], after: list[str]) -> Named | None:
    """The month with the day and year beside it ("13 October 2023", "October 13, 2023",
    "October 2023"); ``None`` when neither is there."""
    if after and (day := _day(after[0])) is not None:
        year = _year(after[1]) if len(after) > 1 else None
        return Named(month, year, day)
    if before and (day := _day(before[0])) is not None:
        return Named(month, _year(after[0]) if after else None, day)
    if after and (year := _year(after[0])) is not None:
        return Named(month, year)
    return None


def _day(token: str) -> int | None:
    match = _DAY.fullmatch(token)
    return int(match.group(1)) if match and 1 <= int(match.group(1)) <= 31 else None


def _year(token: str) -> int | None:
    return int(token) if _YEAR.fullmatch(token) else None


def _iso(token: str) -> Named | None:
    try:
        day = date.fromisoformat(token)
    except ValueError:
        return None
    return Named(day.month, day.year, day.day)


def on_named(at: str, named: Sequence[Named], slack_days: int = 1) -> bool:
    """Whether the stored time ``at`` falls on one of ``named``."""
    return any(n.holds(at, slack_days) for n in named)
