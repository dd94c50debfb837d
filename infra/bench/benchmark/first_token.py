"""First token to the client: when the app's SSE `chunk` event arrives, against when the emulator
sent the model's first token, over the local HTTP stack (gateway → ASGI app → turn → emulator).
Both clocks are `time.monotonic()` in this process (the local stack runs in it), so the difference
is what our stack adds between the model's first token and the client's."""

import statistics
import time
from dataclasses import dataclass

import httpx

from infra.local.stack import LocalStack


@dataclass(frozen=True)
class FirstToken:
    samples: int
    client_p50_ms: float  # request sent → first chunk event received
    added_p50_ms: float  # model's first token → the client's
    added_max_ms: float


def measure_first_token(stack: LocalStack, samples: int) -> FirstToken:
    user = f"first-token-{time.time_ns()}"
    headers = {"Authorization": f"Bearer {user}", "Accept": "text/event-stream"}
    client_ms, added_ms = [], []
    with httpx.Client(base_url=stack.api_url, timeout=60) as http:
        for index in range(samples + 2):
            before = len(stack.bedrock.first_tokens)
            sent = time.monotonic()
            received = None
            with http.stream("POST", "/chat", json={"message": f"Tell me more ({index})?"}, headers=headers) as reply:
                for line in reply.iter_lines():
                    if received is None and line == "event: chunk":
                        received = time.monotonic()
            model_first = stack.bedrock.first_tokens[before] if len(stack.bedrock.first_tokens) > before else None
            if received is None or model_first is None:
                raise RuntimeError("the turn streamed no text")
            if index >= 2:  # warm-up turns
                client_ms.append((received - sent) * 1000)
                added_ms.append((received - model_first) * 1000)
    return FirstToken(samples, statistics.median(client_ms), statistics.median(added_ms), max(added_ms))
