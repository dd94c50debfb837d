"""A long-time user against a new one: whole turns at 20, 2,000 and 20,000 of the user's own
messages, on the local DynamoDB server (moto with the flat-cost layer, decision 0004) and the
Bedrock emulator. (LangChain's `DynamoDBChatMessageHistory` at the same lengths, which fails once
its one item outgrows 400 KB, is measured by the cost ledger: infra/bench/cost.)

Each length is a user whose summary is caught up (it covers all but the newest ten messages, as
turns leave it), so what differs is only how much lies behind the window. A turn is the product's
whole turn path: `TurnService.start_turn` and its streamed reply, then the fold after it, each
timed; the store's share is every DynamoDB request's time from botocore's `before-send` to its
`after-call`. Requests, items and bytes read are counted with botocore's events. The context (load
and build, the orchestrator's work before the model) is timed apart. A user with a backlog (many
messages and no summary at all) takes the same turns, to show how often its folds come.

The lengths are visited in a new (seeded) order every round, so whatever the machine does
meanwhile falls on all of them alike; the figures are medians over all rounds' turns.
"""

import asyncio
import random
import statistics
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import boto3

from infra.bench.benchmark.report import quantile
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.deployment import LOCAL_AWS_ENVIRONMENT
from infra.local.dynamodb_process import LocalDynamoDB
from infra.local.stack import temporary_environment
from infra.local.template import table_create_request
from onboarding.composition import build_orchestrator, build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.llm.wording import SUMMARY_SYSTEM_PROMPT
from onboarding.model.history import ConversationSummary
from onboarding.model.messages import Message
from onboarding.persistence.capacity import READS
from onboarding.persistence.codec import message_item, summary_item
from onboarding.persistence.schema import new_message_id

TABLE = "onboarding-memory-history"
UNSUMMARIZED = 10  # what a caught-up summary leaves out: the newest messages, within the window
_ORDER = random.Random(17)  # noqa: S311 - the order of measurement, not a secret


class Traffic:
    """The DynamoDB requests the clients of one boto3 session make: by operation, items and bytes
    read, and their time (each from `before-send` to `after-call`)."""

    def __init__(self, session: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.items_read = self.bytes_read = 0
        self.seconds = self._sent = 0.0
        # Clients copy their session's handlers when they are made: so before any is.
        session.events.register("before-call.dynamodb", lambda model, **_: self.calls.update([model.name]))
        session.events.register("before-send.dynamodb", self._before_send)
        session.events.register("after-call.dynamodb", self._after_call)

    def _before_send(self, **_: Any) -> None:
        self._sent = time.perf_counter()

    def _after_call(self, model: Any, http_response: Any, parsed: dict[str, Any], **_: Any) -> None:
        self.seconds += time.perf_counter() - self._sent
        if model.name in READS:
            self.items_read += int(parsed.get("Count", 1 if "Item" in parsed else 0))
            self.bytes_read += len(http_response.content or b"")

    def take(self) -> dict[str, Any]:
        """What was counted since the last take."""
        reads = sum(n for name, n in self.calls.items() if name in READS)
        taken: dict[str, Any] = {"reads": reads, "writes": self.calls.total() - reads, "items_read": self.items_read}
        taken |= {"bytes_read": self.bytes_read, "store_ms": self.seconds * 1000}
        self.calls, self.items_read, self.bytes_read, self.seconds = Counter(), 0, 0, 0.0
        return taken


def seed(client: Any, table: str, user_id: str, count: int, summarized: bool) -> None:
    """`count` alternating messages an hour old, a millisecond apart; with `summarized`, a summary
    that covers all but the newest UNSUMMARIZED of them (as the folds of earlier turns left it)."""
    start_ms = int(time.time() * 1000) - 3_600_000 - count
    messages = []
    for i in range(count):
        at = datetime.fromtimestamp((start_ms + i) / 1000, UTC)
        text = f"message number {i}, about as long as a short chat line"
        messages.append(Message("user" if i % 2 == 0 else "assistant", text, new_message_id(start_ms + i), at))
    for begin in range(0, count, 25):
        batch: Any = {table: [{"PutRequest": {"Item": message_item(user_id, m, None)}} for m in messages[begin:][:25]]}
        while batch:
            batch = client.batch_write_item(RequestItems=batch).get("UnprocessedItems") or {}
    if summarized and count > UNSUMMARIZED:
        summary = ConversationSummary("- the client wrote a great deal", messages[-UNSUMMARIZED - 1].message_id)
        client.put_item(TableName=table, Item=summary_item(user_id, summary, time.time()))


def _folds(emulator: BedrockEmulator) -> int:
    return sum(1 for request in emulator.requests if request.system_text.startswith(SUMMARY_SYSTEM_PROMPT[:40]))


class _Length:
    """One history length's user, and its figures."""

    def __init__(self, client: Any, settings: Settings, history: int, backlog: bool = False) -> None:
        self.history, self.backlog = history, backlog
        self.user_id = f"{'backlog' if backlog else 'user'}-{history}-{time.time_ns()}"
        seed(client, TABLE, self.user_id, history, summarized=not backlog)
        self.service = build_turn_service(settings)
        self.orchestrator = build_orchestrator(settings, build_repositories(settings))
        self.turns: list[dict[str, Any]] = []
        self.context_ms: list[float] = []

    async def turn(self, traffic: Traffic, number: int, emulator: BedrockEmulator) -> dict[str, Any]:
        """One whole turn: the reply, then the fold after it (the summary's model call when one is due)."""
        folds, _ = _folds(emulator), traffic.take()
        started = time.perf_counter()
        turn = await self.service.start_turn(self.user_id, f"Here is how my week went, part {number}")
        await turn.collect()
        replied, reply = time.perf_counter(), traffic.take()
        await turn.fold_summary()
        finished, fold = time.perf_counter(), traffic.take()
        return reply | {
            "reply_ms": (replied - started) * 1000,
            "fold_ms": (finished - replied) * 1000,
            "turn_ms": (finished - started) * 1000,
            "folded": _folds(emulator) > folds,
            "store_ms": reply["store_ms"] + fold["store_ms"],
        }

    async def context(self) -> float:
        started = time.perf_counter()
        await self.orchestrator.get_current_agent(self.user_id)
        return (time.perf_counter() - started) * 1000

    def figures(self) -> dict[str, Any]:
        turns, folded = self.turns, [turn["fold_ms"] for turn in self.turns if turn["folded"]]
        figures: dict[str, Any] = {"history": self.history, "backlog": self.backlog, "turns": len(turns)}
        for key in ("turn_ms", "reply_ms", "store_ms", "reads", "writes", "bytes_read"):
            figures[key] = statistics.median(turn[key] for turn in turns)
        figures |= {
            "turn_p95_ms": quantile([turn["turn_ms"] for turn in turns], 95),
            "items_read": max(turn["items_read"] for turn in turns),
            "folds": sum(turn["folded"] for turn in turns),
            "fold_ms": statistics.median(folded) if folded else None,
            "context_p50_ms": statistics.median(self.context_ms),
            "context_p95_ms": quantile(self.context_ms, 95),
        }
        return figures


def measure_history(histories: list[int], backlog: int, rounds: int, turns_per_round: int) -> dict[str, Any]:
    """Every length's turns, round by round, on a fresh local DynamoDB server and emulator."""
    server, saved, loop = LocalDynamoDB(flat=True).start(), boto3.DEFAULT_SESSION, asyncio.new_event_loop()
    try:
        with BedrockEmulator() as model:
            environment = {**LOCAL_AWS_ENVIRONMENT, "TABLE_NAME": TABLE, "AWS_ENDPOINT_URL_DYNAMODB": server.url}
            environment |= {"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": model.url, "RECALL_INDEX_ARN": ""}
            with temporary_environment(environment):
                boto3.DEFAULT_SESSION = boto3.Session()
                traffic = Traffic(boto3.DEFAULT_SESSION)
                settings = Settings.from_env().model_copy(update={"rate_limit_messages": 0})
                client = boto3.client("dynamodb", region_name=settings.region)
                client.create_table(**table_create_request("ConversationTable", TABLE))
                lengths = [_Length(client, settings, n) for n in histories] + [_Length(client, settings, backlog, True)]
                for number in range(rounds + 1):  # the first round warms clients and code paths up
                    for length in _ORDER.sample(lengths, len(lengths)):
                        for i in range(turns_per_round):
                            turn = loop.run_until_complete(length.turn(traffic, i, model))
                            context = loop.run_until_complete(length.context())
                            length.turns += [turn] if number else []
                            length.context_ms += [context] if number else []
    finally:
        loop.close()
        boto3.DEFAULT_SESSION = saved
        server.stop()
    return {"lengths": [length.figures() for length in lengths]}
