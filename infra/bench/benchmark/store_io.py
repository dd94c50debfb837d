"""What a turn costs the table, counted with botocore's event hooks: requests by operation, items
and bytes read, at several history lengths; and how long loading + building a turn's context takes."""

import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import boto3

from infra.bench.benchmark.stats import percentile
from infra.local.event_sources import on_stream_poller
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.persistence.capacity import READS
from onboarding.persistence.keys import MESSAGE_PREFIX, USER_PREFIX
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator


@dataclass
class TableTraffic:
    """DynamoDB calls seen through botocore's events on one session."""

    calls: Counter[str] = field(default_factory=Counter)
    items_read: int = 0
    bytes_read: int = 0
    bytes_sent: int = 0

    def before_call(self, model: Any, **_: Any) -> None:
        if on_stream_poller():
            return
        self.calls[model.name] += 1

    def after_call(self, model: Any, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        if model.name in READS and not on_stream_poller():
            self.items_read += int(parsed.get("Count", 1 if "Item" in parsed else 0))
            self.bytes_read += len(http_response.content or b"")

    def before_send(self, request: Any, **_: Any) -> None:
        self.bytes_sent += len(request.body or b"")

    def reset(self) -> None:
        self.calls.clear()
        self.items_read = self.bytes_read = self.bytes_sent = 0

    @property
    def reads(self) -> int:
        return sum(n for name, n in self.calls.items() if name in READS)

    @property
    def writes(self) -> int:
        return sum(n for name, n in self.calls.items() if name not in READS)


def seed_history(settings: Settings, user_id: str, count: int) -> None:
    """`count` alternating messages for `user_id`, written straight to the table in batches."""
    client = boto3.client("dynamodb", region_name=settings.region)
    # Written a minute ago, a millisecond apart: within the conversation gap, so the turn's window is
    # built from this history (an older one would start a new conversation and show an empty window).
    start_ms = int(time.time() * 1000) - 60_000 - count
    items = [
        {
            "pk": {"S": f"{USER_PREFIX}{user_id}"},
            "sk": {"S": f"{MESSAGE_PREFIX}{start_ms + i:013d}#{i:012x}"},
            "role": {"S": "user" if i % 2 == 0 else "assistant"},
            "content": {"S": f"history message number {i}, about as long as a short chat line"},
            "created_at": {"S": datetime.fromtimestamp((start_ms + i) / 1000, UTC).isoformat()},
        }
        for i in range(count)
    ]
    for begin in range(0, len(items), 25):
        batch: Any = {settings.table_name: [{"PutRequest": {"Item": item}} for item in items[begin : begin + 25]]}
        for _ in range(10):
            batch = client.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}
            if not batch:
                break
        else:
            raise RuntimeError("the table kept refusing the history's items")


@dataclass(frozen=True)
class TurnCost:
    history: int
    reads: int
    writes: int
    items_read: int
    bytes_read: int
    context_p50_ms: float
    context_p95_ms: float


def measure_turn_costs(histories: list[int], context_samples: int) -> list[TurnCost]:
    """For each history length: one whole turn's table traffic, and `context_samples` timings of
    loading + building the turn's context (the orchestrator's work before the model)."""
    session = boto3.Session()
    traffic = TableTraffic()
    session.events.register("before-call.dynamodb", traffic.before_call)
    session.events.register("after-call.dynamodb", traffic.after_call)
    boto3.DEFAULT_SESSION = session  # the store factory builds its client on the default session
    settings = Settings.from_env()
    store = build_repositories(settings)
    service = build_turn_service(settings, store)
    orchestrator = OnboardingAgentOrchestrator(store.conversations, build_chat_model(settings), settings)
    results = []
    for history in histories:
        user_id = f"bench-{history}-{time.time_ns()}"
        seed_history(settings, user_id, history)
        traffic.reset()
        asyncio.run(_one_turn(service, user_id))
        reads, writes, items, size = traffic.reads, traffic.writes, traffic.items_read, traffic.bytes_read
        timings = time_context(orchestrator, user_id, context_samples)
        results.append(
            TurnCost(history, reads, writes, items, size, statistics.median(timings), percentile(timings, 95))
        )
    boto3.DEFAULT_SESSION = None
    return results


def time_context(orchestrator: OnboardingAgentOrchestrator, user_id: str, samples: int) -> list[float]:
    """Milliseconds of `samples` context loads + builds, after warm-up ones, on one event loop (as
    the API's server keeps one; a new loop per sample would time its threads' start as well)."""
    loop = asyncio.new_event_loop()
    try:
        for _ in range(3):
            loop.run_until_complete(orchestrator.get_current_agent(user_id))
        timings = []
        for _ in range(samples):
            started = time.perf_counter()
            loop.run_until_complete(orchestrator.get_current_agent(user_id))
            timings.append((time.perf_counter() - started) * 1000)
        return timings
    finally:
        loop.close()


async def _one_turn(service: Any, user_id: str) -> None:
    await (await service.start_turn(user_id, "How am I doing so far?")).collect()
