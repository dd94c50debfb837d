"""Owns a phone's link requests: the code a phone texted while it waits for its YES (nothing
merges before the phone agrees), and the link codes it texts, counted in fixed windows apart from
its owner item (an erase does not reset them) and locked out past a few wrong ones (decision 0015).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from onboarding.config import RateLimit
from onboarding.model.errors import StoreError
from onboarding.model.users import normalize_link_code
from onboarding.persistence.calls import ConditionFailed, store_call
from onboarding.persistence.phones import valid_code
from onboarding.persistence.schema import link_tries_key, phone_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


# How long a link code waits, between tries, for codes of the same phone still being checked to
# settle (each takes a read and a write or two): about 3.5 s in all, well inside the webhook's timeout.
PENDING_WAITS_S = (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0)


# What a text told that the room is still held is asked to wait before trying again.
BUSY_RETRY_S = 60


@dataclass(frozen=True)
class LinkAttempt:
    """A link code counted against its phone, in the window it was counted in."""

    phone: str
    window: int


@dataclass(frozen=True)
class LinkLockout:
    """The phone may text no link code for `retry_after_s` seconds: its window is full of wrong
    ones; or, `busy`, the room is still held by codes being checked (or whose check never settled)."""

    retry_after_s: int
    busy: bool = False


class LinkRequests:
    def __init__(
        self,
        client: "DynamoDBClient",
        table_name: str,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock
        self._sleep = sleep

    def request_link(self, phone: str, code: str, until_s: int) -> bool:
        """The phone texted LINK <code>: if the code is one we issued and still valid, record it on
        the phone, waiting for its YES until `until_s` (nothing is linked yet); False otherwise."""
        normalized = normalize_link_code(code)
        if normalized is None or valid_code(self._client, self._table, normalized, self._clock()) is None:
            return False
        try:
            with store_call("could not record the link request"):
                self._client.update_item(
                    TableName=self._table,
                    Key=phone_key(phone),
                    UpdateExpression="SET link_code = :code, link_confirm_until = :until",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":code": {"S": normalized}, ":until": {"N": str(until_s)}},
                )
        except ConditionFailed as error:
            raise StoreError("could not record the link request: the number is unknown") from error
        return True

    def take_link_attempt(self, phone: str, limit: RateLimit) -> LinkAttempt | LinkLockout:
        """Count one link code texted from `phone` before it is checked, if the current fixed window
        has room: the attempt, to settle once the code is checked (`settle_link_attempt`). Else
        the lockout, with the seconds until the phone may try again.

        Counted first, atomically, so texts sent at once cannot check more codes than the limit
        allows. A window's count is an item of its own (`keys.link_tries_key`), so there is one
        update to race for, and a refused update means the window has no room: then the count is
        read, and if codes still being checked hold the room (not wrong ones), the text waits for
        them to settle and tries again. A right code gives its room back, so texts with a right
        code sent at once are not locked out; only wrong ones lock the phone out. A code whose
        check never settled (the function stopped) keeps its room till the window ends: a text
        that waited for it in vain is told to try again shortly (`busy`), not that it is locked out."""
        waits = iter(PENDING_WAITS_S)
        while True:
            window = int(self._clock() // limit.window_s)
            ends = (window + 1) * limit.window_s
            key = link_tries_key(phone, window)
            try:
                with store_call("could not count a link code"):
                    self._client.update_item(
                        TableName=self._table,
                        Key=key,
                        # Expires when its window ends: nothing of the number outlives the lockout.
                        UpdateExpression="ADD taken :one SET expires_at = :ends",
                        ConditionExpression="attribute_not_exists(taken) OR taken < :max",
                        ExpressionAttributeValues={
                            ":one": {"N": "1"},
                            ":max": {"N": str(limit.messages)},
                            ":ends": {"N": str(ends)},
                        },
                    )
                return LinkAttempt(phone, window)
            except ConditionFailed:
                pass
            with store_call("could not count a link code"):
                item = self._client.get_item(TableName=self._table, Key=key, ConsistentRead=True).get("Item", {})
            if int(item.get("wrong", {}).get("N", "0")) >= limit.messages:
                return LinkLockout(max(1, int(ends - self._clock())))
            if (wait := next(waits, None)) is None:
                return LinkLockout(BUSY_RETRY_S, busy=True)
            self._sleep(wait)

    def settle_link_attempt(self, attempt: LinkAttempt, right: bool) -> None:
        """The code of `attempt` was checked: a right one gives its room back (only wrong codes
        count against the phone), a wrong one stays counted and is recorded as wrong."""
        if right:
            expression, condition = "ADD taken :minus", "taken > :zero"
            values = {":minus": {"N": "-1"}, ":zero": {"N": "0"}}
        else:
            expression, condition, values = "ADD wrong :one", "attribute_exists(taken)", {":one": {"N": "1"}}
        try:
            with store_call("could not count a link code"):
                self._client.update_item(
                    TableName=self._table,
                    Key=link_tries_key(attempt.phone, attempt.window),
                    UpdateExpression=expression,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=values,
                )
        except ConditionFailed:
            pass  # the window's count expired meanwhile: nothing of it left to settle
