"""Owns a phone number's items: who a number belongs to, its SMS opt-out, the one-time link codes
that prove the person holds both the phone and the app account, and the link itself (what a phone
texts while it waits for its YES, and the count of its codes, are `link_requests`').
"""

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger

from onboarding.config import Limits, RateLimit
from onboarding.model.errors import StoreError
from onboarding.model.users import LinkCode, PhoneOwner, is_sms_only, new_link_code, normalize_link_code
from onboarding.persistence.calls import (
    ConditionFailed,
    KeyCollision,
    Transaction,
    TransactionCancelled,
    store_call,
    with_fresh_keys,
)
from onboarding.persistence.rate_limit import RATE_ITEM, RateLimiter
from onboarding.persistence.schema import (
    CONTACT_PREFIX,
    LINK_POINTER_PREFIX,
    contact_key,
    link_key,
    partition,
    phone_key,
    user_key,
)

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient


logger = Logger(child=True)


OWNER_ITEM, CODE_ITEM = "owner", "code"


LINK_CODE_COUNTER = "LINK#"  # the rate limit's counter of link codes (LIMIT#LINK#<window>)


class PhoneDirectory:
    def __init__(
        self,
        client: "DynamoDBClient",
        table_name: str,
        limits: Limits,
        rate_limits: RateLimiter,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._table = table_name
        self._limits = limits
        self._rate_limits = rate_limits
        self._clock = clock

    def find_owner(self, phone: str) -> PhoneOwner | None:
        """Who `phone` belongs to, or None if it never wrote to us nor was linked."""
        with store_call("could not read the phone number's owner"):
            item = self._client.get_item(TableName=self._table, Key=phone_key(phone), ConsistentRead=True).get("Item")
        if item is None:
            return None
        try:
            erase_until = item.get("erase_requested_until", {}).get("N")
            confirm_until = item.get("link_confirm_until", {}).get("N")
            return PhoneOwner(
                phone,
                item["user_id"]["S"],
                item.get("opted_out", {}).get("BOOL", False),
                merge_from=item.get("merge_from", {}).get("S"),
                erase_requested_until=int(erase_until) if erase_until else None,
                merge_since_ms=int(item.get("merge_since_ms", {}).get("N", "0")),
                link_code=item.get("link_code", {}).get("S"),
                link_confirm_until=int(confirm_until) if confirm_until else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise StoreError("the phone number's owner item is malformed") from error

    def find_or_create_owner(self, phone: str, new_user_id: Callable[[], str]) -> PhoneOwner:
        """The phone's owner; a number we have never seen becomes a new user `new_user_id()`."""

        def attempt() -> PhoneOwner:
            if (owner := self.find_owner(phone)) is not None:
                return owner
            user_id = new_user_id()
            transaction = Transaction(self._table)
            self._add_owner(transaction, phone, user_id, previous=None)
            transaction.add("contact", "Put", {"Item": contact_key(user_id, phone)})
            try:
                transaction.run(self._client, "could not record the phone number's owner")
            except TransactionCancelled:
                logger.info("Phone number claimed concurrently; reading the winner")
                raise KeyCollision from None
            return PhoneOwner(phone, user_id, opted_out=False)

        return with_fresh_keys(self._limits.write_attempts, "the phone number's owner", attempt)

    def link(self, phone: str, user_id: str) -> PhoneOwner:
        """Make `phone` belong to `user_id`; keeps its opt-out. (Callers prove possession first:
        see `link_by_code`.)"""
        previous = self.find_owner(phone)
        transaction = self._link_transaction(phone, user_id, previous)
        try:
            transaction.run(self._client, "could not link the phone number")
        except TransactionCancelled as cancelled:
            raise StoreError("the phone number's owner changed while linking it") from cancelled
        return PhoneOwner(phone, user_id, previous.opted_out if previous else False)

    def link_by_code(self, phone: str, code: str) -> PhoneOwner | None:
        """Link `phone` to the user a one-time code was made for, using the code up in the same
        transaction: a failed link leaves the code usable, and a code links one phone only once.
        An unknown, expired or already used code gives None."""
        normalized = normalize_link_code(code)
        if normalized is None or (user_id := valid_code(self._client, self._table, normalized, self._clock())) is None:
            return None
        now = int(self._clock())
        previous = self.find_owner(phone)
        transaction = Transaction(self._table).add(
            CODE_ITEM,
            "Delete",
            {
                "Key": link_key(normalized),
                "ConditionExpression": "user_id = :user AND expires_at > :now",
                "ExpressionAttributeValues": {":user": {"S": user_id}, ":now": {"N": str(now)}},
            },
        )
        # What the number told us by text before it was linked joins the app user's memory
        # (onboarding.linking); recorded on the owner until that is done, so it can be finished later.
        merge_from = (
            previous.user_id if previous and previous.user_id != user_id and is_sms_only(previous.user_id) else None
        )
        now_ms = int(self._clock() * 1000)
        self._link_transaction(phone, user_id, previous, transaction, merge_from, now_ms)
        try:
            transaction.run(self._client, "could not link the phone number")
        except TransactionCancelled as cancelled:
            if CODE_ITEM in cancelled.failed:
                return None  # used (or expired) between our read and the transaction
            raise StoreError("the phone number's owner changed while linking it") from cancelled
        return PhoneOwner(
            phone,
            user_id,
            previous.opted_out if previous else False,
            merge_from=merge_from,
            merge_since_ms=now_ms if merge_from else 0,
        )

    def _add_owner(
        self,
        transaction: Transaction,
        phone: str,
        user_id: str,
        previous: PhoneOwner | None,
        merge_from: str | None = None,
        merge_since_ms: int = 0,
    ) -> None:
        """The owner item naming `user_id`, conditional on the owner not having changed since read;
        with `merge_from`, the SMS-only user whose memory joins it, and when the link was made."""
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "user_id = :previous",
                "ExpressionAttributeValues": {":previous": {"S": previous.user_id}},
            }
            if previous
            else {"ConditionExpression": "attribute_not_exists(pk)"}
        )
        opted_out = previous.opted_out if previous else False
        item = {**phone_key(phone), "user_id": {"S": user_id}, "opted_out": {"BOOL": opted_out}}
        if merge_from is not None:
            item["merge_from"] = {"S": merge_from}
            item["merge_since_ms"] = {"N": str(merge_since_ms)}
        transaction.add(OWNER_ITEM, "Put", {"Item": item, **condition})

    def _link_transaction(
        self,
        phone: str,
        user_id: str,
        previous: PhoneOwner | None,
        transaction: Transaction | None = None,
        merge_from: str | None = None,
        merge_since_ms: int = 0,
    ) -> Transaction:
        """The writes that move `phone` to `user_id`, conditional on its owner not having changed."""
        transaction = transaction or Transaction(self._table)
        self._add_owner(transaction, phone, user_id, previous, merge_from, merge_since_ms)
        transaction.add("contact", "Put", {"Item": contact_key(user_id, phone)})
        if previous and previous.user_id != user_id:
            transaction.add("old-contact", "Delete", {"Key": contact_key(previous.user_id, phone)})
        return transaction

    def merge_done(self, phone: str, merged_user_id: str) -> None:
        """Record that the memory of `merged_user_id` has joined the phone's owner."""
        try:
            with store_call("could not record the finished merge"):
                self._client.update_item(
                    TableName=self._table,
                    Key=phone_key(phone),
                    UpdateExpression="REMOVE merge_from",
                    ConditionExpression="merge_from = :merged",
                    ExpressionAttributeValues={":merged": {"S": merged_user_id}},
                )
        except ConditionFailed:
            pass  # finished already (by the worker or an earlier try)

    def request_erase(self, phone: str, until_s: int) -> None:
        """The person texted DELETE MY DATA: they may confirm until `until_s` (epoch seconds)."""
        try:
            with store_call("could not record the erase request"):
                self._client.update_item(
                    TableName=self._table,
                    Key=phone_key(phone),
                    UpdateExpression="SET erase_requested_until = :until",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":until": {"N": str(until_s)}},
                )
        except ConditionFailed as error:
            raise StoreError("could not record the erase request: the number is unknown") from error

    def set_opted_out(self, phone: str, opted_out: bool) -> None:
        """Record an SMS opt-out (STOP) or opt-in (START) for a number we know."""
        try:
            with store_call("could not record the SMS opt-out"):
                self._client.update_item(
                    TableName=self._table,
                    Key=phone_key(phone),
                    UpdateExpression="SET opted_out = :opted_out",
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeValues={":opted_out": {"BOOL": opted_out}},
                )
        except ConditionFailed as error:
            raise StoreError("could not record the SMS opt-out: the number is unknown") from error

    def phones_of(self, user_id: str) -> tuple[str, ...]:
        """Every phone number linked to the user."""
        with store_call("could not read the user's phone numbers"):
            page = self._client.query(
                TableName=self._table,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :contact)",
                ExpressionAttributeValues={":pk": partition(user_id), ":contact": {"S": CONTACT_PREFIX}},
            )
        return tuple(item["sk"]["S"].removeprefix(CONTACT_PREFIX) for item in page.get("Items", []))

    def create_link_code(self, user_id: str, rate_limit: RateLimit | None = None) -> LinkCode:
        """A one-time code the user texts from a phone to link that phone to their account; with a
        `rate_limit`, counted in the same transaction (RateLimitedError when the window is full)."""

        def attempt() -> LinkCode:
            code = new_link_code()
            expires = int(self._clock()) + self._limits.link_code_lifetime_s
            transaction = Transaction(self._table).add(
                CODE_ITEM,
                "Put",
                {
                    "Item": {**link_key(code), "user_id": {"S": user_id}, "expires_at": {"N": str(expires)}},
                    "ConditionExpression": "attribute_not_exists(pk)",
                },
            )
            # The code lives outside the user's partition; this pointer (gone with it by TTL) is how
            # erasure finds it. Same transaction: never one without the other.
            pointer = {**user_key(user_id, f"{LINK_POINTER_PREFIX}{code}"), "expires_at": {"N": str(expires)}}
            transaction.add("pointer", "Put", {"Item": pointer})
            if rate_limit is not None:
                self._rate_limits.add_count(transaction, user_id, rate_limit, LINK_CODE_COUNTER)
            try:
                transaction.run(self._client, "could not store the link code")
            except TransactionCancelled as cancelled:
                if rate_limit is not None and RATE_ITEM in cancelled.failed:
                    raise self._rate_limits.refusal(rate_limit, "phone-link codes") from None
                raise KeyCollision from None
            return LinkCode(code, datetime.fromtimestamp(expires, UTC))

        return with_fresh_keys(self._limits.write_attempts, "the link code", attempt)


def valid_code(client: "DynamoDBClient", table: str, normalized: str, now_s: float) -> str | None:
    """The user a stored, unexpired link code was made for; None for any other code."""
    with store_call("could not read the link code"):
        item = client.get_item(TableName=table, Key=link_key(normalized), ConsistentRead=True).get("Item")
    # TTL deletion lags by days, so the expiry is checked here (and again where the code is used).
    if item is None or int(item.get("expires_at", {}).get("N", "0")) <= int(now_s):
        return None
    return str(item["user_id"]["S"])
