"""Owns a phone's side of linking, before anything is linked: the link code it texted, waiting for
its YES (nothing merges before the phone agrees), and the wrong codes it texted, counted in fixed
windows and locked out past a few (issue 28; decision 0015). The link itself is `PhoneDirectory`'s."""

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onboarding.config import RateLimit
from onboarding.model.errors import StoreError
from onboarding.persistence.calls import ConditionFailed, store_call
from onboarding.persistence.keys import link_key, normalize_link_code, phone_key

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


def valid_code(client: "DynamoDBClient", table: str, normalized: str, now_s: float) -> str | None:
    """The user a stored, unexpired link code was made for; None for any other code."""
    with store_call("could not read the link code"):
        item = client.get_item(TableName=table, Key=link_key(normalized), ConsistentRead=True).get("Item")
    # TTL deletion lags by days, so the expiry is checked here (and again where the code is used).
    if item is None or int(item.get("expires_at", {}).get("N", "0")) <= int(now_s):
        return None
    return str(item["user_id"]["S"])


class LinkRequests:
    def __init__(self, client: "DynamoDBClient", table_name: str, clock: Callable[[], float] = time.time) -> None:
        self._client = client
        self._table = table_name
        self._clock = clock

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

    def take_link_attempt(self, phone: str, limit: RateLimit) -> int | None:
        """Count one link code texted from `phone` before it is checked, in the current fixed window,
        if the window has room (None); else the seconds until the phone may try again. Counted
        first, atomically, so texts sent at once cannot check more codes than the limit allows; a
        code that turns out right is given back (`give_back_link_attempt`): only wrong ones count."""
        window = int(self._clock() // limit.window_s)
        values = {":one": {"N": "1"}, ":window": {"N": str(window)}, ":max": {"N": str(limit.messages)}}
        same_window: dict[str, Any] = {
            "UpdateExpression": "ADD link_failures :one",
            "ConditionExpression": "link_failures_window = :window AND link_failures < :max",
            "ExpressionAttributeValues": values,
        }
        new_window: dict[str, Any] = {
            "UpdateExpression": "SET link_failures = :one, link_failures_window = :window",
            "ConditionExpression": "attribute_exists(pk) AND "
            "(attribute_not_exists(link_failures_window) OR link_failures_window <> :window)",
            "ExpressionAttributeValues": {":one": values[":one"], ":window": values[":window"]},
        }
        for update in (same_window, new_window):
            try:
                with store_call("could not count a link code"):
                    self._client.update_item(TableName=self._table, Key=phone_key(phone), **update)
                return None
            except ConditionFailed:
                continue
        # The window is this one and full (or the number is unknown, which the intake never asks).
        return max(1, int((window + 1) * limit.window_s - self._clock()))

    def give_back_link_attempt(self, phone: str, limit: RateLimit) -> None:
        """A code that was right does not count against the phone (see `take_link_attempt`)."""
        window = int(self._clock() // limit.window_s)
        try:
            with store_call("could not count a link code"):
                self._client.update_item(
                    TableName=self._table,
                    Key=phone_key(phone),
                    UpdateExpression="ADD link_failures :minus",
                    ConditionExpression="link_failures_window = :window AND link_failures > :zero",
                    ExpressionAttributeValues={
                        ":minus": {"N": "-1"},
                        ":window": {"N": str(window)},
                        ":zero": {"N": "0"},
                    },
                )
        except ConditionFailed:
            pass  # a new window began meanwhile: nothing of this one to give back
