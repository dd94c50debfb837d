"""Store cost per turn as the history grows: our store against LangChain's
`DynamoDBChatMessageHistory`, on the same server, in the same run, turn by turn alternately.

A turn of each store does what a chat turn needs of it:
- ours: load the turn's context (one Query, newest messages first, `HISTORY_LOAD_LIMIT` + head
  items), then store the user's message and the reply (a PutItem each);
- the peer, as `RunnableWithMessageHistory` drives it: read the history (GetItem), then
  `add_messages([human, ai])`, which reads the whole history again and writes it back whole
  (GetItem + UpdateItem). Its one item per session cannot outgrow DynamoDB's 400 KB item limit,
  so at some length its turns fail; that length is found and reported.

Each server gets every history length in turn, in one table that keeps what the shorter ones
wrote, so the table grows as well as the partition. On moto, whose Query walks its whole table,
our turn slows with the table; dynalite reads only the key range, as DynamoDB does. The context
retrieval goal (load + build context, the orchestrator's work) is timed on both here as well.
"""

import statistics
import time
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.exceptions import ClientError

from infra.benchmark.environment import temporary_environment
from infra.benchmark.store_io import TableTraffic, seed_history, time_context
from infra.local_stack import LOCAL_AWS_ENVIRONMENT
from infra.template import table_create_request
from onboarding.model import build_chat_model
from onboarding.orchestrator import OnboardingAgentOrchestrator
from onboarding.settings import Settings
from onboarding.store_factory import build_store

TABLE = "onboarding-memory-growth"
PEER_TABLE = "langchain-history-growth"
QUESTION = "What should I eat before an early morning run?"
ANSWER = "A banana or a slice of toast with honey about 30 minutes before works well for most people."


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


def _percentiles(timings: list[float]) -> tuple[float, float]:
    p95 = statistics.quantiles(timings, n=20, method="inclusive")[18] if len(timings) > 1 else timings[0]
    return statistics.median(timings), p95


class _PeerHistory:
    """LangChain's store for one session, with its history written straight in (seeding it turn
    by turn would rewrite the whole item every turn: quadratic, and the point of this comparison)."""

    def __init__(self, session_id: str) -> None:
        # Imported here: the benchmark's other sections do not need langchain-community.
        from langchain_community.chat_message_histories import DynamoDBChatMessageHistory

        self.history = DynamoDBChatMessageHistory(table_name=PEER_TABLE, session_id=session_id)

    def seed(self, count: int) -> None:
        from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

        messages = [
            (HumanMessage if i % 2 == 0 else AIMessage)(
                content=f"history message number {i}, about as long as a short chat line"
            )
            for i in range(count)
        ]
        self.history.table.put_item(Item={"SessionId": self.history.session_id, "History": messages_to_dict(messages)})

    def turn(self) -> None:
        from langchain_core.messages import AIMessage, HumanMessage

        _ = self.history.messages  # what the chain reads to build the prompt
        self.history.add_messages([HumanMessage(content=QUESTION), AIMessage(content=ANSWER)])


def _too_large(error: ClientError) -> bool:
    return "size" in str(error.response.get("Error", {}).get("Message", "")).lower()


def _peer_limit(upper: int) -> int:
    """The most seeded messages one peer item holds: a bisection over put_item."""
    low, high = 0, upper
    while high - low > 1:
        middle = (low + high) // 2
        try:
            _PeerHistory(f"limit-{middle}-{time.time_ns()}").seed(middle)
            low = middle
        except ClientError as error:
            if not _too_large(error):
                raise
            high = middle
    return low


WARM_UP_TURNS = 2  # connections and code paths warm up before the clock counts


def _time_turns(turn: Any, traffic: TableTraffic, samples: int) -> StoreTurns:
    timings = []
    requests = bytes_read = bytes_sent = 0
    for _ in range(WARM_UP_TURNS):
        turn()
    for index in range(samples):
        traffic.reset()
        started = time.perf_counter()
        turn()
        timings.append((time.perf_counter() - started) * 1000)
        if index == 0:
            requests, bytes_read, bytes_sent = sum(traffic.calls.values()), traffic.bytes_read, traffic.bytes_sent
    p50, p95 = _percentiles(timings)
    return StoreTurns(p50, p95, requests, bytes_read, bytes_sent)


def measure_store_growth(server: str, url: str, histories: list[int], samples: int) -> Growth:
    """Both stores' turns at each history length on the DynamoDB server at `url`."""
    session = boto3.Session()
    traffic = TableTraffic()
    session.events.register("before-call.dynamodb", traffic.before_call)
    session.events.register("after-call.dynamodb", traffic.after_call)
    session.events.register("before-send.dynamodb", traffic.before_send)
    saved_session = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = session  # the store factory and the peer build their clients on it
    try:
        # The standard variables point boto3 at `url`, with dummy credentials, while clients are built.
        with temporary_environment({**LOCAL_AWS_ENVIRONMENT, "TABLE_NAME": TABLE, "AWS_ENDPOINT_URL_DYNAMODB": url}):
            settings = Settings.from_env()
            client = boto3.client("dynamodb", region_name=settings.region)
            client.create_table(**table_create_request("ConversationTable", TABLE))
            client.create_table(
                TableName=PEER_TABLE,
                KeySchema=[{"AttributeName": "SessionId", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "SessionId", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            store = build_store(settings)
            orchestrator = OnboardingAgentOrchestrator(store, build_chat_model(settings), settings.history_load_limit)
            limit = settings.history_load_limit
            points = [_measure_point(settings, store, orchestrator, limit, traffic, n, samples) for n in histories]
            peer_limit = _peer_limit(max(histories[-1], 20_000))
    finally:
        boto3.DEFAULT_SESSION = saved_session
    return Growth(server, points, peer_limit)


def _measure_point(
    settings: Settings,
    store: Any,
    orchestrator: OnboardingAgentOrchestrator,
    limit: int,
    traffic: TableTraffic,
    history: int,
    samples: int,
) -> GrowthPoint:
    user_id = f"growth-{history}-{time.time_ns()}"
    seed_history(settings, user_id, history)

    def our_turn() -> None:
        loaded = store.load_turn_context(user_id, limit)
        if len(loaded.messages) < min(history, limit):
            raise RuntimeError("our store loaded fewer messages than the history holds")
        store.append_message(user_id, "user", QUESTION)
        store.append_message(user_id, "assistant", ANSWER)

    ours = _time_turns(our_turn, traffic, samples)
    peer = _PeerHistory(f"growth-{history}-{time.time_ns()}")
    try:
        peer.seed(history)
        peer_turns = _time_turns(peer.turn, traffic, samples)
    except ClientError as error:
        if not _too_large(error):
            raise
        message = error.response.get("Error", {}).get("Message", "")
        peer_turns = StoreTurns(None, None, None, None, None, failure=f"fails: {message}")
    context_p50, context_p95 = _percentiles(time_context(orchestrator, user_id, samples))
    return GrowthPoint(history, ours, peer_turns, context_p50, context_p95)
