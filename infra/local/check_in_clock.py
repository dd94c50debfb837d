"""Owns firing the check-in schedules locally, as EventBridge Scheduler fires them in AWS.

The schedules are stored where the functions put them, in moto's scheduler (which keeps them and
never fires them); this clock reads them, works out each one's firings in its own time zone with
croniter (daylight saving included), and invokes CheckInFunction with the schedule's input, the
fire time filled in as `<aws.scheduler.scheduled-time>` is. A local clock may run ahead of the real
one (`advance`, infra.chat's `/later 1d`): every firing it passes is delivered, in order, once.

moto keeps the schedules in memory, and AWS never loses one: `kept_schedules` and
`restore_schedules` carry them across a restart of the local stack (kept beside its data file).
The clock starts again at the real time, so a firing due while the stack was stopped is not
delivered: a stopped stack is not a scheduler running without it.
"""

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from aws_lambda_powertools import Logger
from croniter import croniter

from onboarding.checkins.timetable import FIRE_TIME

logger = Logger(service="local-check-ins")


# What a stored schedule is made again from: what our timetable sets (the scheduler adds its ARN and
# dates). The group is left out: a schedule is restored into the group the template names now.
KEPT_FIELDS = ("Name", "ScheduleExpression", "ScheduleExpressionTimezone", "FlexibleTimeWindow", "State", "Target")


@dataclass(frozen=True)
class Firing:
    """One firing of a schedule: when it was due (UTC), and the event the function gets."""

    at: datetime
    schedule: str
    event: dict[str, Any]


def crontab_of(expression: str) -> str:
    """An EventBridge Scheduler `cron(m h dom mon dow year)` as croniter's five fields (`?` is `*`;
    the year field, always `*` here, is dropped)."""
    fields = expression.removeprefix("cron(").removesuffix(")").split()
    if len(fields) != 6 or fields[5] != "*":
        raise ValueError(f"not a cron expression the local clock runs: {expression}")
    return " ".join("*" if field == "?" else field for field in fields[:5])


def schedule_names(scheduler: Any, group: str) -> list[str]:
    """The name of every schedule of the group."""
    pages = scheduler.get_paginator("list_schedules").paginate(GroupName=group)
    return [found["Name"] for page in pages for found in page["Schedules"]]


def stored_schedules(scheduler: Any, group: str) -> list[dict[str, Any]]:
    """Every schedule of the group, as stored."""
    return [scheduler.get_schedule(Name=name, GroupName=group) for name in schedule_names(scheduler, group)]


def kept_schedules(scheduler: Any, group: str) -> list[dict[str, Any]]:
    """The group's schedules as requests that make them again, by name (JSON: a file can keep them)."""
    kept = [
        {name: stored[name] for name in KEPT_FIELDS if name in stored} for stored in stored_schedules(scheduler, group)
    ]
    return sorted(kept, key=lambda schedule: schedule["Name"])


def restore_schedules(scheduler: Any, group: str, kept: list[dict[str, Any]]) -> None:
    """The schedules `kept_schedules` gave, made again in the group."""
    for schedule in kept:
        scheduler.create_schedule(GroupName=group, **schedule)


def firings_between(schedule: dict[str, Any], start: datetime, end: datetime) -> list[Firing]:
    """The firings of one stored schedule after `start` up to `end` (both aware), oldest first."""
    if schedule.get("State") == "DISABLED":
        return []
    zone = ZoneInfo(schedule.get("ScheduleExpressionTimezone") or "UTC")
    times = croniter(crontab_of(schedule["ScheduleExpression"]), start.astimezone(zone))
    found = []
    while (at := times.get_next(datetime)) <= end:
        due = at.astimezone(UTC)
        given = schedule["Target"].get("Input", "{}").replace(FIRE_TIME, due.strftime("%Y-%m-%dT%H:%M:%SZ"))
        found.append(Firing(due, schedule["Name"], json.loads(given)))
    return found


@dataclass
class CheckInClock:
    """The local scheduler's clock: real time plus however far it was moved on. `scheduler`: a
    client of moto's scheduler (the operator's); `fire`: invokes the function with a firing's event."""

    scheduler: Any
    group: str
    fire: Callable[[dict[str, Any]], Any]
    real_now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    _ahead: timedelta = field(default=timedelta(0), init=False)
    _last: datetime = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self._last = self.real_now()

    def now(self) -> datetime:
        return self.real_now() + self._ahead

    def advance(self, by: timedelta = timedelta(0)) -> list[tuple[Firing, Any]]:
        """Move the clock on by `by` and deliver every firing it passed (since the last tick), in
        order; what each firing's invocation answered. A schedule changed by a firing (STOP in its
        answer) is read again for the next one."""
        with self._lock:
            self._ahead += by
            start, end = self._last, self.now()
            delivered: list[tuple[Firing, Any]] = []
            while True:
                due = sorted(
                    (
                        f
                        for schedule in stored_schedules(self.scheduler, self.group)
                        for f in firings_between(schedule, start, end)
                    ),
                    key=lambda firing: firing.at,
                )
                if not due:
                    break
                start = due[0].at  # every firing due at that time, each once
                delivered += [(firing, self.fire(firing.event)) for firing in due if firing.at == start]
            self._last = end
            return delivered


class Ticking:
    """Advances a clock every `every_s` seconds in a thread of its own (the stack's real time)."""

    def __init__(self, clock: CheckInClock, every_s: float = 5.0) -> None:
        self._clock = clock
        self._every_s = every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="check-in-clock")

    def start(self) -> "Ticking":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                self._clock.advance()
            except Exception as error:  # the clock goes on; the firing is tried again at the next tick
                logger.warning("A check-in firing failed", extra={"reason": type(error).__name__})
