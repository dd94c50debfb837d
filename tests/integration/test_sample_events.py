"""Every function of template.yaml runs its sample event from events/ the Docker-less way (what
`python -m infra.invoke` does), against the local stack that `events/env.local.json` describes."""

import json
from pathlib import Path
from typing import Any

import pytest

from infra.local.deployment import RECALL_BUCKET_NAME, RECALL_INDEX_NAME
from infra.local.iam.identity import access_key_of
from infra.local.lambda_runner import invoke
from infra.local.stack import LocalStack
from infra.local.template import load_template

EVENTS = Path(__file__).parents[2] / "events"
SAMPLE_EVENTS = {
    "ApiFunction": ["api_chat.json", "api_history.json"],
    "SmsWebhookFunction": ["sms_webhook.json"],
    "SmsWorkerFunction": ["sms_worker.json"],
    "RecallIndexerFunction": ["recall_indexer.json"],
    "CheckInFunction": ["check_in.json"],
}


def test_every_function_has_a_sample_event() -> None:
    functions = {
        name
        for name, resource in load_template()["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }
    assert set(SAMPLE_EVENTS) == functions
    environments = json.loads((EVENTS / "env.local.json").read_text())
    assert set(environments) == functions
    # A container signs as its function, so the local stack checks that function's policy.
    assert {name: env["AWS_ACCESS_KEY_ID"] for name, env in environments.items()} == {
        name: access_key_of(name) for name in functions
    }


@pytest.mark.parametrize(("logical_id", "event_file"), [(f, e) for f, files in SAMPLE_EVENTS.items() for e in files])
def test_the_sample_event_succeeds(local_stack: LocalStack, logical_id: str, event_file: str) -> None:
    response: dict[str, Any] = invoke(logical_id, json.loads((EVENTS / event_file).read_text()))
    assert response.get("statusCode", 200) == 200, response
    assert response.get("batchItemFailures", []) == []
    if logical_id == "SmsWorkerFunction":
        assert local_stack.twilio.sent, "the worker sent its reply through the Twilio stand-in"
    if logical_id == "RecallIndexerFunction":
        index = local_stack.s3vectors.buckets[RECALL_BUCKET_NAME][RECALL_INDEX_NAME]
        assert "sample-user#1795700000000-0a1b2c3d4e5f" in index.vectors, "the sample message was indexed"
