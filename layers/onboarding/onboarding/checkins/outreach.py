"""Owns one check-in: the firing of a user's schedule, from the memory to the person.

At fire time the user is loaded as a turn loads them (one Query, the frozen context), the check-in
agent writes a short message from it, and it is stored as an assistant turn (so the user's reply
continues the conversation) under the firing's key, the schedule's fire time: EventBridge
Scheduler delivers at least once, and every firing of one time finds the same record. By SMS it
is sent through the existing sender (split as replies are) and marked delivered; for the app it
is stored delivered, and the app finds it with GET /history.

Nothing is sent in the quiet hours, to a number that opted out (STOP), to a user whose answers no
longer read as a schedule, or past the user's rate limit. The service also keeps the schedules:
`replan` after the scheduling answers change, `pause` on STOP and START, `erase` and `move` (a
phone's link) for the account's and the phone's services.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo

from aws_lambda_powertools import Logger

from onboarding.audit import Caller, context_counts, record_access
from onboarding.checkins.cadence import Cadence, read_cadence
from onboarding.checkins.timetable import CheckInTimetable, Scheduled
from onboarding.config import Limits
from onboarding.metrics import count_metric
from onboarding.model.answers import step_answers
from onboarding.model.errors import RateLimitedError, ScheduleError, TurnInProgressError, UserErasedError
from onboarding.model.history import TurnContext
from onboarding.persistence import Repositories
from onboarding.persistence.schema import check_in_id
from onboarding.sms.split import split_message

if TYPE_CHECKING:
    from onboarding.agents.check_in import CheckInAgent
    from onboarding.sms.sender import SmsSender

logger = Logger(child=True)

Status = Literal["sent", "stored", "already_sent", "quiet_hours", "opted_out", "no_schedule", "erased", "rate_limited"]


@dataclass(frozen=True)
class CheckInOutcome:
    status: Status
    message_id: str | None = None
    parts: int = 0


def _time_of(fire_time: str) -> datetime | None:
    """The firing's due time (Scheduler's `2026-11-30T08:00:00Z`), or None if it is not one."""
    try:
        at = datetime.fromisoformat(fire_time.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else None


def cadence_of(loaded: TurnContext, limits: Limits) -> Cadence | None:
    """The schedule the stored scheduling answers describe (None if they describe none)."""
    answers = {key: answer.value for key, answer in step_answers(loaded.state.agent_context, "scheduling").items()}
    read = read_cadence(answers, limits.quiet_hours)
    return read if isinstance(read, Cadence) else None


@dataclass(frozen=True)
class CheckInService:
    """A firing, and the schedules kept (`agent` None: a service that only keeps schedules, as the
    functions that save answers, erase and link have)."""

    store: Repositories
    agent: "CheckInAgent | None"
    limits: Limits
    timetable: CheckInTimetable | None = None
    sender: "SmsSender | None" = None
    from_number: str | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))

    # --- a firing ---

    async def fire(self, user_id: str, fire_time: str) -> CheckInOutcome:
        """Write, store and deliver the check-in due at `fire_time` (the schedule's own time, the
        firing's key). Raises TurnInProgressError while another delivery of the same firing is
        sending it (Lambda's retry comes back later)."""
        earlier = await asyncio.to_thread(self.store.writes.stored_check_in, user_id, fire_time)
        if earlier is not None:
            return await self._again(user_id, fire_time, earlier.delivered, earlier.reply_text or "")
        now = self.clock()
        since_ms = int(now.timestamp() * 1000)
        loaded = await asyncio.to_thread(
            self.store.conversations.load_turn, user_id, self.limits.history_load_limit, None
        )
        record_access(Caller.function("check-in"), user_id, context_counts(loaded))
        cadence = cadence_of(loaded, self.limits)
        if cadence is None:
            logger.info("Check-in fired for a user whose answers describe no schedule; nothing sent")
            return CheckInOutcome("no_schedule")
        # When it reaches the person: now, or the fire time where a local clock runs ahead.
        local = max(now, _time_of(fire_time) or now).astimezone(ZoneInfo(cadence.timezone))
        if self.limits.quiet_hours.contains(local.time().replace(second=0, microsecond=0)):
            logger.info("Check-in fired in the user's quiet hours; nothing sent")
            count_metric("CheckInQuiet")
            return CheckInOutcome("quiet_hours")
        phone = None
        if cadence.channel == "sms":
            phone = await asyncio.to_thread(self._reachable_phone, user_id)
            if phone is None:
                return CheckInOutcome("opted_out")
        if self.agent is None:
            raise RuntimeError("this service keeps schedules only; it has no check-in agent")
        text = await self.agent.write(loaded, cadence.describe(), local)
        try:
            stored = await asyncio.to_thread(
                self.store.writes.store_check_in,
                user_id,
                fire_time,
                text,
                since_ms,
                cadence.channel == "app",
                self.limits.rate_limit,
            )
        except UserErasedError:
            logger.info("Check-in of a user erased since it fired; nothing stored")
            return CheckInOutcome("erased")
        except RateLimitedError:
            logger.info("Check-in over the user's rate limit; nothing stored")
            return CheckInOutcome("rate_limited")
        if not stored.first:  # another delivery of this firing stored first: it sends
            return CheckInOutcome("already_sent" if stored.delivered else "stored", stored.user_message.message_id)
        count_metric("CheckInStored")
        if phone is None:
            return CheckInOutcome("stored", stored.user_message.message_id)
        parts = await asyncio.to_thread(self._send, user_id, fire_time, phone, text)
        return CheckInOutcome("sent", stored.user_message.message_id, parts)

    async def _again(self, user_id: str, fire_time: str, delivered: bool, text: str) -> CheckInOutcome:
        """A firing seen before: nothing if it was delivered; its stored text if its sender gave up."""
        if delivered:
            logger.info("Repeated firing of a delivered check-in; nothing sent")
            return CheckInOutcome("already_sent")
        if not await asyncio.to_thread(self.store.client_records.lease_check_in, user_id, fire_time):
            raise TurnInProgressError(self.limits.in_progress_retry_after_s)
        phone = await asyncio.to_thread(self._reachable_phone, user_id)
        if phone is None:
            return CheckInOutcome("opted_out")
        return CheckInOutcome("sent", parts=await asyncio.to_thread(self._send, user_id, fire_time, phone, text))

    def _reachable_phone(self, user_id: str) -> str | None:
        """The user's number, unless it opted out (STOP): then their schedule is paused too."""
        for phone in self.store.phones.phones_of(user_id):
            owner = self.store.phones.find_owner(phone)
            if owner is not None and owner.user_id == user_id and not owner.opted_out:
                return phone
        logger.info("Check-in by SMS for a user with no number that takes texts; nothing sent")
        self.pause(user_id)
        return None

    def _send(self, user_id: str, fire_time: str, phone: str, text: str) -> int:
        if self.sender is None or self.from_number is None:
            logger.warning("Check-in by SMS stored, but no SMS sender is configured")
            return 0
        # Twilio's SDK is in the SMS functions' layer only: imported where a text is sent.
        from onboarding.sms.sender import RecipientOptedOutError, UndeliverableError

        parts = split_message(text)
        for sent, part in enumerate(parts):
            try:
                self.sender.send(phone, self.from_number, part)
            except RecipientOptedOutError:
                self.store.phones.set_opted_out(phone, True)
                self.pause(user_id)
                return sent
            except UndeliverableError as error:
                logger.warning("Check-in undeliverable; not retried", extra={"twilio_error": error.code})
                count_metric("SmsUndeliverable")
                return sent
        self.store.client_records.mark_delivered(user_id, check_in_id(fire_time))
        count_metric("CheckInSent")
        return len(parts)

    # --- the schedules ---

    def replan(self, user_id: str, loaded: TurnContext) -> Cadence | None:
        """Create, update or delete the user's schedule from their stored scheduling answers."""
        if self.timetable is None:
            return None
        cadence = cadence_of(loaded, self.limits)
        try:
            if cadence is None:
                self.timetable.delete(user_id)
            else:
                self.timetable.put(user_id, cadence)
        except ScheduleError as error:
            logger.warning("Could not keep the check-in schedule", extra={"reason": error.reason})
            count_metric("CheckInScheduleFailed")
        return cadence

    def replan_stored(self, user_id: str) -> Cadence | None:
        """`replan` from what the table holds now (one Query)."""
        return self.replan(user_id, self.store.conversations.load_turn(user_id, 1))

    def pause(self, user_id: str, paused: bool = True) -> bool:
        """STOP pauses the user's schedule, START resumes it; False when they have none (or it failed)."""
        return self._keep("pause", lambda timetable: timetable.pause(user_id, paused))

    def erase(self, user_id: str) -> int:
        """Delete the user's schedule (an erase): 1 if there was one. ScheduleError propagates, so
        the erase is reported failed and retried rather than leaving a schedule behind."""
        return 0 if self.timetable is None else self.timetable.delete(user_id)

    def move(self, from_user: str, to_user: str) -> bool:
        """A phone's link: the phone user's schedule becomes the app user's."""
        return self._keep("move", lambda timetable: timetable.move(from_user, to_user))

    def _keep(self, what: str, change: Callable[[CheckInTimetable], bool]) -> bool:
        """A change of a schedule that must not fail what asked for it (a STOP, a link): a failure
        is logged and counted (CheckInScheduleFailed), and the firing checks again."""
        if self.timetable is None:
            return False
        try:
            return change(self.timetable)
        except ScheduleError as error:
            logger.warning("Could not change the check-in schedule", extra={"change": what, "reason": error.reason})
            count_metric("CheckInScheduleFailed")
            return False

    def scheduled(self, user_id: str) -> Scheduled | None:
        """The user's schedule as stored (GET /check-ins)."""
        return None if self.timetable is None else self.timetable.find(user_id)

    def next_time(self, scheduled: Scheduled) -> datetime | None:
        return None if scheduled.paused else scheduled.cadence.next_after(self.clock())
