"""The SMS webhook refuses every request Twilio did not sign for this URL and these parameters:
missing, forged, signed for another URL, or signed over other parameters (1,000 tries each run)."""

import base64
from typing import Any
from urllib.parse import urlencode

import boto3
from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer
from hypothesis import given, settings
from hypothesis import strategies as st
from twilio.request_validator import RequestValidator

from functions.sms_webhook.app import make_handler
from infra.local.lambda_runner import LocalLambdaContext
from onboarding.composition import sms_intake
from onboarding.config import DEFAULT_LIMITS
from onboarding.persistence import Repositories
from onboarding.sms.queue import TurnQueue

TOKEN = "property-test-token"  # noqa: S105 - a test value
URL = "https://abc123.execute-api.us-east-1.amazonaws.com/v1/sms"
CONTEXT: Any = LocalLambdaContext(function_name="SmsWebhookFunction", aws_request_id="req-prop")

field_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
forms = st.fixed_dictionaries(
    {
        "MessageSid": st.from_regex(r"SM[0-9a-f]{32}", fullmatch=True),
        "From": st.from_regex(r"\+1[2-9]\d{9}", fullmatch=True),
        "To": st.just("+15550000000"),
        "Body": field_text,
    },
    optional={"OptOutType": st.sampled_from(["STOP", "START", "HELP"]), "FromCity": field_text},
)


@st.composite
def bad_signatures(draw: st.DrawFn, form: dict[str, str]) -> tuple[dict[str, str], str | None]:
    """A form as delivered, and a signature that is not Twilio's for it at URL."""
    kind = draw(st.sampled_from(["missing", "random", "other-url", "other-token", "tampered", "dropped-blank"]))
    validator = RequestValidator(TOKEN)
    if kind == "missing":
        return form, None
    if kind == "random":
        return form, base64.b64encode(draw(st.binary(min_size=1, max_size=40))).decode()
    if kind == "other-url":
        url = draw(st.sampled_from([URL.replace("https", "http"), URL + "/", URL.replace("/v1", ""), URL + "?x=1"]))
        return form, validator.compute_signature(url, form)
    if kind == "other-token":
        return form, RequestValidator(TOKEN + "x").compute_signature(URL, form)
    if kind == "tampered":
        signature = validator.compute_signature(URL, form)
        return {**form, "Body": form["Body"] + draw(st.text(min_size=1, max_size=5))}, signature
    signed_over = {**form, "Extra": ""}  # Twilio signed a blank field the delivery lost
    return form, validator.compute_signature(URL, signed_over)


def test_unsigned_or_missigned_requests_are_403_and_touch_nothing(
    store: Repositories, sms_queue: str, idempotency_table: str
) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    intake = sms_intake(store, TurnQueue(sqs, sms_queue), DEFAULT_LIMITS)
    handler = make_handler(intake, lambda: TOKEN, lambda: URL, DynamoDBPersistenceLayer(table_name=idempotency_table))

    # The handler and clients are built once: per example only the request changes.
    @settings(max_examples=1000, deadline=None)
    @given(data=st.data(), form=forms)
    def rejected(data: st.DataObject, form: dict[str, str]) -> None:
        delivered, signature = data.draw(bad_signatures(form))
        headers: dict[str, Any] = {"Content-Type": "application/x-www-form-urlencoded"}
        if signature is not None:
            headers["X-Twilio-Signature"] = signature
        event = {
            "path": "/sms",
            "httpMethod": "POST",
            "headers": headers,
            "body": urlencode(delivered),
            "isBase64Encoded": False,
        }
        assert handler(event, CONTEXT)["statusCode"] == 403
        assert store.phones.find_owner(form["From"]) is None

    rejected()
    assert sqs.receive_message(QueueUrl=sms_queue).get("Messages", []) == []
    idempotency_records = boto3.client("dynamodb", region_name="us-east-1").scan(TableName=idempotency_table)
    assert idempotency_records["Count"] == 0
