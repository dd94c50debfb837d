"""Owns reading the scheduling step's answers (check_ins, training_days, training_time, timezone)
into a check-in schedule: the weekdays, the local clock time, the IANA time zone and the channel.

An answer is read, never guessed: a check-ins answer that names no channel, no days it can place,
or no time it can find, is `Unreadable` (the coach asks again); so is a time zone that is no IANA
zone nor a city of one. The schedule is an EventBridge Scheduler cron expression in the user's own
zone (`ScheduleExpressionTimezone`): the service keeps the local time across daylight saving.
"""

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from functools import cache
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from onboarding.config import QuietHours

Channel = Literal["sms", "app"]
# The scheduling answers a schedule is read from: a change of any of them makes it again.
SCHEDULE_ITEMS = ("check_ins", "training_days", "training_time", "timezone")
# The cron expression's names of the weekdays, Monday first (datetime.weekday's order).
DAY_NAMES = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")
_DAY_WORDS = {
    "mon": 0, "monday": 0, "tue": 1, "tues": 1, "tuesday": 1, "wed": 2, "wednesday": 2, "thu": 3, "thur": 3,
    "thurs": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5, "sun": 6, "sunday": 6,
}  # fmt: skip
_DAY = re.compile(r"\b(" + "|".join(sorted(_DAY_WORDS, key=len, reverse=True)) + r")s?\b", re.IGNORECASE)
_EVERY_DAY = re.compile(r"\b(daily|every\s*day|each\s*day)\b", re.IGNORECASE)
_WEEKDAYS = re.compile(r"\b(weekdays|every\s+weekday|work\s*days)\b", re.IGNORECASE)
_WEEKENDS = re.compile(r"\b(weekends?)\b", re.IGNORECASE)
_TRAINING_DAYS = re.compile(r"\b(training|workout|gym)\s+days?\b|\bdays?\s+I\s+(train|work\s*out)\b", re.IGNORECASE)
_TIMES_A_WEEK = re.compile(
    r"\b(?:(once|twice|one|two|three|four|five|six|[1-6])(?:\s+times?)?\s+(?:a|per|each)\s+week|(weekly|every\s+week))\b",
    re.IGNORECASE,
)
_COUNTS = {"once": 1, "one": 1, "twice": 2, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_SMS = re.compile(r"\b(sms|texts?|texting|text\s+message)\b", re.IGNORECASE)
_APP = re.compile(r"\b(app|in-app)\b", re.IGNORECASE)
_CLOCK_12 = re.compile(r"\b(1[0-2]|0?[1-9])(?::([0-5][0-9]))?\s*([ap])\.?m\b\.?", re.IGNORECASE)
_CLOCK_24 = re.compile(r"\b([01]?[0-9]|2[0-3])[:.h]([0-5][0-9])\b")
# A part of the day said instead of a clock time: the local time it stands for.
PARTS_OF_DAY = (
    (re.compile(r"\bmornings?\b", re.IGNORECASE), time(9, 0)),
    (re.compile(r"\b(noon|midday|lunch\s*time|lunch)\b", re.IGNORECASE), time(12, 0)),
    (re.compile(r"\bafternoons?\b", re.IGNORECASE), time(15, 0)),
    (re.compile(r"\bevenings?\b|\bafter\s+work\b", re.IGNORECASE), time(18, 0)),
)


@dataclass(frozen=True)
class Cadence:
    """A user's check-in schedule: the weekdays (0 Monday), the local time, the zone, the channel."""

    days: tuple[int, ...]
    at: time
    timezone: str
    channel: Channel

    @property
    def expression(self) -> str:
        """The EventBridge Scheduler expression (six fields; the `?` day of month)."""
        return f"cron({self.at.minute} {self.at.hour} ? * {','.join(DAY_NAMES[d] for d in self.days)} *)"

    @property
    def crontab(self) -> str:
        """The same schedule as a five-field crontab line (what the local scheduler runs)."""
        return f"{self.at.minute} {self.at.hour} * * {','.join(DAY_NAMES[d] for d in self.days)}"

    def next_after(self, now: datetime) -> datetime:
        """The next local time the schedule fires after `now` (aware), in the user's zone. A time
        that a daylight-saving change skips is the same wall time an hour later, as the zone
        database resolves it."""
        zone = ZoneInfo(self.timezone)
        today = now.astimezone(zone).date()
        for ahead in range(8 * 7):
            day = today + timedelta(days=ahead)
            if day.weekday() in self.days:
                at = _local(day, self.at, zone)
                if at > now:
                    return at
        raise ValueError("a schedule without days never fires")  # pragma: no cover (days is never empty)

    def describe(self) -> str:
        days = "every day" if len(self.days) == 7 else ", ".join(DAY_NAMES[d].title() for d in self.days)
        return f"{days} at {self.at:%H:%M} ({self.timezone}), by {'SMS' if self.channel == 'sms' else 'the app'}"


def _local(day: date, at: time, zone: ZoneInfo) -> datetime:
    wall = datetime.combine(day, at, tzinfo=zone)
    # A wall time a spring-forward skips does not round-trip: take the instant it maps to.
    return wall.astimezone(ZoneInfo("UTC")).astimezone(zone)


@dataclass(frozen=True)
class Unreadable:
    """An answer that cannot be read as a schedule: which item, and why (the coach asks again)."""

    item: Literal["check_ins", "timezone"]
    why: str


def read_zone(answer: str) -> str | None:
    """The IANA zone an answer names (its name in any case, its city alone, or UTC), or None."""
    text = answer.strip().replace(" ", "_")
    if not text:
        return None
    names = _zones()
    if (exact := names.get(text.casefold())) is not None:
        return exact
    cities = [name for key, name in names.items() if key.rsplit("/", 1)[-1] == text.casefold()]
    if len(cities) == 1:
        return cities[0]
    try:
        return ZoneInfo(text).key if "/" in text else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


@cache
def _zones() -> dict[str, str]:
    return {name.casefold(): name for name in available_timezones()}


def _days_named(text: str) -> list[int]:
    if _EVERY_DAY.search(text):
        return list(range(7))
    days = set()
    if _WEEKDAYS.search(text):
        days |= {0, 1, 2, 3, 4}
    if _WEEKENDS.search(text):
        days |= {5, 6}
    days |= {_DAY_WORDS[match.group(1).casefold()] for match in _DAY.finditer(text)}
    return sorted(days)


def _clock_time(text: str) -> time | None:
    if (match := _CLOCK_12.search(text)) is not None:
        hour = int(match.group(1)) % 12 + (12 if match.group(3).casefold() == "p" else 0)
        return time(hour, int(match.group(2) or 0))
    if (match := _CLOCK_24.search(text)) is not None:
        return time(int(match.group(1)), int(match.group(2)))
    return None


def _part_of_day(text: str) -> time | None:
    return next((at for pattern, at in PARTS_OF_DAY if pattern.search(text)), None)


def _days(check_ins: str, training_days: str) -> list[int] | str:
    """The weekdays of the check-ins, or why they cannot be placed."""
    named = _days_named(check_ins)
    if named:
        return named
    training = _days_named(training_days)
    if _TRAINING_DAYS.search(check_ins):
        return training or "the training days are not known yet"
    if (match := _TIMES_A_WEEK.search(check_ins)) is None:
        return "it says neither how often nor on which days"
    count = 1 if match.group(2) else int(_COUNTS.get(match.group(1).casefold(), match.group(1)))
    if len(training) < count:
        return "it does not say on which days, and the training days do not give enough"
    # Spread over the training days: once a week, the first; twice, the first and a middle one.
    return sorted(training[(i * len(training)) // count] for i in range(count))


def read_cadence(answers: Mapping[str, str | None], quiet: QuietHours) -> Cadence | Unreadable | None:
    """The schedule the scheduling answers describe; None until check_ins and timezone are both
    answered; `Unreadable` when one of them cannot be read (or names a time in the quiet hours)."""
    check_ins, zone_answer = answers.get("check_ins"), answers.get("timezone")
    if not check_ins or not zone_answer:
        return None
    zone = read_zone(zone_answer)
    if zone is None:
        return Unreadable("timezone", "it is not a time zone or a city of one (e.g. Europe/Berlin)")
    sms, app = bool(_SMS.search(check_ins)), bool(_APP.search(check_ins))
    if sms == app:
        return Unreadable("check_ins", "it names both channels" if sms else "it does not say by app or by SMS")
    days = _days(check_ins, answers.get("training_days") or "")
    if isinstance(days, str):
        return Unreadable("check_ins", days)
    training_time = answers.get("training_time") or ""
    at = _clock_time(check_ins) or _part_of_day(check_ins) or _clock_time(training_time) or _part_of_day(training_time)
    if at is None:
        return Unreadable("check_ins", "it gives no time of day, nor does the training time")
    if not quiet.allows(at):
        return Unreadable("check_ins", f"{at:%H:%M} is in the quiet hours ({quiet.start:%H:%M}-{quiet.end:%H:%M})")
    return Cadence(tuple(days), at, zone, "sms" if sms else "app")
