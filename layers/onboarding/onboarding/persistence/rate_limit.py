"""Owns the per-user rate limit's counters: fixed windows, counted in the message's own transaction."""

import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import RateLimit
from onboarding.model.errors import RateLimitedError
from onboarding.persistence.calls import ConditionFailed, Transaction, store_call
from onboarding.persistence.schema import RATE_PREFIX, user_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

logger = Logger(child=True)

RATE_ITEM = "rate"
"""The name of the counting item in a transaction (see `calls.Transaction`)."""


class RateLimiter:
    def __init__(self, client: "DynamoDBClient", table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

    def _window(self, limit: RateLimit) -> tuple[int, float]:
        """The current window's number, and the time it ends."""
        window = int(self._clock() // limit.window_s)
        return window, (window + 1) * limit.window_s

    def add_count(self, transaction: Transaction, user_id: str, limit: RateLimit, counter: str = "") -> None:
        """Add to `transaction` an item (named RATE_ITEM) that counts one message (or, with a
        `counter` name, one of that thing), and fails when the window is full: what is refused is
        never stored, and what is stored is always counted."""
        window, ends = self._window(limit)
        body: dict[str, Any] = {
            "Key": user_key(user_id, f"{RATE_PREFIX}{counter}{window}"),
            "UpdateExpression": "ADD #count :one SET expires_at = :expires",
            "ConditionExpression": "attribute_not_exists(#count) OR #count < :max",
            "ExpressionAttributeNames": {"#count": "message_count"},
            "ExpressionAttributeValues": {
                ":one": {"N": "1"},
                ":max": {"N": str(limit.messages)},
                # Kept an hour past its window, then DynamoDB's TTL removes it.
                ":expires": {"N": str(int(ends) + 3600)},
            },
        }
        transaction.add(RATE_ITEM, "Update", body)

    def refusal(self, limit: RateLimit, what: str = "messages") -> RateLimitedError:
        _, ends = self._window(limit)
        logger.info("Refused by the rate limit", extra={"limit": "messages" if what == "messages" else "link_codes"})
        return RateLimitedError(max(1, math.ceil(ends - self._clock())), what)

    def take_notice(self, user_id: str, limit: RateLimit) -> bool:
        """True the first time it is called in a full window: the one refusal the user is told
        about over SMS, so a burst of texts is not answered by a burst of warnings."""
        window, _ = self._window(limit)
        try:
            with store_call("could not record the rate-limit notice"):
                self._client.update_item(
                    TableName=self._table,
                    Key=user_key(user_id, f"{RATE_PREFIX}{window}"),
                    UpdateExpression="SET notified = :yes",
                    ConditionExpression="attribute_exists(sk) AND attribute_not_exists(notified)",
                    ExpressionAttributeValues={":yes": {"BOOL": True}},
                )
        except ConditionFailed:
            return False
        return True
