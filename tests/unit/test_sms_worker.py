"""The SMS worker: answers in order per user, splits long replies, handles opt-outs and failures per record."""

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from botocore.exceptions import ClientError

from functions.sms_worker.app import make_handler
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.bedrock_emulator.recorded import Fault
from infra.local.lambda_runner import LocalLambdaContext
from infra.local.twilio_emulator import TwilioEmulator
from onboarding.composition import sms_responder
from onboarding.persistence import Repositories
from onboarding.replies import MODEL_APOLOGY, TOO_LONG
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sender import SendError, TwilioSender
from onboarding.sms.split import split_message
from onboarding.turn.service import TurnService
from tests.support.sqs_events import sqs_event, sqs_record

PHONE = "+15551230001"
OUR_NUMBER = "+15550000000"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def sender_for(twilio: TwilioEmulator) -> TwilioSender:
    return TwilioSender(twilio.account_sid, lambda: twilio.auth_token, twilio.url)


@pytest.fixture
def handler(service: TurnService, store: Repositories, twilio: TwilioEmulator, idempotency_table: str) -> Handler:
    responder = sms_responder(service, store, sender_for(twilio))
    return make_handler(responder, DynamoDBPersistenceLayer(table_name=idempotency_table))


def request(sid: str, text: str, user_id: str = "user-1", phone: str = PHONE) -> SmsTurnRequest:
    return SmsTurnRequest(message_id=sid, user_id=user_id, from_phone=phone, to_phone=OUR_NUMBER, text=text)


def call(handler: Handler, event: dict[str, Any]) -> dict[str, Any]:
    return handler(event, LocalLambdaContext(function_name="SmsWorkerFunction", aws_request_id="req-worker-1"))


def test_a_queued_text_is_answered_by_sms_and_both_turns_are_stored(
    handler: Handler, twilio: TwilioEmulator, store: Repositories
) -> None:
    assert call(handler, sqs_event(sqs_record(request("SM1", "Hi coach"))))["batchItemFailures"] == []
    [sent] = twilio.sent
    assert (sent.to, sent.from_) == (PHONE, OUR_NUMBER)
    assert sent.body.startswith("Hi, I'm your coach!")
    stored = store.conversations.load_turn("user-1", 20).messages
    assert [(m.role, m.content) for m in stored] == [("user", "Hi coach"), ("assistant", sent.body)]


def test_a_redelivered_text_is_answered_once(handler: Handler, twilio: TwilioEmulator, store: Repositories) -> None:
    for receive_count in (1, 2, 3):
        call(handler, sqs_event(sqs_record(request("SM1", "Hi coach"), receive_count=receive_count)))
    assert len(twilio.sent) == 1
    assert len(store.conversations.load_turn("user-1", 20).messages) == 2


def test_one_users_texts_are_answered_in_order(handler: Handler, twilio: TwilioEmulator, store: Repositories) -> None:
    texts = ["Hi", "I'm a beginner", "I walk 5 km most days"]
    call(handler, sqs_event(*(sqs_record(request(f"SM{i}", t)) for i, t in enumerate(texts))))
    assert [m.content for m in store.conversations.load_turn("user-1", 20).messages if m.role == "user"] == texts
    assert "I walk 5 km most days" in twilio.sent[-1].body


def test_a_failed_record_holds_back_only_its_own_users_later_texts(
    handler: Handler, twilio: TwilioEmulator, store: Repositories
) -> None:
    bad = sqs_record("not a turn request", group="user-1")
    later_same_user = sqs_record(request("SM2", "second", user_id="user-1"))
    other_user = sqs_record(request("SM3", "hello", user_id="user-2", phone="+15551230002"))
    response = call(handler, sqs_event(bad, later_same_user, other_user))
    failed = {item["itemIdentifier"] for item in response["batchItemFailures"]}
    assert failed == {bad["messageId"], later_same_user["messageId"]}
    assert [s.to for s in twilio.sent] == ["+15551230002"]


def test_a_long_reply_is_sent_in_parts_cut_at_sentences(
    service: TurnService, store: Repositories, twilio: TwilioEmulator
) -> None:
    sentence = "Thanks, noted. " * 20 + "So far we have a great deal to cover, step by step! "
    long_text = sentence * 12
    responder = sms_responder(service, store, sender_for(twilio))
    sent_before = len(twilio.sent)
    parts = responder._send_now(split_message(long_text), request("SM1", "x"))
    assert parts == len(twilio.sent) - sent_before > 1
    assert all(len(s.body) <= 1600 for s in twilio.sent)
    assert all(s.body.endswith(("!", ".")) for s in twilio.sent)


def test_model_failure_sends_an_apology_keeps_the_users_turn_and_is_not_retried(
    handler: Handler, twilio: TwilioEmulator, store: Repositories, emulator: BedrockEmulator
) -> None:
    emulator.queue_fault(Fault("stream_error", after_chunks=1))
    assert call(handler, sqs_event(sqs_record(request("SM1", "Hi"))))["batchItemFailures"] == []
    assert [s.body for s in twilio.sent] == [MODEL_APOLOGY]
    assert [m.role for m in store.conversations.load_turn("user-1", 20).messages] == ["user"]


def test_a_text_over_the_size_limit_gets_a_clear_answer(
    handler: Handler, twilio: TwilioEmulator, store: Repositories
) -> None:
    call(handler, sqs_event(sqs_record(request("SM1", "x" * 40_000))))
    assert [s.body for s in twilio.sent] == [TOO_LONG]
    assert store.conversations.load_turn("user-1", 20).messages == ()


def test_error_21610_records_the_opt_out_and_later_texts_are_not_answered(
    handler: Handler, twilio: TwilioEmulator, store: Repositories
) -> None:
    store.phones.link(PHONE, "user-1")
    twilio.opted_out.add(PHONE)
    assert call(handler, sqs_event(sqs_record(request("SM1", "Hi"))))["batchItemFailures"] == []
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.opted_out
    call(handler, sqs_event(sqs_record(request("SM2", "still there?"))))
    assert twilio.sent == []
    assert [m.content for m in store.conversations.load_turn("user-1", 20).messages if m.role == "user"] == ["Hi"]


def test_other_twilio_errors_fail_the_record_for_a_retry(
    service: TurnService, store: Repositories, twilio: TwilioEmulator, idempotency_table: str
) -> None:
    wrong_token = TwilioSender(twilio.account_sid, lambda: "wrong-token", twilio.url)
    handler = make_handler(
        sms_responder(service, store, wrong_token), DynamoDBPersistenceLayer(table_name=idempotency_table)
    )
    record = sqs_record(request("SM1", "Hi"))
    assert call(handler, sqs_event(record))["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert twilio.sent == []
    with pytest.raises(SendError, match="20003"):
        wrong_token.send(PHONE, OUR_NUMBER, "hello")


def test_a_rotated_auth_token_is_used_without_a_restart(twilio: TwilioEmulator) -> None:
    tokens = ["old-token", twilio.auth_token]
    sender = TwilioSender(twilio.account_sid, lambda: tokens[0], twilio.url)
    with pytest.raises(SendError):
        sender.send(PHONE, OUR_NUMBER, "hello")
    tokens.pop(0)
    sender.send(PHONE, OUR_NUMBER, "hello")
    assert [s.body for s in twilio.sent] == ["hello"]


def test_a_store_failure_fails_the_record_and_nothing_is_sent(
    handler: Handler, twilio: TwilioEmulator, dynamodb: Any
) -> None:
    def fail(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "TransactWriteItems")

    dynamodb.transact_write_items = fail
    record = sqs_record(request("SM1", "Hi"))
    assert call(handler, sqs_event(record))["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert twilio.sent == []


def test_failures_leave_no_phone_number_or_text_in_the_logs(
    service: TurnService,
    store: Repositories,
    twilio: TwilioEmulator,
    idempotency_table: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Twilio's errors quote the number; pydantic's quote the input. Neither may reach the logs."""
    wrong_token = TwilioSender(twilio.account_sid, lambda: "wrong-token", twilio.url)
    handler = make_handler(
        sms_responder(service, store, wrong_token), DynamoDBPersistenceLayer(table_name=idempotency_table)
    )
    private_text = "my secret knee injury"
    malformed = '{"message_id": "SM9", "from_phone": "+15551230001", "text": "' + private_text + '"}'
    records = [sqs_record(request("SM1", private_text)), sqs_record(malformed, group="user-9")]
    response = call(handler, sqs_event(*records))  # every record failed, yet nothing is raised to the runtime
    assert len(response["batchItemFailures"]) == 2
    logged = capsys.readouterr()
    assert PHONE not in logged.out + logged.err
    assert private_text not in logged.out + logged.err


def test_a_send_error_carries_no_twilio_message(twilio: TwilioEmulator) -> None:
    sender = TwilioSender(twilio.account_sid, lambda: "wrong-token", twilio.url)
    with pytest.raises(SendError) as raised:
        sender.send(PHONE, OUR_NUMBER, "hello")
    assert raised.value.__cause__ is None
    assert raised.value.__suppress_context__
    assert PHONE not in str(raised.value)


def test_a_retry_after_a_failed_send_stores_nothing_twice_and_sends_once(
    service: TurnService, store: Repositories, twilio: TwilioEmulator, idempotency_table: str
) -> None:
    tokens = ["expired-token", twilio.auth_token]
    sender = TwilioSender(twilio.account_sid, lambda: tokens[0], twilio.url)
    handler = make_handler(
        sms_responder(service, store, sender), DynamoDBPersistenceLayer(table_name=idempotency_table)
    )
    record = sqs_record(request("SM1", "Hi coach"))
    assert call(handler, sqs_event(record))["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    tokens.pop(0)  # the token was rotated; SQS delivers the text again
    assert call(handler, sqs_event(sqs_record(request("SM1", "Hi coach"), receive_count=2)))["batchItemFailures"] == []
    assert [m.role for m in store.conversations.load_turn("user-1", 20).messages] == ["user", "assistant"]
    assert len(twilio.sent) == 1
    # Delivered: a later redelivery (past the dedupe window) sends nothing.
    responder = sms_responder(service, store, sender)
    assert asyncio.run(responder.respond(request("SM1", "Hi coach"))) == 0
    assert len(twilio.sent) == 1


@pytest.mark.parametrize("code", [21211, 21614, 30003, 30005, 30006])
def test_a_permanent_twilio_error_is_recorded_once_and_not_retried(
    handler: Handler,
    twilio: TwilioEmulator,
    store: Repositories,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    code: int,
) -> None:
    """A retry would meet the same answer and hold the person's later texts back in their FIFO group."""
    twilio.refusals[PHONE] = code
    record = sqs_record(request("SM1", "Hi"))
    assert call(handler, sqs_event(record))["batchItemFailures"] == []
    assert twilio.attempts == 1  # neither the HTTP client nor the queue tries again
    [record_log] = [r for r in caplog.records if r.getMessage() == "Reply undeliverable; not retried"]
    assert record_log.twilio_error == code  # type: ignore[attr-defined]
    printed = capsys.readouterr().out
    assert '"SmsUndeliverable"' in printed  # the metric's EMF line
    assert PHONE not in printed + caplog.text
    owner = store.phones.find_owner(PHONE)
    assert owner is None or not owner.opted_out  # only 21610 is an opt-out


def test_transient_twilio_answers_are_retried_with_backoff_and_the_text_goes_out(
    handler: Handler, twilio: TwilioEmulator
) -> None:
    twilio.transient = [429, 503]
    assert call(handler, sqs_event(sqs_record(request("SM1", "Hi"))))["batchItemFailures"] == []
    assert twilio.attempts == 3
    assert len(twilio.sent) == 1


def test_a_twilio_outage_beyond_the_attempts_fails_the_record_for_the_queue_to_retry(
    handler: Handler, twilio: TwilioEmulator
) -> None:
    twilio.transient = [500, 502, 503]
    record = sqs_record(request("SM1", "Hi"))
    assert call(handler, sqs_event(record))["batchItemFailures"] == [{"itemIdentifier": record["messageId"]}]
    assert twilio.attempts == 3
    assert twilio.sent == []


def test_an_unreachable_twilio_is_a_send_error_without_its_address(twilio: TwilioEmulator) -> None:
    sender = TwilioSender(twilio.account_sid, lambda: twilio.auth_token, "http://127.0.0.1:9", attempts=2)
    with pytest.raises(SendError, match="could not be reached") as raised:
        sender.send(PHONE, OUR_NUMBER, "hello")
    assert raised.value.__suppress_context__
