"""Owns the users' check-in schedules in EventBridge Scheduler: one schedule a user, in one group,
a cron expression in the user's own time zone with a flexible window, invoking the CheckInFunction
with the scheduler's role. Its input names the user and carries the fire time
(`<aws.scheduler.scheduled-time>`), the key that makes a retried firing send one check-in.

The client is made at the first call (a function that never changes a schedule never builds it).
Every failure of the service is `ScheduleError`; a schedule that is not there is not a failure.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from onboarding.checkins.cadence import DAY_NAMES, Cadence
from onboarding.model.errors import ScheduleError

# What EventBridge Scheduler puts in the input at each firing: the time the firing was due.
FIRE_TIME = "<aws.scheduler.scheduled-time>"
_NOT_FOUND = "ResourceNotFoundException"


@dataclass(frozen=True)
class Scheduled:
    """A user's schedule as stored: its cadence and whether it is paused (STOP, an opt-out)."""

    cadence: Cadence
    paused: bool


def schedule_name(user_id: str) -> str:
    """A user's schedule name: at most 64 of [0-9a-zA-Z-_.], whatever the user id holds."""
    return "check-in-" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:40]


def _cadence_of(schedule: dict[str, Any]) -> Cadence:
    """The cadence a stored schedule runs (its expression, zone and the input's channel)."""
    minute, hour, _, _, days, _ = schedule["ScheduleExpression"].removeprefix("cron(").removesuffix(")").split()
    from datetime import time

    given = json.loads(schedule["Target"]["Input"])
    weekdays = tuple(DAY_NAMES.index(day) for day in days.split(","))
    return Cadence(weekdays, time(int(hour), int(minute)), schedule["ScheduleExpressionTimezone"], given["channel"])


class CheckInTimetable:
    def __init__(
        self, connect: Callable[[], Any], group: str, target_arn: str, role_arn: str, window_minutes: int
    ) -> None:
        self._connect = connect
        self._client: Any = None
        self._group = group
        self._target = target_arn
        self._role = role_arn
        self._window = window_minutes

    def _call(self, operation: str, **request: Any) -> dict[str, Any] | None:
        """One request; None when the schedule is not there; ScheduleError on any other failure."""
        if self._client is None:
            self._client = self._connect()
        try:
            answer: dict[str, Any] = getattr(self._client, operation)(GroupName=self._group, **request)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == _NOT_FOUND:
                return None
            raise ScheduleError(f"{operation}: {error.response.get('Error', {}).get('Code')}") from error
        except BotoCoreError as error:
            raise ScheduleError(f"{operation}: {type(error).__name__}") from error
        return answer

    def _definition(self, user_id: str, cadence: Cadence, paused: bool) -> dict[str, Any]:
        given = {"user_id": user_id, "channel": cadence.channel, "fire_time": FIRE_TIME}
        return {
            "Name": schedule_name(user_id),
            "ScheduleExpression": cadence.expression,
            "ScheduleExpressionTimezone": cadence.timezone,
            "FlexibleTimeWindow": {"Mode": "FLEXIBLE", "MaximumWindowInMinutes": self._window},
            "State": "DISABLED" if paused else "ENABLED",
            "Target": {"Arn": self._target, "RoleArn": self._role, "Input": json.dumps(given)},
        }

    def find(self, user_id: str) -> Scheduled | None:
        found = self._call("get_schedule", Name=schedule_name(user_id))
        if found is None:
            return None
        return Scheduled(_cadence_of(found), found.get("State") == "DISABLED")

    def put(self, user_id: str, cadence: Cadence, paused: bool | None = None) -> None:
        """Create or update the user's schedule; `paused` None keeps a paused schedule paused."""
        if paused is None:
            found = self.find(user_id)
            paused = found is not None and found.paused
        definition = self._definition(user_id, cadence, paused)
        if self._call("update_schedule", **definition) is None:
            self._call("create_schedule", **definition)

    def pause(self, user_id: str, paused: bool = True) -> bool:
        """Pause (STOP) or resume (START) the user's schedule; False when they have none."""
        found = self.find(user_id)
        if found is None:
            return False
        if found.paused != paused:
            self._call("update_schedule", **self._definition(user_id, found.cadence, paused))
        return True

    def delete(self, user_id: str) -> int:
        """Delete the user's schedule: 1, or 0 when there was none."""
        return 0 if self._call("delete_schedule", Name=schedule_name(user_id)) is None else 1

    def move(self, from_user: str, to_user: str) -> bool:
        """A phone's link: the phone user's schedule becomes the app user's (theirs kept if they
        have one). False when the phone user had none."""
        found = self.find(from_user)
        if found is None:
            return False
        if self.find(to_user) is None:
            self.put(to_user, found.cadence, found.paused)
        self.delete(from_user)
        return True
