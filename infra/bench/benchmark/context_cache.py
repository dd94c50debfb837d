"""`uv run python -m infra.bench.benchmark.context_cache [--quick] [--out DIR]`: would seed 002's 5-minute
per-instance context cache pay? Both sides of the question, measured in one run on dynalite (whose
Query reads only the key range, as DynamoDB does):

- **what it would save**: the turn's context read as it is today (`load_turn`: one Query of the
  head items and the newest messages), against a cache hit (a dictionary lookup), and against the
  cheapest *safe* hit: a cache entry can only be trusted after a read that shows nothing changed
  since it was filled (the newest message's key and the state and profile versions: a Query of
  the head items and the newest message, keys and versions only). Timed alternately, sample by
  sample, in several rounds; the median of the rounds with their spread.
- **what it would risk**: a conversation replayed against per-instance caches (an entry per user,
  filled on a miss, refreshed with the instance's own writes, as a careful cache would be), and
  every context the cache served compared with what the table held: a stale context is one that
  misses a message another instance wrote meanwhile. Two layouts: the fidelity run's channel
  sequence (the app's function and the SMS worker are different Lambda functions, so different
  instances), and one function with several warm instances that Lambda routes a user's requests
  to freely.

The cache is a prototype in this file only: it is measured, not shipped (decision 0022).
"""

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import boto3

from infra.bench.benchmark.dynalite import LocalDynalite, require_node
from infra.bench.benchmark.environment import temporary_environment
from infra.bench.benchmark.stats import percentile
from infra.bench.benchmark.store_io import seed_history
from infra.local.data import local_folder
from infra.local.errors import run_tool
from infra.local.stack import LOCAL_AWS_ENVIRONMENT
from infra.local.template import table_create_request
from onboarding.composition import build_repositories
from onboarding.config import Settings
from onboarding.model.messages import Message
from onboarding.model.profile import UserProfile
from onboarding.model.records import TurnContext
from onboarding.model.state import OnboardingState
from onboarding.persistence import Repositories
from onboarding.persistence.codec import message_item, profile_item, state_item
from onboarding.persistence.keys import HEAD_ITEMS, partition
from onboarding.persistence.writing import MessageStamper

TABLE = "onboarding-memory-cache"
HISTORY = 1_000  # messages already in the user's partition
TTL_S = 300.0  # seed 002's contextCacheTTL
FIDELITY = Path(__file__).parents[2] / "docs" / "fidelity.json"


@dataclass(frozen=True)
class Timing:
    """One way of getting a turn's context: per round p50 and p95, in milliseconds."""

    name: str
    p50_ms: list[float]
    p95_ms: list[float]

    def median_p50(self) -> float:
        return statistics.median(self.p50_ms)

    def median_p95(self) -> float:
        return statistics.median(self.p95_ms)


@dataclass(frozen=True)
class Staleness:
    layout: str
    turns: int
    served_from_cache: int
    stale: int


class CachingReader:
    """The prototype: one Lambda instance's cache of turn contexts, by user, for `ttl_s`."""

    def __init__(self, store: Repositories, limit: int, ttl_s: float, clock: Callable[[], float]) -> None:
        self._store, self._limit, self._ttl_s, self._clock = store, limit, ttl_s, clock
        self._entries: dict[str, tuple[float, TurnContext]] = {}

    def load(self, user_id: str) -> tuple[TurnContext, bool]:
        """The context, and whether it came from the cache."""
        entry = self._entries.get(user_id)
        if entry is not None and self._clock() - entry[0] < self._ttl_s:
            return entry[1], True
        loaded = self._store.conversations.load_turn(user_id, self._limit)
        self._entries[user_id] = (self._clock(), loaded)
        return loaded, False

    def wrote(self, user_id: str, context: TurnContext, written: Sequence[Message]) -> None:
        """Write-through: the instance's own turn is added to its entry, newest messages kept."""
        messages = (*context.messages, *written)[-self._limit :]
        self._entries[user_id] = (self._clock(), replace(context, messages=messages))


def _validation_query(client: Any, user_id: str) -> None:
    """The smallest read that can tell whether a cached context is still current."""
    client.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": partition(user_id)},
        ScanIndexForward=False,
        Limit=len(HEAD_ITEMS) + 1,
        ProjectionExpression="sk, version",
    )


def measure_timings(
    store: Repositories, client: Any, user_id: str, limit: int, rounds: int, samples: int
) -> list[Timing]:
    """The three ways, alternated sample by sample, `rounds` times `samples`, after a warm-up."""
    reader = CachingReader(store, limit, TTL_S, time.monotonic)
    reader.load(user_id)  # fills the prototype's entry: every later load is a hit

    def cache_hit() -> None:
        if not reader.load(user_id)[1]:
            raise RuntimeError("the prototype's entry expired during the benchmark")

    ways: dict[str, Callable[[], object]] = {
        "load_turn (today)": lambda: store.conversations.load_turn(user_id, limit),
        "cache hit, validated by a read": lambda: _validation_query(client, user_id),
        "cache hit, unvalidated": cache_hit,
    }
    for action in ways.values():
        for _ in range(5):
            action()
    per_round: dict[str, list[tuple[float, float]]] = {name: [] for name in ways}
    for _ in range(rounds):
        timings: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(samples):
            for name, action in ways.items():
                started = time.perf_counter()
                action()
                timings[name].append((time.perf_counter() - started) * 1000)
        for name, values in timings.items():
            per_round[name].append((statistics.median(values), percentile(values, 95)))
    return [Timing(name, [p50 for p50, _ in runs], [p95 for _, p95 in runs]) for name, runs in per_round.items()]


def replay(
    store: Repositories,
    client: Any,
    user_id: str,
    layout: str,
    instances: Sequence[str],
    limit: int,
    table: str = TABLE,
) -> Staleness:
    """One turn per entry of `instances` (the instance that serves it), each through that instance's
    cache; a context is stale when its messages differ from the table's at that moment."""
    clock = time.monotonic  # the whole replay takes well under the TTL, as a conversation's turns do
    readers = {name: CachingReader(store, limit, TTL_S, clock) for name in set(instances)}
    stamper = MessageStamper(time.time)
    served = stale = 0
    for number, instance in enumerate(instances):
        context, hit = readers[instance].load(user_id)
        current = store.conversations.load_turn(user_id, limit)
        served += hit
        stale += [m.message_id for m in context.messages] != [m.message_id for m in current.messages]
        written = [stamper.stamp(Message(role, f"turn {number} {role}")) for role in ("user", "assistant")]
        for message in written:
            client.put_item(TableName=table, Item=message_item(user_id, message, None))
        readers[instance].wrote(user_id, context, written)
    return Staleness(layout, len(instances), served, stale)


def fidelity_channels() -> list[str]:
    """The channel of each turn of the committed fidelity run, as the instance that would serve it."""
    records = json.loads(FIDELITY.read_text())["turns"]
    return ["sms-worker" if record["channel"] == "sms" else "api" for record in records]


def random_routing(instances: int, turns: int, seed: int) -> list[str]:
    chooser = random.Random(seed)  # noqa: S311 - a routing to replay, not a secret
    return [f"instance-{chooser.randrange(instances)}" for _ in range(turns)]


def run(quick: bool) -> dict[str, Any]:
    rounds, samples, turns = (2, 20, 60) if quick else (7, 200, 226)
    with (
        LocalDynalite() as dynalite,
        temporary_environment(
            {**LOCAL_AWS_ENVIRONMENT, "TABLE_NAME": TABLE, "AWS_ENDPOINT_URL_DYNAMODB": dynalite.url}
        ),
    ):
        settings = Settings.from_env()
        client = boto3.client("dynamodb", region_name=settings.region)
        client.create_table(**table_create_request("ConversationTable", TABLE))
        store = build_repositories(settings)
        limit = settings.history_load_limit
        user_id = f"cache-{time.time_ns()}"
        seed_history(settings, user_id, HISTORY)
        now = time.time()
        state = OnboardingState(agent_context={"fitness_assessment": {"fitness_level": "beginner"}})
        client.put_item(TableName=TABLE, Item=state_item(user_id, state, now))
        client.put_item(TableName=TABLE, Item=profile_item(user_id, UserProfile(preferred_name="Alex"), now))
        timings = measure_timings(store, client, user_id, limit, rounds, samples)
        channels = fidelity_channels()
        layouts = {
            f"the fidelity run's {len(channels)} turns, {channels.count('sms-worker')} by SMS "
            "(ApiFunction and SmsWorkerFunction, one instance each)": channels
        }
        for count in (1, 2, 4):
            name = f"one function, {count} warm instance{'s' if count > 1 else ''}, requests routed at random"
            layouts[name] = random_routing(count, turns, seed=count)
        staleness = [
            replay(store, client, f"replay-{time.time_ns()}", name, layout, limit) for name, layout in layouts.items()
        ]
    return {
        "rounds": rounds,
        "samples": samples,
        "history": HISTORY,
        "ttl_s": TTL_S,
        "timings": timings,
        "staleness": staleness,
    }


def report(figures: dict[str, Any]) -> str:
    timings: list[Timing] = figures["timings"]
    today = timings[0]
    lines = [
        f"Context read per turn, dynalite, a {figures['history']:,}-message history; median of "
        f"{figures['rounds']} rounds of {figures['samples']} samples each (each round's p95 range in brackets)",
        "",
        "| way | p50 ms | p95 ms | p95 against today |",
        "|---|---:|---:|---:|",
    ]
    for timing in timings:
        ratios = [p95 / base for p95, base in zip(timing.p95_ms, today.p95_ms, strict=True)]
        lines.append(
            f"| {timing.name} | {timing.median_p50():.3f} | {timing.median_p95():.3f} "
            f"({min(timing.p95_ms):.3f}–{max(timing.p95_ms):.3f}) | {statistics.median(ratios):.2f}× |"
        )
    lines += [
        "",
        f"Stale contexts with a {figures['ttl_s']:.0f} s per-instance cache "
        "(write-through of the instance's own turns)",
        "",
        "| layout | turns | served from a cache | stale (missing another instance's messages) |",
        "|---|---:|---:|---:|",
    ]
    for result in figures["staleness"]:
        lines.append(f"| {result.layout} | {result.turns} | {result.served_from_cache} | {result.stale} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few samples and turns (CI)")
    parser.add_argument("--out", type=Path, default=local_folder(), help="where context-cache.md and .json go")
    args = parser.parse_args(argv)
    require_node("the context-cache benchmark measures on dynalite")  # before anything runs
    figures = run(args.quick)
    text = report(figures)
    print(text)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "context-cache.md").write_text(
        "# Context cache: the figures behind decision 0022\n\n"
        "Written by `uv run python -m infra.bench.benchmark.context_cache` (its docstring has the method).\n\n"
        + text
        + "\n"
    )
    serializable = {**figures, "timings": [asdict(t) for t in figures["timings"]]}
    serializable["staleness"] = [asdict(s) for s in figures["staleness"]]
    (out / "context-cache.json").write_text(json.dumps(serializable, indent=1))
    print(f"\nWrote context-cache.md and context-cache.json to {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_tool(main))
