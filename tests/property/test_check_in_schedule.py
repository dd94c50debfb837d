"""Properties of a check-in schedule: every firing is on one of its weekdays at its local time (a
time daylight saving skips comes an hour later), always after now and within a week of it; and a
schedule read from answers never lets its window reach into the quiet hours."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given
from hypothesis import strategies as st

from onboarding.checkins.cadence import Cadence, read_cadence
from onboarding.config import DEFAULT_LIMITS

ZONES = ("Europe/Berlin", "America/New_York", "Australia/Sydney", "Asia/Kolkata", "America/Sao_Paulo", "UTC")
DAY_WORDS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")

days = st.sets(st.integers(0, 6), min_size=1).map(lambda found: tuple(sorted(found)))
clock_times = st.builds(time, st.integers(0, 23), st.sampled_from([0, 15, 30, 45]))
moments = st.datetimes(datetime(2026, 1, 1), datetime(2030, 12, 31)).map(lambda at: at.replace(tzinfo=UTC))


@given(days, clock_times, st.sampled_from(ZONES), moments)
def test_the_next_firing_is_the_agreed_weekday_and_local_time(
    weekdays: tuple[int, ...], at: time, zone: str, now: datetime
) -> None:
    fired = Cadence(weekdays, at, zone, "sms").next_after(now)
    local = fired.astimezone(ZoneInfo(zone))
    assert now < fired <= now + timedelta(days=7, hours=1)
    assert local.weekday() in weekdays
    wall = datetime.combine(local.date(), at)
    assert local.replace(tzinfo=None) in (wall, wall + timedelta(hours=1))  # +1 h: a skipped wall time


@given(st.sampled_from(DAY_WORDS), st.integers(0, 23), st.integers(0, 59), st.sampled_from(ZONES))
def test_a_schedule_read_from_answers_keeps_out_of_the_quiet_hours(day: str, hour: int, minute: int, zone: str) -> None:
    quiet = DEFAULT_LIMITS.quiet_hours
    answers = {"check_ins": f"weekly by SMS on {day} at {hour:02d}:{minute:02d}", "timezone": zone}
    read = read_cadence(answers, quiet)
    if not isinstance(read, Cadence):  # asked again: only for a time whose window meets the quiet hours
        assert read is not None
        assert read.item == "check_ins"
        assert any(quiet.contains((datetime(2027, 1, 1, hour, minute) + timedelta(minutes=m)).time()) for m in range(6))
        return
    assert read.at == time(hour, minute)
    for late in range(quiet.window_minutes + 1):
        assert not quiet.contains(
            (datetime.combine(datetime(2027, 1, 1).date(), read.at) + timedelta(minutes=late)).time()
        )
