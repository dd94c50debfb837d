"""The SMS webhook: signatures, dedupe by MessageSid, opt-outs, phone links, queueing, and every error path."""

import base64
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from aws_lambda_powertools.utilities.parameters.exceptions import GetParameterError
from botocore.exceptions import ClientError
from twilio.request_validator import RequestValidator

from functions.sms_webhook.app import make_handler
from infra.local.lambda_runner import LocalLambdaContext
from infra.local.twilio_emulator import webhook_form
from onboarding.composition import sms_intake
from onboarding.config import DEFAULT_LIMITS
from onboarding.persistence import Repositories
from onboarding.persistence.idempotency import CallMarkingIdempotencyLayer
from onboarding.replies import LINK_REFUSED, LINKED, TEXT_ONLY
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.intake import SmsIntake
from onboarding.sms.queue import TurnQueue
from onboarding.sms.sealing import read_queued
from tests.support.sqs_events import text_keys
from tests.unit.conftest import TABLE

TOKEN = "test-auth-token"  # noqa: S105 - a test value
URL = "https://abc123.execute-api.us-east-1.amazonaws.com/v1/sms"
PHONE = "+15551230001"
Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


@pytest.fixture
def queued(sms_queue: str, dynamodb: Any) -> Callable[[], list[SmsTurnRequest]]:
    """The texts queued since the last call, read as the worker reads them (opened with their key)."""
    sqs = boto3.client("sqs", region_name="us-east-1")
    store = Repositories.over(dynamodb, TABLE, DEFAULT_LIMITS)

    def drain() -> list[SmsTurnRequest]:
        messages = sqs.receive_message(QueueUrl=sms_queue, MaxNumberOfMessages=10).get("Messages", [])
        for message in messages:  # as the worker's event source does, so the user's group moves on
            sqs.delete_message(QueueUrl=sms_queue, ReceiptHandle=message["ReceiptHandle"])
        opened = [read_queued(m["Body"], text_keys(store)) for m in messages]
        assert None not in opened, "a queued text that its key does not open"
        return [request for request in opened if request is not None]

    return drain


@pytest.fixture
def handler(store: Repositories, sms_queue: str, idempotency_table: str) -> Handler:
    intake = sms_intake(store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), DEFAULT_LIMITS)
    return make_handler(intake, lambda: TOKEN, lambda: URL, DynamoDBPersistenceLayer(table_name=idempotency_table))


def event(
    form: dict[str, str], signature: str | None = "sign", url: str = URL, base64_body: bool = False
) -> dict[str, Any]:
    body = urlencode(form)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    if signature == "sign":
        signature = RequestValidator(TOKEN).compute_signature(url, form)
    if signature is not None:
        headers["X-Twilio-Signature"] = signature
    return {
        "resource": "/sms",
        "path": "/sms",
        "httpMethod": "POST",
        "headers": headers,
        "requestContext": {"requestId": "req-sms-1", "stage": "v1"},
        "body": base64.b64encode(body.encode()).decode() if base64_body else body,
        "isBase64Encoded": base64_body,
    }


def call(handler: Handler, request: dict[str, Any]) -> dict[str, Any]:
    return handler(request, LocalLambdaContext(function_name="SmsWebhookFunction", aws_request_id="req-sms-1"))


def test_a_signed_text_is_queued_for_its_user_and_answered_with_empty_twiml(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], store: Repositories
) -> None:
    response = call(handler, event(webhook_form("SM1", PHONE, "Hi coach")))
    assert response["statusCode"] == 200
    assert response["headers"]["Content-Type"] == "text/xml"
    assert "<Message>" not in response["body"]
    assert "<Response" in response["body"]
    [request] = queued()
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert (request.user_id, request.text, request.message_id) == (owner.user_id, "Hi coach", "SM1")


def test_base64_bodies_are_decoded_before_the_signature_check(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    response = call(handler, event(webhook_form("SM1", PHONE, "Hi ✓"), base64_body=True))
    assert response["statusCode"] == 200
    assert [r.text for r in queued()] == ["Hi ✓"]


def test_header_names_in_any_case_are_found(handler: Handler, queued: Callable[[], list[SmsTurnRequest]]) -> None:
    request = event(webhook_form("SM1", PHONE, "hi"))
    request["headers"] = {k.lower(): v for k, v in request["headers"].items()}
    assert call(handler, request)["statusCode"] == 200


@pytest.mark.parametrize(
    "request_for",
    [
        pytest.param(lambda f: event(f, signature=None), id="missing"),
        pytest.param(lambda f: event(f, signature="bm90IGEgc2lnbmF0dXJl"), id="forged"),
        pytest.param(lambda f: event(f, url="https://attacker.example/sms"), id="signed-for-another-url"),
        pytest.param(lambda f: event(f, url=URL.replace("https", "http")), id="signed-for-http"),
        pytest.param(lambda f: event(f) | {"body": urlencode({**f, "Body": "tampered"})}, id="body-tampered"),
        pytest.param(lambda f: event(f) | {"isBase64Encoded": True, "body": "%%%"}, id="bad-base64"),
    ],
)
def test_bad_signatures_are_403_and_nothing_is_stored_or_queued(
    handler: Handler,
    queued: Callable[[], list[SmsTurnRequest]],
    store: Repositories,
    request_for: Callable[[dict[str, str]], dict[str, Any]],
) -> None:
    response = call(handler, request_for(webhook_form("SM1", PHONE, "hi")))
    assert response["statusCode"] == 403
    assert queued() == []
    assert store.phones.find_owner(PHONE) is None


def test_blank_values_are_part_of_the_signature(handler: Handler) -> None:
    form = webhook_form("SM1", PHONE, "hi")
    signed_without_blanks = RequestValidator(TOKEN).compute_signature(URL, {k: v for k, v in form.items() if v})
    assert call(handler, event(form))["statusCode"] == 200
    assert call(handler, event(webhook_form("SM2", PHONE, "hi"), signature=signed_without_blanks))["statusCode"] == 403


@pytest.mark.parametrize(
    "form",
    [
        {"Body": "hi"},
        webhook_form("SM1", "5551230001", "not E.164"),
        webhook_form("", PHONE, "no sid"),
    ],
)
def test_signed_calls_without_a_usable_message_are_400(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], form: dict[str, str]
) -> None:
    response = call(handler, event(form))
    assert response["statusCode"] == 400
    assert "MessageSid" in response["body"]
    assert queued() == []


def test_the_same_message_sid_delivered_again_is_queued_once(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    for _ in range(3):
        assert call(handler, event(webhook_form("SM1", PHONE, "Hi coach")))["statusCode"] == 200
    assert len(queued()) == 1


@pytest.mark.parametrize(("keyword", "opted_out"), [("STOP", True), ("START", False), ("HELP", False)])
def test_opt_out_keywords_are_recorded_without_the_model(
    handler: Handler,
    queued: Callable[[], list[SmsTurnRequest]],
    store: Repositories,
    keyword: str,
    opted_out: bool,
) -> None:
    response = call(handler, event(webhook_form("SM1", PHONE, keyword.lower(), OptOutType=keyword)))
    assert response["statusCode"] == 200
    assert "<Message>" not in response["body"]
    assert queued() == []
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.opted_out is opted_out


def test_texts_from_an_opted_out_number_are_not_queued(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    call(handler, event(webhook_form("SM1", PHONE, "stop", OptOutType="STOP")))
    call(handler, event(webhook_form("SM2", PHONE, "are you there?")))
    assert queued() == []
    call(handler, event(webhook_form("SM3", PHONE, "start", OptOutType="START")))
    call(handler, event(webhook_form("SM4", PHONE, "back again")))
    assert [r.text for r in queued()] == ["back again"]


def test_an_unknown_opt_out_type_is_treated_as_a_normal_text(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    call(handler, event(webhook_form("SM1", PHONE, "hi", OptOutType="SOMETHING_NEW")))
    assert [r.text for r in queued()] == ["hi"]


def test_link_code_moves_the_phone_to_the_app_user(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], store: Repositories
) -> None:
    code = store.phones.create_link_code("app-user").code
    response = call(handler, event(webhook_form("SM1", PHONE, f"link {code}")))
    assert "Reply YES" in response["body"]  # nothing is linked before the phone agrees
    assert store.phones.phones_of("app-user") == ()
    response = call(handler, event(webhook_form("SM1b", PHONE, "yes")))
    assert LINKED.split("!")[0] in response["body"]
    call(handler, event(webhook_form("SM2", PHONE, "I'm back, by text")))
    assert [r.user_id for r in queued()] == ["app-user"]


def test_a_wrong_link_code_is_refused_and_links_nothing(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], store: Repositories
) -> None:
    real = store.phones.create_link_code("app-user").code
    wrong = "ABCDEFGHJK" if real != "ABCDEFGHJK" else "KJHGFEDCBA"
    response = call(handler, event(webhook_form("SM1", PHONE, f"LINK {wrong}")))
    assert LINK_REFUSED.split(".")[0] in response["body"]
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.user_id != "app-user"
    assert store.phones.phones_of("app-user") == ()
    assert queued() == []


@pytest.mark.parametrize("text", ["link me up with a plan", "LINK between diet and sleep?", "Link"])
def test_ordinary_texts_about_links_go_to_the_coach(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], text: str
) -> None:
    response = call(handler, event(webhook_form("SM1", PHONE, text)))
    assert "<Message>" not in response["body"]
    assert [r.text for r in queued()] == [text]


@pytest.mark.parametrize(
    "body", ["", "\u200b\u200b", "\ufeff\u2060", "\u0000 \u200d", "\u00ad\u2060", "\U000e0041\U000e0042\U000e007f"]
)
def test_a_text_without_words_gets_a_short_answer(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], body: str
) -> None:
    """A picture alone, or only invisible characters: nothing for the coach to read."""
    response = call(handler, event(webhook_form("SM1", PHONE, body, NumMedia="1" if not body else "0")))
    assert TEXT_ONLY.split(".")[0] in response["body"]
    assert queued() == []


def test_a_queue_failure_is_503_and_a_retry_then_goes_through(
    handler: Handler, store: Repositories, queued: Callable[[], list[SmsTurnRequest]], sms_queue: str
) -> None:
    form = webhook_form("SM1", PHONE, "hi")
    broken = make_handler(
        sms_intake(
            store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue + "-missing"), DEFAULT_LIMITS
        ),
        lambda: TOKEN,
        lambda: URL,
        DynamoDBPersistenceLayer(table_name="onboarding-idempotency-test"),
    )
    assert call(broken, event(form))["statusCode"] == 503
    assert call(handler, event(form))["statusCode"] == 200  # the failed attempt left no dedupe record
    assert len(queued()) == 1


def test_a_store_failure_is_503(handler: Handler, dynamodb: Any) -> None:
    def fail(**_: Any) -> Any:
        raise ClientError({"Error": {"Code": "InternalServerError", "Message": "down"}}, "GetItem")

    dynamodb.get_item = fail
    assert call(handler, event(webhook_form("SM1", PHONE, "hi")))["statusCode"] == 503


def test_a_concurrent_duplicate_is_asked_again_while_the_first_runs(
    store: Repositories, sms_queue: str, idempotency_table: str, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    """The second delivery cannot tell whether the first will queue the text: it answers 503, so
    Twilio sends it again; sent again once the first is done, it gets the first's answer, and the
    text is queued once. (The product's store: the id of its own call does not let another
    delivery through.)"""
    persistence = CallMarkingIdempotencyLayer(idempotency_table, boto3.client("dynamodb", region_name="us-east-1"))
    inner: list[dict[str, Any]] = []

    class ReentrantIntake(SmsIntake):
        def accept(self, sms: Any) -> str | None:
            if not inner:  # Twilio's second delivery arrives while the first is still in progress
                inner.append(call(handler, event(webhook_form("SM1", PHONE, "hi"))))
            return super().accept(sms)

    composed = sms_intake(store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), DEFAULT_LIMITS)
    handler = make_handler(
        ReentrantIntake(composed._linking, composed._account, composed._queue, DEFAULT_LIMITS),
        lambda: TOKEN,
        lambda: URL,
        persistence,
    )
    first = call(handler, event(webhook_form("SM1", PHONE, "hi")))
    assert first["statusCode"] == 200
    assert inner[0]["statusCode"] == 503  # never a 200 for a text that might not be queued
    again = call(handler, event(webhook_form("SM1", PHONE, "hi")))
    assert (again["statusCode"], again["body"]) == (200, first["body"])
    assert len(queued()) == 1


@pytest.mark.parametrize(
    ("body", "opted_out"), [("STOP", True), (" stop ", True), ("Unsubscribe", True), ("QUIT", True), ("HELP", False)]
)
def test_keywords_count_without_opt_out_type_too(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], store: Repositories, body: str, opted_out: bool
) -> None:
    """Twilio's default opt-out handling sends no OptOutType; the words themselves still count."""
    assert "<Message>" not in call(handler, event(webhook_form("SM1", PHONE, body)))["body"]
    assert queued() == []
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert owner.opted_out is opted_out


def test_start_and_yes_opt_back_in_but_yes_is_an_answer_otherwise(
    handler: Handler, queued: Callable[[], list[SmsTurnRequest]], store: Repositories
) -> None:
    call(handler, event(webhook_form("SM1", PHONE, "yes")))
    assert [r.text for r in queued()] == ["yes"]  # an answer to the coach
    call(handler, event(webhook_form("SM2", PHONE, "STOP")))
    call(handler, event(webhook_form("SM3", PHONE, "Yes")))
    assert queued() == []
    owner = store.phones.find_owner(PHONE)
    assert owner is not None
    assert not owner.opted_out
    call(handler, event(webhook_form("SM4", PHONE, "stop sending me junk food ideas")))
    assert [r.text for r in queued()] == ["stop sending me junk food ideas"]  # not a keyword: a whole text


def test_an_unreadable_auth_token_is_503_and_nothing_is_queued(
    store: Repositories, sms_queue: str, idempotency_table: str, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    def token() -> str:
        raise GetParameterError("ssm down")

    intake = sms_intake(store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), DEFAULT_LIMITS)
    handler = make_handler(intake, token, lambda: URL, DynamoDBPersistenceLayer(table_name=idempotency_table))
    assert call(handler, event(webhook_form("SM1", PHONE, "hi")))["statusCode"] == 503
    assert queued() == []


def test_an_unreachable_dedupe_table_is_503_and_nothing_is_queued(
    store: Repositories, sms_queue: str, queued: Callable[[], list[SmsTurnRequest]]
) -> None:
    intake = sms_intake(store, TurnQueue(boto3.client("sqs", region_name="us-east-1"), sms_queue), DEFAULT_LIMITS)
    missing = DynamoDBPersistenceLayer(table_name="no-such-idempotency-table")
    handler = make_handler(intake, lambda: TOKEN, lambda: URL, missing)
    assert call(handler, event(webhook_form("SM1", PHONE, "hi")))["statusCode"] == 503
    assert queued() == []
