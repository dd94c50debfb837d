"""Store cost per turn as the history grows: our store against LangChain's
`DynamoDBChatMessageHistory`, on the same server, in the same run, turn by turn alternately.

A turn of each store does what a chat turn needs of it:
- ours: load the turn's context (one Query, newest messages first, `HISTORY_LOAD_LIMIT` + head
  items), then store the user's message and the reply (on moto, the store's own writes: a
  transaction each, the message with its erase guard; dynalite has no TransactWriteItems, so there
  the same message items are sent as a PutItem each; the writes' cost does not depend on the
  history either way, the Query's is what this measures);
- the peer, as `RunnableWithMessageHistory` drives it: read the history (GetItem), then
  `add_messages([human, ai])`, which reads the whole history again and writes it back whole
  (GetItem + UpdateItem). Its one item per session cannot outgrow DynamoDB's 400 KB item limit,
  so at some length its turns fail; that length is found and reported.

Each server gets every history length at once: all the histories are written into one table
first, then the turns run round by round (one of each store, and one context load + build, at
every length per round), so whatever the machine does meanwhile touches every length alike and the
ratio between lengths holds. On moto, whose Query walks its whole table, every length pays for the
whole table; dynalite reads only the key range, as DynamoDB does. The context retrieval goal (load +
build context, the orchestrator's work) is timed on both here as well.
"""

import asyncio
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import boto3

from infra.bench.benchmark.peer_store import (
    ANSWER,
    QUESTION,
    PeerHistory,
    create_peer_table,
    find_peer_limit,
    run_unless_too_large,
)
from infra.bench.benchmark.stats import percentile
from infra.bench.benchmark.store_io import TableTraffic, seed_history
from infra.local.deployment import LOCAL_AWS_ENVIRONMENT
from infra.local.stack import LOCAL_TIMEOUTS, temporary_environment
from infra.local.template import table_create_request
from onboarding.composition import build_repositories
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.model.messages import Message
from onboarding.persistence.codec import message_item
from onboarding.persistence.writes import MessageStamper
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator

TABLE = "onboarding-memory-growth"


@dataclass(frozen=True)
class StoreTurns:
    """One store's turns at one history length (None figures: its turns failed)."""

    p50_ms: float | None
    p95_ms: float | None
    requests: int | None
    bytes_read: int | None
    bytes_sent: int | None
    failure: str | None = None


@dataclass(frozen=True)
class GrowthPoint:
    history: int
    ours: StoreTurns
    peer: StoreTurns
    context_p50_ms: float
    context_p95_ms: float


@dataclass(frozen=True)
class Growth:
    server: str
    points: list[GrowthPoint]
    peer_limit: int  # the most messages the peer's one item can hold

    def ours_ratio(self) -> float:
        """Our median turn at the longest history against the shortest."""
        first, last = self.points[0].ours.p50_ms, self.points[-1].ours.p50_ms
        return (last or 0.0) / (first or 1.0)


WARM_UP_TURNS = 2  # connections and code paths warm up before the clock counts
SHUFFLE_SEED = 17  # a fixed seed: each round's order differs, the run can be repeated exactly


class _Point:
    """One history length's two stores and their timings, filled round by round."""

    def __init__(
        self, settings: Settings, store: Any, limit: int, history: int, transactions: bool, client: Any
    ) -> None:
        self.history = history
        self.transactions, self.client = transactions, client
        self.stamper = MessageStamper(time.time)
        self.user_id = f"growth-{history}-{time.time_ns()}"
        seed_history(settings, self.user_id, history)
        self.store, self.limit = store, limit
        self.peer: PeerHistory | None = PeerHistory(f"growth-{history}-{time.time_ns()}")
        self.peer_failure: str | None = None
        self._peer_guarded(lambda peer: peer.seed(history))
        self.ours_ms: list[float] = []
        self.peer_ms: list[float] = []
        self.context_ms: list[float] = []
        self.ours_io: tuple[int, int, int] | None = None  # requests, bytes read, bytes sent of one turn
        self.peer_io: tuple[int, int, int] | None = None

    def our_turn(self) -> None:
        loaded = self.store.conversations.load_turn(self.user_id, self.limit)
        if len(loaded.messages) < min(self.history, self.limit):
            raise RuntimeError("our store loaded fewer messages than the history holds")
        if self.transactions:
            self.store.writes.append_message(self.user_id, "user", QUESTION)
            self.store.writes.append_message(self.user_id, "assistant", ANSWER)
            return
        for role, text in (("user", QUESTION), ("assistant", ANSWER)):
            stamped = self.stamper.stamp(Message(role, text))  # type: ignore[arg-type]
            self.client.put_item(
                TableName=TABLE,
                Item=message_item(self.user_id, stamped, None),
                ConditionExpression="attribute_not_exists(sk)",
            )

    def peer_turn(self) -> None:
        """One peer turn, unless its item has outgrown DynamoDB's limit (then `peer` is None from now on)."""
        self._peer_guarded(lambda peer: peer.turn())

    def _peer_guarded(self, action: Callable[[PeerHistory], None]) -> None:
        self.peer, failure = run_unless_too_large(self.peer, action)
        self.peer_failure = failure or self.peer_failure

    def result(self) -> GrowthPoint:
        ours = _turns(self.ours_ms, self.ours_io)
        peer = (
            StoreTurns(None, None, None, None, None, failure=self.peer_failure)
            if self.peer_failure is not None
            else _turns(self.peer_ms, self.peer_io)
        )
        context_ms = self.context_ms
        return GrowthPoint(self.history, ours, peer, statistics.median(context_ms), percentile(context_ms, 95))


def _turns(timings: list[float], io: tuple[int, int, int] | None) -> StoreTurns:
    requests, bytes_read, bytes_sent = io or (None, None, None)
    return StoreTurns(statistics.median(timings), percentile(timings, 95), requests, bytes_read, bytes_sent)


def _timed(action: Callable[[], None], traffic: TableTraffic) -> tuple[float, tuple[int, int, int]]:
    traffic.reset()
    started = time.perf_counter()
    action()
    elapsed = (time.perf_counter() - started) * 1000
    return elapsed, (sum(traffic.calls.values()), traffic.bytes_read, traffic.bytes_sent)


def _measure_points(
    points: list[_Point], orchestrator: OnboardingAgentOrchestrator, traffic: TableTraffic, samples: int
) -> None:
    """Round by round, one turn of each store and one context build at every history length, so a
    machine that slows down or speeds up meanwhile affects every length alike and the ratios hold.
    The lengths come in a new order each round: in a fixed order, each length always followed the
    same one (our 10,000-message turn always right after the peer's heaviest), and what a turn
    leaves behind (garbage to collect, a cold cache) always fell on the same length."""
    loop = asyncio.new_event_loop()  # one loop, as the API's server keeps one
    order = list(points)
    shuffler = random.Random(SHUFFLE_SEED)  # noqa: S311 - an order of measurement, not a secret

    def build_context(user_id: str) -> None:
        loop.run_until_complete(orchestrator.get_current_agent(user_id))

    try:
        for round_number in range(WARM_UP_TURNS + samples):
            counted = round_number >= WARM_UP_TURNS
            shuffler.shuffle(order)
            for point in order:
                ours_ms, ours_io = _timed(point.our_turn, traffic)
                context_ms, _ = _timed(partial(build_context, point.user_id), traffic)
                peer_ms, peer_io = _timed(point.peer_turn, traffic)
                if not counted:
                    continue
                point.ours_ms.append(ours_ms)
                point.context_ms.append(context_ms)
                point.ours_io = point.ours_io or ours_io
                if point.peer is not None:  # it ran, and its item still fits
                    point.peer_ms.append(peer_ms)
                    point.peer_io = point.peer_io or peer_io
    finally:
        loop.close()


def measure_store_growth(
    server: str, url: str, histories: list[int], samples: int, transactions: bool = True
) -> Growth:
    """Both stores' turns at each history length on the DynamoDB server at `url` (`transactions`:
    whether it runs TransactWriteItems; see the module's docstring)."""
    session = boto3.Session()
    traffic = TableTraffic()
    session.events.register("before-call.dynamodb", traffic.before_call)
    session.events.register("after-call.dynamodb", traffic.after_call)
    session.events.register("before-send.dynamodb", traffic.before_send)
    saved_session = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = session  # the store factory and the peer build their clients on it
    try:
        # The standard variables point boto3 at `url`, with dummy credentials, while clients are built.
        # And the local stack's client timeouts (a big table on a busy machine answers slowly).
        local = {**LOCAL_AWS_ENVIRONMENT, **LOCAL_TIMEOUTS, "TABLE_NAME": TABLE, "AWS_ENDPOINT_URL_DYNAMODB": url}
        with temporary_environment(local):
            settings = Settings.from_env()
            client = boto3.client("dynamodb", region_name=settings.region)
            client.create_table(**table_create_request("ConversationTable", TABLE))
            create_peer_table(client)
            store = build_repositories(settings)
            orchestrator = OnboardingAgentOrchestrator(store.conversations, build_chat_model(settings), settings)
            points = [_Point(settings, store, settings.history_load_limit, n, transactions, client) for n in histories]
            _measure_points(points, orchestrator, traffic, samples)
            peer_limit = find_peer_limit(max(histories[-1], 20_000))
    finally:
        boto3.DEFAULT_SESSION = saved_session
    return Growth(server, [point.result() for point in points], peer_limit)


def describe_growth(growth: Growth, verdict: bool) -> list[str]:
    """The section's lines for one server: a row per history length, then the ratio."""
    lines = [
        f"Store cost per turn vs history, {growth.server} (one table for all lengths; median of turns; "
        "context = load + build)",
        f"{'history':>8} | {'ours ms':>8} {'reqs':>5} {'read B':>8} {'sent B':>7} | "
        f"{'peer ms':>8} {'reqs':>5} {'read B':>9} {'sent B':>8} | {'context p50':>11} {'p95 ms':>7}",
    ]
    for point in growth.points:
        ours, peer = point.ours, point.peer
        peer_text = (
            f"{peer.p50_ms:>8.1f} {peer.requests:>5} {peer.bytes_read:>9} {peer.bytes_sent:>8}"
            if peer.failure is None
            else f"{peer.failure[:44]:>33}"
        )
        lines.append(
            f"{point.history:>8} | {ours.p50_ms:>8.1f} {ours.requests:>5} {ours.bytes_read:>8} {ours.bytes_sent:>7} | "
            f"{peer_text} | {point.context_p50_ms:>11.2f} {point.context_p95_ms:>7.2f}"
        )
    judged = f" (goal <= 1.1x, {'met' if growth.ours_ratio() <= 1.1 else 'missed'})" if verdict else ""
    lines.append(
        f"ours at {growth.points[-1].history} vs {growth.points[0].history} messages: {growth.ours_ratio():.2f}x"
        f"{judged}; the peer's item holds at most {growth.peer_limit} such messages (400 KB)"
    )
    return [*lines, ""]
