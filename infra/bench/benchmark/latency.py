"""What a person waits for that our code adds: the first token of a streamed reply, and the SMS
webhook's acknowledgement to Twilio.

- First token: when the app's SSE `chunk` event arrives, against when the emulator sent the
  model's first token, over the local HTTP stack (gateway, ASGI app, turn, emulator). Both clocks
  are `time.monotonic()` in this process (the local stack runs in it), so the difference is what
  our stack adds between the model's first token and the client's.
- Webhook: distinct signed posts to the warm handler in process, against the local stack's
  DynamoDB, SQS and SSM over HTTP. Each post's time is split in two: waiting on the servers (from
  botocore's `before-send` to its `before-parse` of every request: the wire, the server's work, the
  answer read) and the rest (our handler, Powertools, botocore's signing and parsing). The servers
  are moto's, not AWS's, so only the rest says what our code costs.
"""

import statistics
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import boto3
import httpx

from infra.local.lambda_runner import invoke
from infra.local.stack import LocalStack
from infra.local.twilio_emulator import webhook_form


def first_token(stack: LocalStack, samples: int) -> dict[str, float]:
    """Median ms from sending to the first chunk, and from the model's first token to it (and its max)."""
    user = f"first-token-{time.time_ns()}"
    headers = {"Authorization": f"Bearer {user}", "Accept": "text/event-stream"}
    client_ms, added_ms = [], []
    with httpx.Client(base_url=stack.api_url, timeout=60) as http:
        for index in range(samples + 2):  # two to warm up
            before, sent, received = len(stack.bedrock.first_tokens), time.monotonic(), None
            with http.stream("POST", "/chat", json={"message": f"Tell me more ({index})?"}, headers=headers) as reply:
                for line in reply.iter_lines():
                    received = received or (time.monotonic() if line == "event: chunk" else None)
            if received is None or len(stack.bedrock.first_tokens) <= before:
                raise RuntimeError("the turn streamed no text")
            if index >= 2:
                client_ms.append((received - sent) * 1000)
                added_ms.append((received - stack.bedrock.first_tokens[before]) * 1000)
    added = {"added_p50_ms": statistics.median(added_ms), "added_max_ms": max(added_ms)}
    return {"samples": samples, "client_p50_ms": statistics.median(client_ms)} | added


def webhook_acknowledgements(sign: Any, url: str, posts: int) -> dict[str, list[float]]:
    """Each of `posts` distinct signed texts' ms (after one warm-up call), and its wait on the servers."""
    waited, sent_at = [0.0], [0.0]

    def answered(**_: Any) -> None:
        waited[0] += time.perf_counter() - sent_at[0]

    # Clients copy their session's handlers when made: registered before the handler's module loads.
    boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION or boto3.Session()
    boto3.DEFAULT_SESSION.events.register("before-send", lambda **_: sent_at.__setitem__(0, time.perf_counter()))
    boto3.DEFAULT_SESSION.events.register("before-parse", answered)
    timings: dict[str, list[float]] = {"ms": [], "server_ms": []}
    run = uuid.uuid4().hex[:8]  # a new MessageSid every post, even across runs: none is a duplicate
    for index in range(posts + 1):
        form = webhook_form(f"SM{run}{index:024d}", f"+1555{index % 10_000_000:07d}", f"benchmark text {index}")
        headers = {"X-Twilio-Signature": sign(url, form), "Content-Type": "application/x-www-form-urlencoded"}
        event = {
            "path": "/sms",
            "httpMethod": "POST",
            "headers": headers,
            "requestContext": {"requestId": f"bench-{index}", "stage": "v1"},
            "body": urlencode(form),
            "isBase64Encoded": False,
        }
        waited[0], started = 0.0, time.perf_counter()
        if invoke("SmsWebhookFunction", event)["statusCode"] != 200:
            raise RuntimeError("the webhook refused a signed text")
        if index:  # the first call is the cold start
            timings["ms"].append((time.perf_counter() - started) * 1000)
            timings["server_ms"].append(waited[0] * 1000)
    return timings
