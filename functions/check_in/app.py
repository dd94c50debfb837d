"""Check-in: EventBridge Scheduler's firing of one user's check-in schedule.

Thin by design: the schedule's input names the user and the time the firing was due
(`<aws.scheduler.scheduled-time>`), the key of the firing; `CheckInService.fire` loads the user as
a turn does, writes the check-in from the memory, stores it once per firing and sends it.
Scheduler invokes asynchronously and Lambda retries a failure twice: a retry finds the firing's
record, so one message is sent. A firing another try is still sending raises, and is retried.
"""

import asyncio
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger
from aws_lambda_powertools.utilities.typing import LambdaContext

from onboarding.checkins.outreach import CheckInService
from onboarding.composition import build_check_in_function
from onboarding.config import CheckInSettings, Settings
from onboarding.redaction import RedactingFormatter

logger = Logger(logger_formatter=RedactingFormatter())

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_handler(service: CheckInService) -> Handler:
    """The Lambda handler (tests pass their own service)."""

    @logger.inject_lambda_context
    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        user_id, fire_time = event.get("user_id"), event.get("fire_time")
        if not isinstance(user_id, str) or not user_id or not isinstance(fire_time, str) or not fire_time:
            raise ValueError("a check-in event names the user (user_id) and the firing's time (fire_time)")
        outcome = asyncio.run(service.fire(user_id, fire_time))
        # One line a firing: what happened, never the text.
        logger.info("Check-in fired", extra={"status": outcome.status, "parts": outcome.parts})
        return {"status": outcome.status, "parts": outcome.parts}

    return handler


lambda_handler = make_handler(build_check_in_function(Settings.from_env(), CheckInSettings.from_env()))
