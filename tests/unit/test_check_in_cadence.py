"""The scheduling answers read into a check-in schedule, or asked about again; never guessed."""

from datetime import UTC, datetime, time

import pytest

from onboarding.checkins.cadence import Cadence, Unreadable, read_cadence, read_zone
from onboarding.config import DEFAULT_LIMITS

QUIET = DEFAULT_LIMITS.quiet_hours


def _read(check_ins: str, **others: str) -> Cadence | Unreadable | None:
    answers = {"training_days": "Mon, Wed, Fri", "training_time": "6pm", "timezone": "Europe/Berlin"} | others
    return read_cadence(answers | {"check_ins": check_ins}, QUIET)


def test_weekly_by_sms_on_monday_mornings() -> None:
    cadence = _read("weekly by SMS, Monday mornings")
    assert cadence == Cadence((0,), time(9, 0), "Europe/Berlin", "sms")
    assert isinstance(cadence, Cadence)
    assert cadence.expression == "cron(0 9 ? * MON *)"
    assert cadence.crontab == "0 9 * * MON"


@pytest.mark.parametrize(
    ("answer", "days", "at", "channel"),
    [
        ("daily in the app at 18:30", (0, 1, 2, 3, 4, 5, 6), time(18, 30), "app"),
        ("once a week by text", (0,), time(18, 0), "sms"),  # the first training day, at the training time
        ("twice a week in the app", (0, 2), time(18, 0), "app"),
        ("weekly by text", (0,), time(18, 0), "sms"),
        ("on my training days, text me in the evening", (0, 2, 4), time(18, 0), "sms"),
        ("weekdays at 8:15 pm by sms", (0, 1, 2, 3, 4), time(20, 15), "sms"),
    ],
)
def test_answers_read_as_schedules(answer: str, days: tuple[int, ...], at: time, channel: str) -> None:
    assert _read(answer) == Cadence(days, at, "Europe/Berlin", channel)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "answer",
    [
        "weekly",  # no channel
        "weekly by SMS or in the app",  # both
        "by SMS now and then",  # how often?
        "three times a week by sms",  # more than the two training days below
        "Mondays by SMS at 23:00",  # quiet hours
        "Mondays by SMS at 20:58",  # the window would run into the quiet hours
    ],
)
def test_an_unreadable_answer_is_asked_again(answer: str) -> None:
    read = _read(answer, training_days="Tuesday and Thursday")
    assert isinstance(read, Unreadable)
    assert read.item == "check_ins"


def test_no_time_anywhere_is_unreadable() -> None:
    assert isinstance(_read("weekly by sms", training_time="whenever"), Unreadable)
    # A training time in the quiet hours is not moved to another hour: it is asked about.
    assert isinstance(_read("weekly by sms", training_time="7am"), Unreadable)


def test_time_zones_are_read_never_guessed() -> None:
    assert read_zone("Europe/Berlin") == "Europe/Berlin"
    assert read_zone("america/new york") == "America/New_York"
    assert read_zone("Berlin") == "Europe/Berlin"
    assert read_zone("somewhere warm") is None
    assert isinstance(_read("weekly by sms", timezone="my time"), Unreadable)


def test_nothing_until_the_check_ins_and_zone_are_answered() -> None:
    assert read_cadence({"check_ins": "weekly by SMS"}, QUIET) is None


@pytest.mark.parametrize(
    ("zone", "before", "after", "local_hours"),
    [
        # Berlin leaves summer time on 25 October 2026 (UTC+2 to UTC+1).
        ("Europe/Berlin", datetime(2026, 10, 12, 6, 0, tzinfo=UTC), 3, (9, 9, 9)),
        # New York leaves it on 1 November 2026 (UTC-4 to UTC-5).
        ("America/New_York", datetime(2026, 10, 19, 12, 0, tzinfo=UTC), 3, (9, 9, 9)),
    ],
)
def test_the_local_time_holds_across_daylight_saving(
    zone: str, before: datetime, after: int, local_hours: tuple[int, ...]
) -> None:
    cadence = Cadence((0,), time(9, 0), zone, "sms")
    fired, now = [], before
    for _ in range(after):
        now = cadence.next_after(now)
        fired.append(now)
    assert tuple(at.hour for at in fired) == local_hours
    utc_hours = {at.astimezone(UTC).hour for at in fired}
    assert len(utc_hours) == 2  # the same local time is two UTC times across the change


def test_the_save_tool_asks_again_instead_of_saving_an_unreadable_answer() -> None:
    """The protection: an unreadable check-ins answer is not saved, and the model is told to ask."""
    import json

    from onboarding.llm.working_copy import WorkingCopy
    from onboarding.model.answers import step_answers
    from onboarding.model.profile import UserProfile
    from onboarding.model.state import OnboardingAgentType, OnboardingState

    step = OnboardingAgentType.SCHEDULING
    working = WorkingCopy(step, OnboardingState(current_agent=step), UserProfile(), DEFAULT_LIMITS)
    result = json.loads(
        working.save_answers({"training_days": "Mon", "timezone": "Europe/Berlin", "check_ins": "now and then"}, False)
    )
    assert "ask_again" in result
    assert "check_ins" not in result["saved"]
    assert "check_ins" not in step_answers(working.state.agent_context, step.value)
    assert "error" in json.loads(working.correct("scheduling.check_ins", "sometimes"))
    json.loads(working.save_answers({"check_ins": "weekly by SMS, Monday mornings"}, False))
    assert step_answers(working.state.agent_context, step.value)["check_ins"].value == "weekly by SMS, Monday mornings"
