"""The phone directory: owners, links by one-time code, opt-outs."""

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError

from onboarding.config import Limits
from onboarding.model.errors import InvalidPhoneError, StoreError
from onboarding.model.users import LINK_CODE_LENGTH, PhoneOwner
from onboarding.persistence import Repositories

from .conftest import TABLE

PHONE = "+15551230001"


def _ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"sms-{next(counter)}"


def test_a_new_number_becomes_a_new_user_and_stays_theirs(store: Repositories) -> None:
    new_ids = _ids()
    first = store.phones.find_or_create_owner(PHONE, new_ids)
    again = store.phones.find_or_create_owner(PHONE, new_ids)
    assert first.user_id == again.user_id == "sms-1"
    assert not first.opted_out
    assert store.phones.phones_of("sms-1") == (PHONE,)


def test_an_unknown_number_has_no_owner(store: Repositories) -> None:
    assert store.phones.find_owner(PHONE) is None


@pytest.mark.parametrize("phone", ["5551230001", "+0123456789", "+1 555 123", "", "+1555123000100000"])
def test_numbers_not_in_e164_are_refused(store: Repositories, phone: str) -> None:
    with pytest.raises(InvalidPhoneError, match=r"E\.164"):
        store.phones.find_or_create_owner(phone, _ids())


def test_a_code_links_a_phone_once_and_moves_it_between_users(store: Repositories) -> None:
    store.phones.find_or_create_owner(PHONE, _ids())  # texted first, as sms-1
    store.phones.set_opted_out(PHONE, True)
    code = store.phones.create_link_code("app-user")
    assert len(code.code) == LINK_CODE_LENGTH

    owner = store.phones.link_by_code(PHONE, code.code.lower()[:4] + "-" + code.code[4:])  # typed loosely
    assert owner is not None
    assert owner.user_id == "app-user"
    assert owner.opted_out  # the number's STOP survives the link
    assert store.phones.phones_of("app-user") == (PHONE,)
    assert store.phones.phones_of("sms-1") == ()
    assert store.phones.link_by_code("+15551230002", code.code) is None  # one time only
    assert store.phones.find_owner("+15551230002") is None


def test_a_failed_link_leaves_the_code_usable(store: Repositories, dynamodb: Any) -> None:
    code = store.phones.create_link_code("app-user").code
    real = dynamodb.transact_write_items
    _failing(dynamodb, "transact_write_items")
    with pytest.raises(StoreError):
        store.phones.link_by_code(PHONE, code)
    dynamodb.transact_write_items = real
    owner = store.phones.link_by_code(PHONE, code)
    assert owner is not None
    assert owner.user_id == "app-user"


def test_a_code_used_between_read_and_link_links_nothing(store: Repositories, dynamodb: Any) -> None:
    code = store.phones.create_link_code("app-user").code
    real = dynamodb.transact_write_items

    def used_meanwhile(**request: Any) -> Any:
        dynamodb.transact_write_items = real
        assert store.phones.link_by_code("+15551230009", code) is not None  # another phone wins the race
        return real(**request)

    dynamodb.transact_write_items = used_meanwhile
    assert store.phones.link_by_code(PHONE, code) is None
    assert store.phones.find_owner(PHONE) is None


def test_a_user_may_have_several_numbers(store: Repositories) -> None:
    for phone in (PHONE, "+447700900123"):
        store.phones.link(phone, "app-user")
    assert sorted(store.phones.phones_of("app-user")) == sorted([PHONE, "+447700900123"])


@pytest.mark.parametrize("code", ["", "SHORT", "ABCDEFGHI0", "ABCDEFGHJK!"])
def test_malformed_or_unknown_codes_link_nothing(store: Repositories, code: str) -> None:
    assert store.phones.link_by_code(PHONE, code) is None
    assert store.phones.find_owner(PHONE) is None


def test_an_expired_code_links_nothing_even_before_ttl_removes_it(dynamodb: Any) -> None:
    now = [1_800_000_000.0]
    store = Repositories.over(dynamodb, TABLE, Limits(link_code_lifetime_s=600), clock=lambda: now[0])
    code = store.phones.create_link_code("app-user")
    now[0] += 601
    assert store.phones.link_by_code(PHONE, code.code) is None


def test_opt_out_of_an_unknown_number_is_a_store_error(store: Repositories) -> None:
    with pytest.raises(StoreError):
        store.phones.set_opted_out(PHONE, True)


def test_opt_out_and_back_in(store: Repositories) -> None:
    store.phones.find_or_create_owner(PHONE, _ids())
    store.phones.set_opted_out(PHONE, True)
    assert store.phones.find_owner(PHONE) == PhoneOwner(PHONE, "sms-1", opted_out=True)
    store.phones.set_opted_out(PHONE, False)
    assert store.phones.find_owner(PHONE) == PhoneOwner(PHONE, "sms-1", opted_out=False)


def test_a_concurrent_first_text_settles_on_one_owner(store: Repositories, dynamodb: Any) -> None:
    """Another worker claims the number between our read and our write: we read the winner."""
    real_transact = dynamodb.transact_write_items
    calls: list[int] = []

    def racing_transact(**request: Any) -> Any:
        if not calls:
            calls.append(1)
            store.phones.find_or_create_owner(PHONE, lambda: "winner")
        return real_transact(**request)

    dynamodb.transact_write_items = racing_transact
    try:
        assert store.phones.find_or_create_owner(PHONE, lambda: "loser").user_id == "winner"
    finally:
        dynamodb.transact_write_items = real_transact


def _failing(dynamodb: Any, operation: str, code: str = "InternalServerError") -> None:
    def fail(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": code, "Message": "boom"}}, operation)

    setattr(dynamodb, operation, fail)


@pytest.mark.parametrize(
    ("operation", "call"),
    [
        ("get_item", lambda s: s.phones.find_owner(PHONE)),
        ("transact_write_items", lambda s: s.phones.find_or_create_owner(PHONE, lambda: "u")),
        ("transact_write_items", lambda s: s.phones.link(PHONE, "u")),
        ("query", lambda s: s.phones.phones_of("u")),
        ("transact_write_items", lambda s: s.phones.create_link_code("u")),
        ("get_item", lambda s: s.phones.link_by_code(PHONE, "ABCDEFGHJK")),
    ],
)
def test_table_failures_are_store_errors(
    store: Repositories, dynamodb: Any, operation: str, call: Callable[[Repositories], object]
) -> None:
    _failing(dynamodb, operation)
    with pytest.raises(StoreError):
        call(store)


def test_a_malformed_owner_item_is_a_store_error(store: Repositories, dynamodb: Any) -> None:
    dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": f"PHONE#{PHONE}"}, "sk": {"S": "~OWNER"}})
    with pytest.raises(StoreError, match="malformed"):
        store.phones.find_owner(PHONE)


def test_contact_items_never_reach_a_turns_context(store: Repositories) -> None:
    store.writes.append_message("app-user", "user", "hello")
    store.phones.link(PHONE, "app-user")
    loaded = store.conversations.load_turn("app-user", message_limit=1)
    assert [m.content for m in loaded.messages] == ["hello"]
