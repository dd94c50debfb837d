"""Measured turns through the real turn path on the local stack, at one history length each.

- An app turn: API Gateway's event for `POST /chat` (streamed, `Accept: text/event-stream`)
  invoked on ApiFunction as Lambda would (infra.local.lambda_runner: the adapter's HTTP request to the
  FastAPI app, the turn, the store, the emulated model).
- A text: Twilio's signed webhook invoked on SmsWebhookFunction (it queues the turn), then what
  Lambda's event source mapping does: receive the message, invoke SmsWorkerFunction with it (the
  turn, the reply sent to the Twilio stand-in), delete it.
- A peer turn: LangChain's `DynamoDBChatMessageHistory` as `RunnableWithMessageHistory` drives it
  (infra/bench/benchmark/store_growth.py's `PeerHistory`): read the history, add the two messages.

Each invocation is timed; its own time is that less the emulator's time answering (the model's
wait, which the ledger prices with an assumption of its own) and less the meter's reads. Tokens
are the emulator's usage reports, as Bedrock would bill them; DynamoDB and SQS are the meter's.
"""

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from infra.bench.benchmark.peer_store import PeerHistory, run_unless_too_large
from infra.bench.cost.meter import Meter, Metered
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.lambda_runner import invoke
from infra.local.twilio_emulator import TwilioEmulator, webhook_form

API, WEBHOOK, WORKER = "ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"
# What people answer during onboarding, in turn: answers the coach saves with a tool, a fact it
# keeps, an evasive one it parks, small talk. Each turn takes the next line.
SCRIPT = (
    "Hi! I'm a beginner and I walk about 5 km most days.",
    "I go to the gym twice a week, mostly the treadmill.",
    "No injuries, but my knees get sore on stairs.",
    "My name is Sam, by the way.",
    "I want to lose about 5 kg before the summer.",
    "Not sure yet, let me check my calendar.",
    "Three times a week works, 45 minutes each.",
    "I have dumbbells and a bench at home.",
    "Mostly vegetarian, and I don't eat breakfast.",
    "Thanks, that helps!",
    "Mornings before work are best for me.",
    "Monday, Wednesday and Friday.",
)


@dataclass(frozen=True)
class Invocation:
    function: str
    own_s: float  # its duration less the model's wait and the meter's reads
    model_requests: int  # model requests made while it ran


@dataclass(frozen=True)
class Turn:
    channel: str  # "app" or "sms"
    invocations: tuple[Invocation, ...]
    api_requests: int  # requests API Gateway received (each invocation here came through it but the worker's)
    input_tokens: int
    output_tokens: int
    requests: tuple[Metered, ...]

    @property
    def model_requests(self) -> int:
        return sum(invocation.model_requests for invocation in self.invocations)


class TurnDriver:
    def __init__(
        self, meter: Meter, bedrock: BedrockEmulator, twilio: TwilioEmulator, sqs: Any, queue_url: str, webhook_url: str
    ) -> None:
        """`sqs`: a client of the metered session (the event source mapping's requests are billed)."""
        self._meter, self._bedrock, self._twilio = meter, bedrock, twilio
        self._sqs, self._queue_url, self._webhook_url = sqs, queue_url, webhook_url
        self._queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"
        ]

    def app_turn(self, user_id: str, text: str) -> Turn:
        event = _chat_event(user_id, text)
        self._meter.take()  # whatever came before is not this turn's
        with self._meter.measuring():
            usage_from = len(self._bedrock.usages)
            invocation, response = self._invoke(API, event)
        if response.get("statusCode") != 200 or "event: done" not in str(response.get("body", "")):
            raise RuntimeError(f"the app turn failed: {response.get('statusCode')} {str(response.get('body'))[:300]}")
        return self._turn("app", (invocation,), 1, usage_from)

    def sms_turn(self, phone: str, text: str) -> Turn:
        form = webhook_form(f"SM{uuid.uuid4().hex}", phone, text)
        event = {
            "path": "/sms",
            "httpMethod": "POST",
            "headers": {
                "X-Twilio-Signature": self._twilio.sign(self._webhook_url, form),
                "Content-Type": "application/x-www-form-urlencoded",
            },
            "requestContext": {"requestId": str(uuid.uuid4()), "stage": "v1"},
            "body": urlencode(form),
            "isBase64Encoded": False,
        }
        sent_before = len(self._twilio.sent)
        self._meter.take()
        with self._meter.measuring():
            usage_from = len(self._bedrock.usages)
            webhook, acknowledged = self._invoke(WEBHOOK, event)
            if acknowledged.get("statusCode") != 200:
                raise RuntimeError(f"the webhook answered {acknowledged.get('statusCode')}")
            messages = self._sqs.receive_message(
                QueueUrl=self._queue_url,
                MaxNumberOfMessages=1,
                WaitTimeSeconds=5,
                MessageSystemAttributeNames=["All"],
            ).get("Messages", [])
            if len(messages) != 1:
                raise RuntimeError("the webhook queued no turn")
            from infra.local.event_sources import sqs_event_records

            records = sqs_event_records(messages, self._queue_arn, self._sqs.meta.region_name)
            worker, result = self._invoke(WORKER, {"Records": records})
            if result.get("batchItemFailures"):
                raise RuntimeError("the worker failed the text")
            self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
        if len(self._twilio.sent) <= sent_before:
            raise RuntimeError("the worker sent no reply")
        return self._turn("sms", (webhook, worker), 1, usage_from)

    def _invoke(self, function: str, event: dict[str, Any]) -> tuple[Invocation, Any]:
        model_s, requests = self._bedrock.model_seconds, len(self._bedrock.requests)
        overhead = self._meter.overhead_s
        started = time.perf_counter()
        response = invoke(function, event)
        wall = time.perf_counter() - started
        _settle(self._bedrock)
        waited = self._bedrock.model_seconds - model_s
        own = max(0.0, wall - waited - (self._meter.overhead_s - overhead))
        return Invocation(function, own, len(self._bedrock.requests) - requests), response

    def _turn(self, channel: str, invocations: tuple[Invocation, ...], api_requests: int, usage_from: int) -> Turn:
        metered = self._meter.take()
        usages = self._bedrock.usages[usage_from:]
        return Turn(
            channel,
            invocations,
            api_requests,
            sum(usage["inputTokens"] for usage in usages),
            sum(usage["outputTokens"] for usage in usages),
            tuple(metered),
        )


def _chat_event(user_id: str, text: str) -> dict[str, Any]:
    """API Gateway's proxy event for `POST /chat` by a signed-in user (the authorizer's claims)."""
    return {
        "resource": "/chat",
        "path": "/chat",
        "httpMethod": "POST",
        "headers": {"Content-Type": "application/json", "Accept": "text/event-stream"},
        "queryStringParameters": None,
        "requestContext": {
            "resourcePath": "/chat",
            "httpMethod": "POST",
            "stage": "v1",
            "requestId": str(uuid.uuid4()),
            "authorizer": {"claims": {"sub": user_id, "token_use": "id"}},
        },
        "body": json.dumps({"message": text}),
        "isBase64Encoded": False,
    }


def _settle(emulator: BedrockEmulator) -> None:
    """Wait until every answer's time is booked: the emulator's bookkeeping may trail its last byte."""
    deadline = time.monotonic() + 5
    while emulator.answered < len(emulator.requests) and time.monotonic() < deadline:
        time.sleep(0.001)


@dataclass(frozen=True)
class PeerTurn:
    requests: tuple[Metered, ...]


class PeerSession:
    """LangChain's store for one session, seeded with `history` messages; `failure` says why its
    item could not hold them (DynamoDB's 400 KB item limit)."""

    def __init__(self, meter: Meter, history: int) -> None:
        self._meter = meter
        self.failure: str | None = None
        self._peer: PeerHistory | None = PeerHistory(f"cost-{history}-{time.time_ns()}")
        self._guard(lambda peer: peer.seed(history))

    def _guard(self, action: Callable[[PeerHistory], None]) -> None:
        self._peer, failure = run_unless_too_large(self._peer, action)
        self.failure = failure or self.failure

    def turn(self) -> PeerTurn | None:
        """One turn, or None once the item no longer fits."""
        self._meter.take()
        with self._meter.measuring():
            self._guard(lambda peer: peer.turn())
        metered = self._meter.take()
        return None if self._peer is None else PeerTurn(tuple(metered))
