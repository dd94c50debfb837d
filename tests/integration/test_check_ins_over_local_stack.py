"""The issue's "done when", on the local stack: a user who answers "weekly by SMS, Monday
mornings" gets one check-in text every Monday at the agreed local time, across a daylight-saving
change, in two time zones, with the local clock moved forward; each names the plan the memory
holds, and a clock that passes no new firing sends nothing again."""

import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from infra.chat import CHAT_FUNCTION, check_ins_later, converse
from infra.local.check_in_clock import CheckInClock
from infra.local.errors import LocalToolError
from infra.local.iam.identity import acting_as
from infra.local.lambda_runner import invoke
from infra.local.stack import LocalStack
from onboarding.checkins.timetable import schedule_name
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.persistence import Repositories
from tests.support.deployed_flows import (
    HTTP,
    at_midday_now,
    at_the_scheduling_step,
    bearer,
    chat,
    new_phone,
    operator_table,
    replies_to,
    text,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    with LocalStack(api_port=0) as running:
        yield running


@pytest.mark.parametrize(
    ("zone", "clock_starts", "utc_hours"),
    [
        # Berlin goes to summer time on 28 March 2027: 09:00 is 08:00 UTC, then 07:00 UTC.
        ("Europe/Berlin", datetime(2027, 3, 15, 12, 0, tzinfo=UTC), [8, 7, 7]),
        # New York goes to summer time on 14 March 2027: 09:00 is 14:00 UTC, then 13:00 UTC.
        ("America/New_York", datetime(2027, 3, 1, 20, 0, tzinfo=UTC), [14, 13, 13]),
    ],
)
def test_weekly_by_sms_on_monday_mornings_across_a_daylight_saving_change(
    stack: LocalStack, zone: str, clock_starts: datetime, utc_hours: list[int]
) -> None:
    phone = new_phone()
    text(stack, phone, "Hi coach")
    replies_to(stack, phone, 1)
    owner = Repositories.over(operator_table(stack), stack.table_name, Settings.from_env()).phones.find_owner(phone)
    assert owner is not None
    at_the_scheduling_step(stack, owner.user_id, timezone=zone)
    text(stack, phone, "weekly by SMS, Monday mornings")
    replies_to(stack, phone, 2)
    group = stack.deployment.resolve({"Ref": "CheckInScheduleGroup"})
    clock = CheckInClock(
        stack.operator_client("scheduler"), group, lambda e: invoke("CheckInFunction", e), lambda: clock_starts
    )

    fired = clock.advance(timedelta(weeks=3))

    mine = [(firing, answer) for firing, answer in fired if firing.event["user_id"] == owner.user_id]
    assert [firing.at.hour for firing, _ in mine] == utc_hours
    assert all(firing.at.astimezone(ZoneInfo(zone)).strftime("%a %H:%M") == "Mon 09:00" for firing, _ in mine)
    assert [answer["status"] for _, answer in mine] == ["sent"] * 3
    check_ins = replies_to(stack, phone, 5)[2:]
    assert len(check_ins) == 3, check_ins
    assert all("kettlebell swings" in body for body in check_ins), check_ins
    # A firing delivered again (Scheduler delivers at least once) sends nothing more.
    assert invoke("CheckInFunction", mine[0][0].event)["status"] == "already_sent"
    assert clock.advance() == []
    assert len([sent for sent in stack.twilio.sent if sent.to == phone]) == 5


def test_the_chat_moves_the_clock_on_and_the_check_in_arrives(stack: LocalStack) -> None:
    """infra.chat's `/later`: the check-in agreed in the conversation arrives when the clock passes it."""
    user, zone = f"chat-{uuid.uuid4().hex[:8]}", at_midday_now()
    at_the_scheduling_step(stack, user, timezone=zone)
    out = io.StringIO()
    with acting_as(CHAT_FUNCTION):
        settings = Settings.from_env()
        service = build_turn_service(settings, build_repositories(settings))
        lines = ["weekly by app, Monday mornings", "/later 7d", "/later 2h"]  # a week holds one Monday
        assert converse(service, user, lines, lambda: None, out, check_ins_later(user)) == 0
    shown = out.getvalue().splitlines()
    arrived = [line for line in shown if line.startswith("coach (check-in, ")]
    assert len(arrived) == 1, shown
    # The chat shows the firing in UTC; Monday morning is the person's own (UTC+12 puts it on Sunday).
    now = datetime.now(UTC)
    shown_at = datetime.strptime(f"{now.year} {arrived[0][17:37]}", "%Y %a %d %b %H:%M UTC").replace(tzinfo=UTC)
    if shown_at.month < now.month:  # the clock moved past the new year
        shown_at = shown_at.replace(year=now.year + 1)
    local = shown_at.astimezone(ZoneInfo(zone))
    assert local.strftime("%a %H:%M") == "Mon 09:00", arrived[0]
    assert "kettlebell swings" in arrived[0]
    assert shown[-1] == "[no check-in in that time]"


def test_the_schedules_are_kept_beside_the_data_file_across_restarts(tmp_path: Path) -> None:
    """AWS keeps a schedule whatever happens to the functions; a restarted local stack keeps it too,
    and its clock fires it. Each save writes the schedules that changed, so a stack that is killed
    keeps those made before its last save."""
    data, user = tmp_path / "table.jsonl", f"kept-{uuid.uuid4().hex[:8]}"
    with LocalStack(data_file=data, api_port=0) as first:
        at_the_scheduling_step(first, user)
        chat(first, user, "weekly by app, Monday evenings")
        first.save()
        saved = json.loads((tmp_path / "table.schedules.json").read_text(encoding="utf-8"))
        assert [schedule["Name"] for schedule in saved] == [schedule_name(user)]
        assert HTTP.get(f"{first.api_url}/check-ins", headers=bearer(user)).json()["scheduled"] is True
    with LocalStack(data_file=data, api_port=0) as second:
        found = HTTP.get(f"{second.api_url}/check-ins", headers=bearer(user)).json()
        assert (found["scheduled"], found["channel"], found["days"], found["at"]) == (True, "app", ["MON"], "18:00")
        group = second.deployment.resolve({"Ref": "CheckInScheduleGroup"})
        clock = CheckInClock(second.operator_client("scheduler"), group, lambda e: invoke("CheckInFunction", e))
        fired = [answer for firing, answer in clock.advance(timedelta(days=7)) if firing.event["user_id"] == user]
        assert [answer["status"] for answer in fired] == ["stored"]


@pytest.mark.parametrize(
    "damaged",
    ['[{"Name": "check-in-', '[{"Name": "check-in-0"}]'],  # cut short; a schedule the scheduler refuses
)
def test_a_damaged_schedules_file_is_one_line_and_is_left_as_it_is(tmp_path: Path, damaged: str) -> None:
    data, schedules = tmp_path / "table.jsonl", tmp_path / "table.schedules.json"
    schedules.write_text(damaged, encoding="utf-8")
    with pytest.raises(LocalToolError) as refused:
        LocalStack(data_file=data, api_port=0).__enter__()
    assert "\n" not in str(refused.value)
    assert str(schedules) in str(refused.value)
    assert schedules.read_text(encoding="utf-8") == damaged
    schedules.rename(tmp_path / "aside.json")  # as the error says: then the stack starts, nothing held
    with LocalStack(data_file=data, api_port=0):
        pass
