"""The store's side of client message ids: every failure is a StoreError (or a clear refusal)."""

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onboarding.model.errors import ClientIdConflictError, StoreError
from onboarding.model.history import LeasedTurn
from onboarding.model.messages import Message
from onboarding.persistence import Repositories
from tests.support.faults import fail_nth_call
from tests.support.seed import commit

from .conftest import TABLE


def _cancelled(*codes: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


def _raise_once(dynamodb: Any, error: ClientError) -> None:
    real = dynamodb.transact_write_items
    raised: list[int] = []

    def transact(**request: Any) -> Any:
        if not raised:
            raised.append(1)
            raise error
        return real(**request)

    dynamodb.transact_write_items = transact


def _lease(store: Repositories, user_id: str, client_id: str, content: str) -> LeasedTurn:
    return store.writes.lease_user_message(user_id, client_id, content)


def _reply(store: Repositories, user_id: str, client_id: str, content: str) -> Message:
    """The reply to a client message id's turn."""
    return commit(store, user_id, [Message("assistant", content)], client_id=client_id).messages[-1]


WRITES: dict[str, Callable[[Repositories, str, str, str], LeasedTurn | Message]] = {
    "lease_user_message": _lease,
    "commit_reply": _reply,
}


def test_a_malformed_id_is_refused(store: Repositories) -> None:
    with pytest.raises(ValueError, match="client message id"):
        store.writes.lease_user_message("u", "not valid!", "hi")


@pytest.mark.parametrize("write", WRITES)
def test_a_message_key_collision_is_retried_with_a_new_key(store: Repositories, dynamodb: Any, write: str) -> None:
    store.writes.lease_user_message("u", "m1", "hi")
    _raise_once(dynamodb, _cancelled("ConditionalCheckFailed", "None"))
    WRITES[write](store, "u", "m1" if write == "commit_reply" else "m2", "text")
    assert len(store.conversations.load_turn("u", 20).messages) == 2


@pytest.mark.parametrize("write", WRITES)
def test_a_failed_transaction_is_a_store_error(store: Repositories, dynamodb: Any, write: str) -> None:
    store.writes.lease_user_message("u", "m1", "hi")
    fail_nth_call(dynamodb, "transact_write_items", 1)
    with pytest.raises(StoreError):
        WRITES[write](store, "u", "m1" if write == "commit_reply" else "m2", "text")


def test_endless_key_collisions_give_up_with_a_store_error(store: Repositories, dynamodb: Any) -> None:
    def always(**_: Any) -> Any:
        raise _cancelled("ConditionalCheckFailed", "None")

    dynamodb.transact_write_items = always
    with pytest.raises(StoreError, match="free key"):
        store.writes.lease_user_message("u", "m1", "hi")
    with pytest.raises(StoreError, match="free key"):
        _reply(store, "u", "m1", "hi")


def test_a_reply_for_an_unknown_id_is_a_store_error(store: Repositories) -> None:
    with pytest.raises(StoreError, match="record is missing"):
        _reply(store, "u", "never-leased", "reply")


def test_reading_the_earlier_delivery_can_fail(store: Repositories, dynamodb: Any) -> None:
    store.writes.lease_user_message("u", "m1", "hi")
    fail_nth_call(dynamodb, "get_item", 1)
    with pytest.raises(StoreError, match="earlier delivery"):
        store.writes.lease_user_message("u", "m1", "hi")


def test_an_earlier_delivery_whose_message_is_gone_is_a_store_error(store: Repositories, dynamodb: Any) -> None:
    leased = store.writes.lease_user_message("u", "m1", "hi")
    created_ms, suffix = leased.user_message.message_id.split("-")
    dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": "USER#u"}, "sk": {"S": f"MSG#{created_ms}#{suffix}"}})
    with pytest.raises(StoreError, match="message is missing"):
        store.writes.lease_user_message("u", "m1", "hi")


def test_a_conflict_is_its_own_error(store: Repositories) -> None:
    store.writes.lease_user_message("u", "m1", "hi")
    with pytest.raises(ClientIdConflictError):
        store.writes.lease_user_message("u", "m1", "something else")


def test_delivery_is_recorded_and_its_failure_is_a_store_error(store: Repositories) -> None:
    store.writes.lease_user_message("u", "m1", "hi")
    _reply(store, "u", "m1", "hello")
    store.client_records.mark_delivered("u", "m1")
    assert store.writes.lease_user_message("u", "m1", "hi").delivered
    with pytest.raises(StoreError):
        store.client_records.mark_delivered("u", "never-leased")
