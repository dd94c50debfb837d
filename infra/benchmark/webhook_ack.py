"""How fast the SMS webhook acknowledges Twilio: warm, signed posts to the handler in process,
against the local stack's DynamoDB, SQS and SSM over HTTP."""

import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from infra.lambda_runner import invoke
from infra.twilio_emulator import webhook_form


@dataclass(frozen=True)
class WebhookAck:
    p50_ms: float
    p99_ms: float
    max_ms: float
    timings_ms: list[float]


def measure_webhook_ack(sign: Any, url: str, posts: int) -> WebhookAck:
    """p50 / p99 / max milliseconds over `posts` distinct signed texts (after one warm-up call)."""
    timings = []
    run = uuid.uuid4().hex[:8]  # a new MessageSid every post, even across runs: none is a duplicate
    for index in range(posts + 1):
        form = webhook_form(f"SM{run}{index:024d}", f"+1555{index % 10_000_000:07d}", f"benchmark text {index}")
        event = {
            "path": "/sms",
            "httpMethod": "POST",
            "headers": {"X-Twilio-Signature": sign(url, form), "Content-Type": "application/x-www-form-urlencoded"},
            "requestContext": {"requestId": f"bench-{index}", "stage": "v1"},
            "body": urlencode(form),
            "isBase64Encoded": False,
        }
        started = time.perf_counter()
        response = invoke("SmsWebhookFunction", event)
        elapsed = (time.perf_counter() - started) * 1000
        if response["statusCode"] != 200:
            raise RuntimeError(f"the webhook answered {response['statusCode']}")
        if index:  # the first call is the cold start
            timings.append(elapsed)
    percentiles = statistics.quantiles(timings, n=100, method="inclusive") if len(timings) > 1 else timings * 99
    return WebhookAck(statistics.median(timings), percentiles[98], max(timings), timings)
