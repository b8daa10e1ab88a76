"""When a reminder is due: "tomorrow at 9", "am Freitag um 18 Uhr", "every Monday at 8:30",
"in 2 hours", "on 14 June", an ISO 8601 time — resolved in the user's time zone.

dateparser alone gets these wrong (measured: "tomorrow at 9" kept the clock time of the base,
"at 9" became a day in September), so the common English and German shapes are read here,
word by word (no pattern is built from the text); a date with a month name and an ISO date
are read here too. A day without a time is due in the morning (``proactive.morning``); a time
without a day is the next such time. Wall times are kept across daylight-saving changes: a
reminder "every Monday at 9" is at 09:00 local before and after the change, and a time that
does not exist on that day (02:30 when the clocks jump from 02:00 to 03:00) is the first
minute after the gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEKDAYS = {
    "monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5,
    "sunday": 6, "montag": 0, "dienstag": 1, "mittwoch": 2, "donnerstag": 3, "freitag": 4,
    "samstag": 5, "sonnabend": 5, "sonntag": 6,
}  # fmt: skip
MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12, "jan": 1,
    "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9, "oct": 10,
    "nov": 11, "dec": 12, "januar": 1, "jänner": 1, "februar": 2, "märz": 3, "mai": 5,
    "juni": 6, "juli": 7, "oktober": 10, "dezember": 12,
}  # fmt: skip
UNITS = {
    "minute": 60, "minutes": 60, "min": 60, "mins": 60, "minute(n)": 60, "minuten": 60,
    "hour": 3600, "hours": 3600, "stunde": 3600, "stunden": 3600, "day": 86400, "days": 86400,
    "tag": 86400, "tage": 86400, "tagen": 86400, "week": 604800, "weeks": 604800,
    "woche": 604800, "wochen": 604800,
}  # fmt: skip
ONE = ("a", "an", "one", "ein", "eine", "einer", "einem")
EVERY = ("every", "each", "jeden", "jede", "jedes", "alle")
DAILY = ("daily", "täglich")
DAY_WORDS = ("day", "tag")
TODAY = ("today", "heute", "tonight")
TOMORROW = ("tomorrow", "morgen")
AFTER_TOMORROW = ("übermorgen",)
NOON = ("noon", "mittag", "midday")
AT = ("at", "um", "by", "gegen")
NEXT = ("next", "nächsten", "nächste", "kommenden", "kommende")
SPACE_PUNCTUATION = str.maketrans({c: " " for c in ",;!?()\"'“”„"})


@dataclass(frozen=True)
class When:
    due: datetime
    """In UTC."""
    local: datetime
    """The same instant on the user's wall clock (aware, in their zone)."""
    repeat: str | None = None
    """``daily``, or ``weekly:N`` (N the weekday, Monday 0): after it is sent, the next one
    is due at the same wall time."""


def resolve(text: str, now: datetime, zone: ZoneInfo, *, morning: time = time(9, 0)) -> When | None:
    """``text``'s due time after ``now`` (aware) in ``zone``, or ``None`` when it names none
    this reads (or only a time already past with nothing to move it on)."""
    stripped = text.strip()
    iso = _iso(stripped, zone)
    if iso is not None:
        return _when(iso, None) if iso > now else None
    words = stripped.lower().translate(SPACE_PUNCTUATION).split()
    local_now = now.astimezone(zone)
    named = _day(words, local_now.date())
    clock = _clock(words)
    if named.relative is not None:
        return _when(now + named.relative, None)
    if named.day is None and clock is None and named.repeat is None:
        return None
    at = clock or morning
    target = named.day or local_now.date()
    if named.repeat is not None:
        target = _first(named.repeat, target, at, zone, now)
    elif wall_time(target, at, zone) <= now:
        if named.day is None:
            target += timedelta(days=1)  # a time alone: the next such time
        elif named.weekday:
            target += timedelta(days=7)  # "on Friday" said on a Friday evening: next week's
    moment = wall_time(target, at, zone)
    if moment <= now:
        return None
    return _when(moment, named.repeat)


def next_after(when: When, zone: ZoneInfo) -> When | None:
    """The next time a repeating reminder is due (the same wall time), or ``None``."""
    if when.repeat is None:
        return None
    local = when.local.astimezone(zone)
    step = 1 if when.repeat == "daily" else 7
    moment = wall_time(local.date() + timedelta(days=step), local.time().replace(tzinfo=None), zone)
    return _when(moment, when.repeat)


def _when(moment: datetime, repeat: str | None) -> When:
    return When(moment.astimezone(UTC), moment, repeat)


def _exists(naive: datetime, zone: ZoneInfo) -> bool:
    there = naive.replace(tzinfo=zone)
    return there.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == naive


def wall_time(day: date, at: time, zone: ZoneInfo) -> datetime:
    """The wall time ``at`` on ``day`` in ``zone`` (of a time the clocks pass twice, the
    first); in a gap (the clocks jumped over it), the first minute after it."""
    naive = datetime.combine(day, at)
    for _ in range(24 * 60):
        if _exists(naive, zone):
            return naive.replace(tzinfo=zone)
        naive += timedelta(minutes=1)
    return naive.replace(tzinfo=zone)


def _iso(text: str, zone: ZoneInfo) -> datetime | None:
    if not text[:4].isdigit() or "-" not in text[:8]:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return (
            wall_time(parsed.date(), parsed.time(), zone)
            if (len(text) > 10)
            else wall_time(parsed.date(), time(9, 0), zone)
        )
    return parsed


def _first(repeat: str, start: date, at: time, zone: ZoneInfo, now: datetime) -> date:
    """The first day from ``start`` on which a repeating reminder is due after ``now``."""
    day = start
    for _ in range(15):
        fits = repeat == "daily" or day.weekday() == int(repeat.split(":")[1])
        if fits and wall_time(day, at, zone) > now:
            return day
        day += timedelta(days=1)
    return day


@dataclass(frozen=True)
class _Named:
    day: date | None = None
    repeat: str | None = None
    relative: timedelta | None = None
    weekday: bool = False
    """The day is a weekday's name (said on that day: today, if the time is still ahead)."""


def _day(words: list[str], today: date) -> _Named:
    """The day named, the repeat rule, or a relative offset ("in 2 hours")."""
    day: date | None = None
    repeat: str | None = None
    weekday = False
    for n, word in enumerate(words):
        following = words[n + 1] if n + 1 < len(words) else ""
        previous = words[n - 1] if n > 0 else ""
        if word == "in" and following:
            amount = _number(following)
            unit = words[n + 2] if n + 2 < len(words) else ""
            if amount is not None and unit in UNITS:
                return _Named(relative=timedelta(seconds=amount * UNITS[unit]))
        if word in EVERY and following in WEEKDAYS:
            repeat = f"weekly:{WEEKDAYS[following]}"
        elif (word in EVERY and following in DAY_WORDS) or word in DAILY:
            repeat = "daily"
        elif word in AFTER_TOMORROW or (word == "after" and following == "tomorrow"):
            day = today + timedelta(days=2)
        elif word in TOMORROW and day is None and previous != "after":
            day = today + timedelta(days=1)
        elif word in TODAY:
            day = today
        elif word in WEEKDAYS and repeat is None:
            ahead = (WEEKDAYS[word] - today.weekday()) % 7
            if ahead == 0 and previous in NEXT:
                ahead = 7
            day, weekday = today + timedelta(days=ahead), ahead == 0
        elif word.rstrip(".") in MONTHS:
            day = _month_date(words, n, today) or day
        else:
            day = _numeric_date(word, today) or day
    return _Named(day, repeat, None, weekday)


def _number(word: str) -> int | None:
    if word in ONE:
        return 1
    return int(word) if word.isdigit() and len(word) <= 4 else None


def _month_date(words: list[str], n: int, today: date) -> date | None:
    """ "14 June", "14. Juni", "June 14", "June 14 2027": the next such date."""
    month = MONTHS[words[n].rstrip(".")]
    before = words[n - 1].rstrip(".") if n > 0 else ""
    after = words[n + 1].rstrip(".") if n + 1 < len(words) else ""
    number = before if before.isdigit() else after.rstrip("stndrh") if after[:1].isdigit() else ""
    if not number.isdigit() or not 1 <= int(number) <= 31:
        return None
    year_word = words[n + 2] if number == after.rstrip("stndrh") and n + 2 < len(words) else after
    year = int(year_word) if year_word.isdigit() and len(year_word) == 4 else None
    try:
        found = date(year or today.year, month, int(number))
    except ValueError:
        return None
    if year is None and found < today:
        found = found.replace(year=today.year + 1)
    return found


def _numeric_date(word: str, today: date) -> date | None:
    """ "14.06.", "14.6.2027", "2027-06-14"."""
    if word.count("-") == 2 and word[:4].isdigit():
        try:
            return date.fromisoformat(word)
        except ValueError:
            return None
    parts = word.rstrip(".").split(".")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts) or "." not in word:
        return None
    try:
        year = int(parts[2]) if len(parts) == 3 else today.year
        found = date(year, int(parts[1]), int(parts[0]))
    except ValueError:
        return None
    if len(parts) == 2 and found < today:
        found = found.replace(year=today.year + 1)
    return found


def _clock(words: list[str]) -> time | None:
    """ "at 9", "9am", "9:30 pm", "21:00", "um 18 Uhr", "noon"."""
    for n, word in enumerate(words):
        following = words[n + 1] if n + 1 < len(words) else ""
        if word in NOON:
            return time(12, 0)
        hour_minute = _hour_minute(word)
        if hour_minute is None:
            continue
        hour, minute, suffix = hour_minute
        if not suffix and following in ("am", "pm", "uhr", "a.m.", "p.m."):
            suffix = following.replace(".", "")
        previous = words[n - 1] if n > 0 else ""
        if not suffix and ":" not in word and previous not in AT:
            continue  # a bare number is no time ("in 2 hours", "14 June")
        if suffix == "pm" and hour < 12:
            hour += 12
        elif suffix == "am" and hour == 12:
            hour = 0
        if hour <= 23 and minute <= 59:
            return time(hour, minute)
    return None


def _hour_minute(word: str) -> tuple[int, int, str] | None:
    suffix = ""
    for end in ("am", "pm", "uhr", "h"):
        if word.endswith(end) and word[: -len(end)].replace(":", "").isdigit():
            word, suffix = word[: -len(end)], "" if end == "h" else end
            break
    hour_text, _, minute_text = word.partition(":")
    if not hour_text.isdigit() or len(hour_text) > 2:
        return None
    if minute_text and (not minute_text.isdigit() or len(minute_text) != 2):
        return None
    return int(hour_text), int(minute_text or 0), suffix


DAY_NAMES = {
    "en": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"),
    "de": ("Montag", "Dienstag", "Mittwoch", "Donnerstag", "Freitag", "Samstag", "Sonntag"),
}
MONTH_NAMES = {
    "en": ("January", "February", "March", "April", "May", "June", "July", "August",
           "September", "October", "November", "December"),
    "de": ("Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
           "Oktober", "November", "Dezember"),
}  # fmt: skip


def spoken(local: datetime, language: str) -> str:
    """ "Tuesday, 2 June, at 09:00" ("Dienstag, 2. Juni, um 09:00"), the year when it is not
    this one."""
    lang = "de" if language == "de" else "en"
    day = DAY_NAMES[lang][local.weekday()]
    month = MONTH_NAMES[lang][local.month - 1]
    year = f" {local.year}" if local.year != datetime.now(local.tzinfo).year else ""
    clock = local.strftime("%H:%M")
    if lang == "de":
        return f"{day}, {local.day}. {month}{year}, um {clock}"
    return f"{day}, {local.day} {month}{year}, at {clock}"
