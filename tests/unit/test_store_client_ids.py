"""The store's side of client message ids: every failure is a StoreError (or a clear refusal)."""

from typing import Any

import pytest
from botocore.exceptions import ClientError

from onboarding.store import ClientIdConflictError, ConversationStore, StoreError
from tests.support.faults import fail_nth_call


def _cancelled(*codes: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "TransactionCanceledException", "Message": "cancelled"},
            "CancellationReasons": [{"Code": code} for code in codes],
        },
        "TransactWriteItems",
    )


def _raise_once(store: ConversationStore, error: ClientError) -> None:
    real = store._client.transact_write_items
    raised: list[int] = []

    def transact(**request: Any) -> Any:
        if not raised:
            raised.append(1)
            raise error
        return real(**request)

    store._client.transact_write_items = transact  # type: ignore[method-assign]


def test_a_malformed_id_is_refused(store: ConversationStore) -> None:
    with pytest.raises(ValueError, match="client message id"):
        store.append_user_message_once("u", "not valid!", "hi")


@pytest.mark.parametrize("write", ["append_user_message_once", "append_reply_once"])
def test_a_message_key_collision_is_retried_with_a_new_key(store: ConversationStore, write: str) -> None:
    store.append_user_message_once("u", "m1", "hi")
    _raise_once(store, _cancelled("ConditionalCheckFailed", "None"))
    getattr(store, write)("u", "m1" if write == "append_reply_once" else "m2", "text")
    assert len(store.load_turn_context("u").messages) == 2


@pytest.mark.parametrize("write", ["append_user_message_once", "append_reply_once"])
def test_a_failed_transaction_is_a_store_error(store: ConversationStore, write: str) -> None:
    store.append_user_message_once("u", "m1", "hi")
    fail_nth_call(store._client, "transact_write_items", 1)
    with pytest.raises(StoreError):
        getattr(store, write)("u", "m1" if write == "append_reply_once" else "m2", "text")


def test_endless_key_collisions_give_up_with_a_store_error(store: ConversationStore) -> None:
    def always(**_: Any) -> Any:
        raise _cancelled("ConditionalCheckFailed", "None")

    store._client.transact_write_items = always  # type: ignore[method-assign]
    with pytest.raises(StoreError, match="free key"):
        store.append_user_message_once("u", "m1", "hi")
    with pytest.raises(StoreError, match="free key"):
        store.append_reply_once("u", "m1", "hi")


def test_a_reply_for_an_unknown_id_is_a_store_error(store: ConversationStore) -> None:
    with pytest.raises(StoreError, match="record is missing"):
        store.append_reply_once("u", "never-claimed", "reply")


def test_reading_the_earlier_delivery_can_fail(store: ConversationStore) -> None:
    store.append_user_message_once("u", "m1", "hi")
    fail_nth_call(store._client, "get_item", 1)
    with pytest.raises(StoreError, match="earlier delivery"):
        store.append_user_message_once("u", "m1", "hi")


def test_an_earlier_delivery_whose_message_is_gone_is_a_store_error(store: ConversationStore) -> None:
    claimed = store.append_user_message_once("u", "m1", "hi")
    created_ms, suffix = claimed.user_message.message_id.split("-")
    store._client.delete_item(
        TableName="onboarding-memory-test", Key={"pk": {"S": "USER#u"}, "sk": {"S": f"MSG#{created_ms}#{suffix}"}}
    )
    with pytest.raises(StoreError, match="message is missing"):
        store.append_user_message_once("u", "m1", "hi")


def test_a_conflict_is_its_own_error(store: ConversationStore) -> None:
    store.append_user_message_once("u", "m1", "hi")
    with pytest.raises(ClientIdConflictError):
        store.append_user_message_once("u", "m1", "something else")


def test_delivery_is_recorded_and_its_failure_is_a_store_error(store: ConversationStore) -> None:
    store.append_user_message_once("u", "m1", "hi")
    store.append_reply_once("u", "m1", "hello")
    store.mark_delivered("u", "m1")
    assert store.append_user_message_once("u", "m1", "hi").delivered
    with pytest.raises(StoreError):
        store.mark_delivered("u", "never-claimed")
