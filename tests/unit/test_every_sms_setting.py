"""Every setting of the SMS functions has an effect: each test sets them to non-default values in
the environment, builds the function's module as Lambda does (its module-level `lambda_handler`),
and observes where the values took it. Registered for the meta-test in test_every_setting.py."""

import importlib
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any
from urllib.parse import urlencode

import boto3
import pytest
from twilio.request_validator import RequestValidator

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.lambda_runner import LocalLambdaContext
from infra.local.template import table_create_request
from infra.local.twilio_emulator import TwilioEmulator, webhook_form
from onboarding.persistence import Repositories
from onboarding.sms.inbound import SmsTurnRequest
from onboarding.sms.sealing import read_queued
from tests.support.setting_effects import observes
from tests.support.sqs_events import sqs_event, sqs_record, text_keys

TOKEN, ROTATED = "token-one", "token-two"
URL = "https://other.example.com/v1/sms"
PHONE = "+15551230001"
IDEMPOTENCY = "other-idempotency"


def fresh(module: str) -> ModuleType:
    """The function's module imported anew, so its module level reads the environment again."""
    sys.modules.pop(module, None)
    return importlib.import_module(module)


def idempotency_expirations() -> list[int]:
    items = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=IDEMPOTENCY)["Items"]
    return [int(item["expiration"]["N"]) for item in items]


@pytest.fixture
def sms_environment(dynamodb: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    """An idempotency table, a token parameter and a URL parameter under names no default uses."""
    boto3.client("dynamodb", region_name="us-east-1").create_table(
        **table_create_request("IdempotencyTable", IDEMPOTENCY)
    )
    ssm = boto3.client("ssm", region_name="us-east-1")

    def put(name: str, value: str) -> None:
        ssm.put_parameter(Name=name, Value=value, Type="SecureString", Overwrite=True)

    put("/other/token", TOKEN)
    ssm.put_parameter(Name="/other/url", Value=URL, Type="String")  # as the deployed stack writes it
    # As tests/conftest.py sets them: a local stack of another module on this worker may have changed them.
    monkeypatch.setenv("TWILIO_WEBHOOK_URL", "https://example.execute-api.us-east-1.amazonaws.com/v1/sms")
    monkeypatch.delenv("TWILIO_WEBHOOK_URL_PARAMETER", raising=False)
    monkeypatch.setenv("SMS_QUEUE_URL", "https://sqs.us-east-1.amazonaws.com/123456789012/sms-turns.fifo")
    monkeypatch.setenv("TWILIO_ACCOUNT_SID", "AC00000000000000000000000000000000")
    monkeypatch.setenv("IDEMPOTENCY_TABLE_NAME", IDEMPOTENCY)
    monkeypatch.setenv("TWILIO_AUTH_TOKEN_PARAMETER", "/other/token")
    monkeypatch.setenv("SMS_DEDUPE_WINDOW_S", "900")
    return put


def webhook_call(handler: Any, sid: str, token: str = TOKEN, url: str = URL) -> int:
    form = webhook_form(sid, PHONE, "Hello coach")
    event = {
        "resource": "/sms",
        "path": "/sms",
        "httpMethod": "POST",
        "headers": {
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Twilio-Signature": RequestValidator(token).compute_signature(url, form),
        },
        "requestContext": {"requestId": f"req-{sid}", "stage": "v1"},
        "body": urlencode(form),
        "isBase64Encoded": False,
    }
    context = LocalLambdaContext(function_name="SmsWebhookFunction", aws_request_id=f"req-{sid}")
    return int(handler(event, context)["statusCode"])


@observes(
    "webhook.queue_url",
    "webhook.idempotency_table_name",
    "webhook.twilio_auth_token_parameter",
    "webhook.twilio_webhook_url",
    "webhook.dedupe_window_s",
)
def test_the_webhook_takes_its_queue_table_token_url_and_window_from_the_environment(
    sms_environment: Callable[[str, str], None], store: Repositories, monkeypatch: pytest.MonkeyPatch
) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName="other.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    monkeypatch.setenv("SMS_QUEUE_URL", queue)
    monkeypatch.setenv("TWILIO_WEBHOOK_URL", URL)
    handler = fresh("functions.sms_webhook.app").lambda_handler
    assert webhook_call(handler, "SM1") == 200
    assert webhook_call(handler, "SM2", token="some-other-token") == 403  # noqa: S106 - a test value
    assert webhook_call(handler, "SM3", url="https://elsewhere.example.com/sms") == 403
    queued = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    assert [getattr(read_queued(m["Body"], text_keys(store)), "message_id", None) for m in queued] == ["SM1"]
    [expires] = idempotency_expirations()
    assert abs(expires - (time.time() + 900)) < 60


@observes("webhook.twilio_webhook_url_parameter", "webhook.parameter_max_age_s")
def test_the_webhook_reads_its_url_from_a_parameter_and_rereads_the_token_after_its_max_age(
    sms_environment: Callable[[str, str], None], sms_queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SMS_QUEUE_URL", sms_queue)
    monkeypatch.delenv("TWILIO_WEBHOOK_URL")
    monkeypatch.setenv("TWILIO_WEBHOOK_URL_PARAMETER", "/other/url")
    monkeypatch.setenv("SSM_PARAMETER_MAX_AGE_S", "1")
    handler = fresh("functions.sms_webhook.app").lambda_handler
    assert webhook_call(handler, "SM1") == 200
    sms_environment("/other/token", ROTATED)
    assert webhook_call(handler, "SM2", token=ROTATED) == 403  # the cached token, for up to a second
    time.sleep(1.1)
    assert webhook_call(handler, "SM3", token=ROTATED) == 200


@observes(
    "worker.idempotency_table_name",
    "worker.twilio_account_sid",
    "worker.twilio_auth_token_parameter",
    "worker.twilio_api_base_url",
    "worker.dedupe_window_s",
    "worker.parameter_max_age_s",
)
def test_the_worker_sends_through_the_configured_twilio_account_and_rereads_the_token(
    sms_environment: Callable[[str, str], None], emulator: BedrockEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = "AC" + "1" * 32
    with TwilioEmulator(account_sid=sid, auth_token=TOKEN) as twilio:
        monkeypatch.setenv("TWILIO_ACCOUNT_SID", sid)
        monkeypatch.setenv("TWILIO_API_BASE_URL", twilio.url)
        monkeypatch.setenv("SSM_PARAMETER_MAX_AGE_S", "1")
        handler = fresh("functions.sms_worker.app").lambda_handler

        def answer(message_id: str) -> dict[str, Any]:
            request = SmsTurnRequest(
                message_id=message_id, user_id="u", from_phone=PHONE, to_phone="+15550000000", text="Hi"
            )
            context = LocalLambdaContext(function_name="SmsWorkerFunction", aws_request_id=message_id)
            return dict(handler(sqs_event(sqs_record(request)), context))

        assert answer("SM1") == {"batchItemFailures": []}
        assert len(twilio.sent) == 1  # authenticated as the configured account with the parameter's token
        [expires] = idempotency_expirations()
        assert abs(expires - (time.time() + 900)) < 60
        sms_environment("/other/token", ROTATED)
        twilio.auth_token = ROTATED
        time.sleep(1.1)
        assert answer("SM2") == {"batchItemFailures": []}
        assert len(twilio.sent) == 2


@observes("worker.twilio_send_attempts", "worker.twilio_timeout_s")
def test_the_worker_takes_its_twilio_attempts_and_timeout_from_the_environment(
    sms_environment: Callable[[str, str], None], emulator: BedrockEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    sid = "AC" + "2" * 32
    with TwilioEmulator(account_sid=sid, auth_token=TOKEN) as twilio:
        monkeypatch.setenv("TWILIO_ACCOUNT_SID", sid)
        monkeypatch.setenv("TWILIO_API_BASE_URL", twilio.url)
        monkeypatch.setenv("TWILIO_SEND_ATTEMPTS", "4")
        monkeypatch.setenv("TWILIO_TIMEOUT_S", "0.5")
        handler = fresh("functions.sms_worker.app").lambda_handler

        def answer(message_id: str) -> dict[str, Any]:
            request = SmsTurnRequest(
                message_id=message_id, user_id="u", from_phone=PHONE, to_phone="+15550000000", text="Hi"
            )
            context = LocalLambdaContext(function_name="SmsWorkerFunction", aws_request_id=message_id)
            return dict(handler(sqs_event(sqs_record(request)), context))

        twilio.transient = [503, 503, 503]  # the default three tries would all meet one
        assert answer("SM1") == {"batchItemFailures": []}
        assert twilio.attempts == 4
        twilio.delay_s = 1.0  # over the configured timeout, well under the default 10 s
        assert answer("SM2")["batchItemFailures"]
        assert twilio.attempts == 5  # a read that timed out is not tried again: it may have been sent
