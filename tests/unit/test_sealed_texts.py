"""Queued texts are sealed with their user's key (decision 0031), on moto in process (the
dead-letter queue over HTTP is in tests/integration/test_linking_and_erasure.py): the queue holds
neither the text nor the number in the clear; the erase deletes the key, so a text of an erased user
left in a queue cannot be read; a text queued before its phone's link is still read after the merge
(the key joins the app user with the texts); and no key is made for a user erased, or left by their
number, after the text came in."""

import base64
import json
from typing import Any

import boto3
import pytest

from onboarding.account import AccountService
from onboarding.audit import Caller
from onboarding.config import DEFAULT_LIMITS
from onboarding.model.users import PhoneOwner
from onboarding.persistence import Repositories
from onboarding.persistence.schema import TEXT_KEY_PREFIX, text_key
from onboarding.sms.inbound import InboundSms, SmsTurnRequest
from onboarding.sms.intake import SmsIntake
from onboarding.sms.sealing import QueuedTextError, SealedText, read_queued
from tests.support.clock import FakeClock
from tests.support.sqs_events import text_keys
from tests.unit.conftest import TABLE
from tests.unit.test_linking import intake_with

pytestmark = pytest.mark.unit

PHONE = "+15551230123"
TOLD = "My knee has hurt since the marathon"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_800_000_000.0)


@pytest.fixture
def parts(dynamodb: Any, sms_queue: str, clock: FakeClock) -> tuple[SmsIntake, Repositories]:
    return intake_with(dynamodb, sms_queue, clock)


def _text(intake: SmsIntake, body: str, sid: list[int] = [0]) -> str | None:  # noqa: B006  (a counter)
    sid[0] += 1
    return intake.accept(InboundSms(message_id=f"SM{sid[0]}", from_phone=PHONE, to_phone="+15550000000", body=body))


def _taken(sms_queue: str) -> list[dict[str, Any]]:
    """The queue's messages, taken as the worker's event source takes them (with their attributes)."""
    sqs: Any = boto3.client("sqs", region_name="us-east-1")
    messages: list[dict[str, Any]] = sqs.receive_message(
        QueueUrl=sms_queue, MaxNumberOfMessages=10, AttributeNames=["All"]
    ).get("Messages", [])
    for message in messages:
        sqs.delete_message(QueueUrl=sms_queue, ReceiptHandle=message["ReceiptHandle"])
    return messages


def _owner(store: Repositories) -> str:
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    return owner.user_id


def test_a_queued_text_holds_neither_the_text_nor_the_number_in_the_clear(
    parts: tuple[SmsIntake, Repositories], sms_queue: str
) -> None:
    intake, store = parts
    assert _text(intake, TOLD) is None
    [message] = _taken(sms_queue)
    whole = json.dumps(message)
    assert TOLD not in whole
    assert PHONE.removeprefix("+") not in whole
    assert "SM" + "1" not in json.dumps(message["Attributes"]), "the MessageSid names the text at Twilio"
    request = read_queued(message["Body"], text_keys(store))
    assert request is not None
    assert (request.text, request.from_phone, request.user_id) == (TOLD, PHONE, _owner(store))


def test_an_erase_leaves_the_users_queued_texts_unreadable(
    parts: tuple[SmsIntake, Repositories], sms_queue: str
) -> None:
    """Texted, then erased by text before the worker took the text (or after it failed into the
    dead-letter queue): what is queued is unreadable after the erase. Another number's text is not."""
    intake, store = parts
    _text(intake, TOLD)
    erased = _owner(store)
    assert "YES DELETE" in (_text(intake, "DELETE MY DATA") or "")
    assert "your data is erased" in (_text(intake, "YES DELETE") or "")
    other = InboundSms(message_id="SM-other", from_phone="+15551230999", to_phone="+15550000000", body="Hello")
    intake.accept(other)
    messages = {m["Attributes"]["MessageGroupId"]: m["Body"] for m in _taken(sms_queue)}
    assert read_queued(messages[erased], text_keys(store)) is None
    [kept] = [body for group, body in messages.items() if group != erased]
    assert getattr(read_queued(kept, text_keys(store)), "text", None) == "Hello"


def test_a_text_queued_before_its_phone_is_linked_is_read_after_the_merge(
    parts: tuple[SmsIntake, Repositories], sms_queue: str
) -> None:
    """The SMS-only user's memory joins the app user and is erased; their key comes along with the
    texts, so the text still waiting in the queue is read (and answered as the app user, whom the
    erase mark names). Then the app user's erase makes it unreadable too."""
    intake, store = parts
    _text(intake, TOLD)
    sms_user = _owner(store)
    code = store.phones.create_link_code("app-user").code
    assert "Reply YES" in (_text(intake, f"LINK {code}") or "")
    assert "Linked!" in (_text(intake, "YES") or "")
    assert store.erasure.erased_mark(sms_user) is not None, "the merge erased the SMS-only user"
    [message] = _taken(sms_queue)
    request = read_queued(message["Body"], text_keys(store))
    assert request is not None
    assert (request.text, request.user_id) == (TOLD, sms_user)
    AccountService(store, DEFAULT_LIMITS).erase("app-user", Caller.verified_user("app-user", "DELETE:/me"))
    assert read_queued(message["Body"], text_keys(store)) is None


def test_no_key_is_made_for_a_user_erased_after_the_text_came_in(
    parts: tuple[SmsIntake, Repositories], dynamodb: Any, clock: FakeClock
) -> None:
    """The webhook read the number's owner, then the owner was erased (a YES DELETE at the same
    moment): a key made now would make that text readable after the erase."""
    intake, store = parts
    _text(intake, "DELETE MY DATA")  # no text queued yet: the user has no key
    user = _owner(store)
    received_ms = int(clock() * 1000)
    clock.advance(0.5)
    AccountService(store, DEFAULT_LIMITS).erase(user, Caller.function("sms:erase-by-text"))
    store.phones.find_or_create_owner(PHONE, lambda: user)  # even with the number theirs again
    assert store.text_keys.for_queueing(PHONE, user, received_ms) is None
    left = dynamodb.get_item(TableName=TABLE, Key=text_key(user, user)).get("Item")
    assert left is None, "a key was made for an erased user"


def test_a_text_whose_number_was_linked_meanwhile_is_queued_for_the_app_user(
    parts: tuple[SmsIntake, Repositories], sms_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The webhook read the number's owner (the SMS-only user, who had no key yet), then the number
    was linked: a key made for the SMS-only user now could miss the link's merge, and the text
    would be unreadable. It is queued for the app user instead."""
    intake, store = parts
    _text(intake, "LINK ABCDEFGHJK")  # the number is known, nothing queued: no key yet
    sms_user = _owner(store)
    stale = PhoneOwner(PHONE, sms_user, opted_out=False)
    assert store.phones.link_by_code(PHONE, store.phones.create_link_code("app-user").code) is not None
    monkeypatch.setattr(store.phones, "find_or_create_owner", lambda *_: stale)  # as read before the link
    _text(intake, TOLD)
    [message] = _taken(sms_queue)
    request = read_queued(message["Body"], text_keys(store))
    assert request is not None
    assert (request.user_id, request.text) == ("app-user", TOLD)


def test_a_sealed_text_cannot_be_altered_or_passed_off_as_another_users(
    parts: tuple[SmsIntake, Repositories], sms_queue: str
) -> None:
    """AES-GCM authenticates the sealed part and, as associated data, the user and key it names."""
    intake, store = parts
    _text(intake, TOLD)
    intake.accept(InboundSms(message_id="SM-b", from_phone="+15551230999", to_phone="+15550000000", body="Hello"))
    mine, theirs = (SealedText.model_validate_json(m["Body"]) for m in _taken(sms_queue))
    altered = mine.model_copy(update={"sealed": base64.b64encode(b"x" * 40).decode()})
    cut_short = mine.model_copy(update={"sealed": base64.b64encode(b"x" * 5).decode()})
    not_base64 = mine.model_copy(update={"sealed": "%%%"})
    relabelled = mine.model_copy(update={"user_id": theirs.user_id, "key_id": theirs.key_id})
    for forged in (altered, cut_short, not_base64, relabelled):
        with pytest.raises(QueuedTextError):
            read_queued(forged.model_dump_json(), text_keys(store))


def test_bodies_that_are_not_texts_we_queued_are_refused_without_quoting_them(
    parts: tuple[SmsIntake, Repositories],
) -> None:
    _, store = parts
    for body in ("not json", json.dumps({"text": TOLD, "from_phone": PHONE})):
        with pytest.raises(QueuedTextError) as refused:
            read_queued(body, text_keys(store))
        assert TOLD not in str(refused.value)
        assert refused.value.__cause__ is None


def test_a_text_queued_by_the_version_before_sealing_is_still_read(parts: tuple[SmsIntake, Repositories]) -> None:
    """So a deploy loses no text waiting in the queue."""
    _, store = parts
    plain = SmsTurnRequest(message_id="SM9", user_id="sms-1", from_phone=PHONE, to_phone="+15550000000", text="hi")
    assert read_queued(plain.model_dump_json(), text_keys(store)) == plain


def test_the_key_is_in_the_users_partition_and_the_erase_report_does_not_count_it(
    parts: tuple[SmsIntake, Repositories], dynamodb: Any
) -> None:
    intake, store = parts
    _text(intake, TOLD)
    user = _owner(store)
    items = dynamodb.query(
        TableName=TABLE, KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": f"USER#{user}"}}
    )["Items"]
    assert [item["sk"]["S"] for item in items if item["sk"]["S"].startswith(TEXT_KEY_PREFIX)] == [f"KEY#{user}"]
    report = store.erasure.erase(user)
    assert report.other_items == 0
