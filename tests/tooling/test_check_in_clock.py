"""The local scheduler's clock: EventBridge Scheduler's cron read by croniter, in the schedule's zone."""

import json
from datetime import UTC, datetime

import pytest

from infra.local.check_in_clock import crontab_of, firings_between


def _schedule(state: str = "ENABLED") -> dict[str, object]:
    given = {"user_id": "u", "fire_time": "<aws.scheduler.scheduled-time>"}
    return {
        "Name": "check-in-u",
        "State": state,
        "ScheduleExpression": "cron(30 9 ? * MON,THU *)",
        "ScheduleExpressionTimezone": "Europe/Berlin",
        "Target": {"Input": json.dumps(given)},
    }


def test_the_cron_expression_is_read_as_croniter_reads_one() -> None:
    assert crontab_of("cron(30 9 ? * MON,THU *)") == "30 9 * * MON,THU"
    with pytest.raises(ValueError, match="not a cron expression"):
        crontab_of("rate(5 minutes)")


def test_firings_fill_in_the_fire_time_in_utc() -> None:
    found = firings_between(_schedule(), datetime(2026, 11, 29, tzinfo=UTC), datetime(2026, 12, 4, tzinfo=UTC))
    assert [f.event["fire_time"] for f in found] == ["2026-11-30T08:30:00Z", "2026-12-03T08:30:00Z"]
    assert (
        firings_between(_schedule("DISABLED"), datetime(2026, 11, 29, tzinfo=UTC), datetime(2026, 12, 4, tzinfo=UTC))
        == []
    )
