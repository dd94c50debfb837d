"""How fast the SMS webhook acknowledges Twilio: warm, signed posts to the handler in process,
against the local stack's DynamoDB, SQS and SSM over HTTP.

Each post's time is split in two: waiting on the servers (from botocore's `before-send` to its
`before-parse` of every request: the request on the wire, the server's work, the response read)
and the rest (our handler, Powertools, botocore's signing and parsing). The servers are moto's,
not AWS's, so only the rest says what our code costs; the split shows which part a tail is in.
"""

import statistics
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import boto3

from infra.bench.benchmark.stats import percentile
from infra.local.lambda_runner import invoke
from infra.local.twilio_emulator import webhook_form


@dataclass(frozen=True)
class WebhookAck:
    p50_ms: float
    p99_ms: float
    max_ms: float
    timings_ms: list[float]
    server_ms: list[float]  # of each post, the time spent waiting on the servers

    @property
    def outside_servers_ms(self) -> list[float]:
        return [total - server for total, server in zip(self.timings_ms, self.server_ms, strict=True)]


class ServerClock:
    """Seconds spent waiting on servers by the clients of one boto3 session, in one thread."""

    def __init__(self, session: boto3.Session) -> None:
        self.seconds = 0.0
        self._sent_at: float | None = None
        # Clients copy their session's handlers when they are made: register before the handler's
        # module (and so its clients) is loaded.
        session.events.register("before-send", self._sent)
        session.events.register("before-parse", self._answered)

    def _sent(self, **_: Any) -> None:
        self._sent_at = time.perf_counter()

    def _answered(self, **_: Any) -> None:
        if self._sent_at is not None:
            self.seconds += time.perf_counter() - self._sent_at
            self._sent_at = None


def measure_webhook_ack(sign: Any, url: str, posts: int) -> WebhookAck:
    """p50 / p99 / max milliseconds over `posts` distinct signed texts (after one warm-up call)."""
    boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION or boto3.Session()  # every client of ours is made on it
    clock = ServerClock(boto3.DEFAULT_SESSION)
    timings, server = [], []
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
        clock.seconds = 0.0
        started = time.perf_counter()
        response = invoke("SmsWebhookFunction", event)
        elapsed = (time.perf_counter() - started) * 1000
        if response["statusCode"] != 200:
            raise RuntimeError(f"the webhook answered {response['statusCode']}")
        if index:  # the first call is the cold start
            timings.append(elapsed)
            server.append(clock.seconds * 1000)
    return WebhookAck(statistics.median(timings), percentile(timings, 99), max(timings), timings, server)
