"""A turn's time against the size of the local table (20, 2,000 and 20,000 items), on the local
DynamoDB server with the flat-cost layer (infra/local/flat_dynamodb.py) and without it (moto as it
is), in one run.

A turn is the product's whole turn path: `TurnService.start_turn`, the streamed reply from the
Bedrock emulator (no pause between chunks), the fold; its store work is one Query and two
transactions. The table holds the size's items in one of two layouts: other users' messages (a
shared table grows), or the turn's own user's history (one person chats for weeks, as with
`infra.chat`'s data file). Each (server, layout, size) has a table of its own on that server, and
the rounds visit them in a shuffled order each time, so whatever the machine does meanwhile falls on
all of them alike. Figures: the median of each round's median turn, with the rounds' range.
"""

import asyncio
import os
import random
import statistics
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3

from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.deployment import LOCAL_AWS_ENVIRONMENT
from infra.local.dynamodb_process import LocalDynamoDB
from infra.local.stack import temporary_environment
from infra.local.template import table_create_request
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.persistence.keys import MESSAGE_PREFIX, USER_PREFIX

LAYOUTS = ("other users", "own history")
USERS_PER_FILLER_PARTITION = 20  # items per other user in the "other users" layout
_JITTER = random.Random(7)  # noqa: S311 - the order of rounds, not a secret


@dataclass(frozen=True)
class SizeFigures:
    server: str  # "flat" (the layer) or "moto as is"
    layout: str
    items: int
    median_ms: float
    low_ms: float
    high_ms: float


def _fill(client: Any, table: str, layout: str, items: int, user_id: str) -> None:
    start_ms = int(time.time() * 1000) - 3_600_000 - items
    rows = []
    for number in range(items):
        owner = user_id if layout == "own history" else f"filler-{number // USERS_PER_FILLER_PARTITION}"
        rows.append(
            {
                "pk": {"S": f"{USER_PREFIX}{owner}"},
                "sk": {"S": f"{MESSAGE_PREFIX}{start_ms + number:013d}#{number:012x}"},
                "role": {"S": "user" if number % 2 == 0 else "assistant"},
                "content": {"S": f"message number {number}, about as long as a short chat line"},
                "created_at": {"S": datetime.fromtimestamp((start_ms + number) / 1000, UTC).isoformat()},
            }
        )
    for begin in range(0, len(rows), 25):
        pending: Any = {table: [{"PutRequest": {"Item": row}} for row in rows[begin : begin + 25]]}
        while pending:
            pending = client.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}


async def _turns(service: Any, user_id: str, count: int) -> list[float]:
    timings = []
    for number in range(count):
        started = time.perf_counter()
        turn = await service.start_turn(user_id, f"Here is how my week went, part {number}")
        await turn.collect()
        await turn.fold_summary()
        timings.append((time.perf_counter() - started) * 1000)
    return timings


def measure_table_sizes(sizes: list[int], rounds: int, turns_per_round: int) -> list[SizeFigures]:
    """Each (server, layout, size): `rounds` rounds of `turns_per_round` turns, interleaved."""
    servers = {"flat": LocalDynamoDB(flat=True), "moto as is": LocalDynamoDB(flat=False)}
    with BedrockEmulator() as model:
        try:
            for server in servers.values():
                server.start()
            services: dict[tuple[str, str, int], tuple[Any, str, asyncio.AbstractEventLoop]] = {}
            for name, server in servers.items():
                environment = {
                    **LOCAL_AWS_ENVIRONMENT,
                    "AWS_ENDPOINT_URL_DYNAMODB": server.url,
                    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": model.url,
                }
                with temporary_environment(environment):
                    client = boto3.client("dynamodb", region_name=LOCAL_AWS_ENVIRONMENT["AWS_REGION"])
                    for layout in LAYOUTS:
                        for size in sizes:
                            table = f"size-{LAYOUTS.index(layout)}-{size}"
                            client.create_table(**table_create_request("ConversationTable", table))
                            user_id = f"measured-{size}"
                            _fill(client, table, layout, size, user_id)
                            # moto as it is can take seconds a request on a big table: long timeouts, one try.
                            settings = Settings(
                                table_name=table,
                                rate_limit_messages=0,
                                dynamodb_max_attempts=1,
                                dynamodb_read_timeout_s=60.0,
                                store_reserve_s=100.0,
                                turn_deadline_s=200.0,
                            )
                            loop = asyncio.new_event_loop()
                            service = build_turn_service(settings)
                            loop.run_until_complete(_turns(service, user_id, 2))  # warm: clients, the first turn
                            services[name, layout, size] = (service, user_id, loop)
            per_round: dict[tuple[str, str, int], list[float]] = {key: [] for key in services}
            for _ in range(rounds):
                order = list(services)
                _JITTER.shuffle(order)
                for key in order:
                    service, user_id, loop = services[key]
                    timings = loop.run_until_complete(_turns(service, user_id, turns_per_round))
                    per_round[key].append(statistics.median(timings))
            for _, _, loop in services.values():
                loop.close()
        finally:
            for server in servers.values():
                server.stop()
    return [
        SizeFigures(name, layout, size, statistics.median(medians), min(medians), max(medians))
        for (name, layout, size), medians in per_round.items()
    ]


def describe_sizes(figures: list[SizeFigures]) -> list[str]:
    """The section's lines: each server, layout and size, then each server's ratio last to first."""
    lines = [
        "A turn against the table's size (the whole turn path; median of rounds, their range)",
        f"{'server':<11} {'layout':<12} {'items':>7} {'turn ms':>9} {'range':>16}",
    ]
    for figure in sorted(figures, key=lambda f: (f.server, f.layout, f.items)):
        lines.append(
            f"{figure.server:<11} {figure.layout:<12} {figure.items:>7} {figure.median_ms:>9.1f} "
            f"{figure.low_ms:>7.1f}-{figure.high_ms:<7.1f}"
        )
    for server in sorted({f.server for f in figures}):
        for layout in LAYOUTS:
            points = sorted((f for f in figures if (f.server, f.layout) == (server, layout)), key=lambda f: f.items)
            lines.append(
                f"{server}, {layout}: {points[-1].items} vs {points[0].items} items: "
                f"{points[-1].median_ms / points[0].median_ms:.2f}x"
            )
    return lines


def main() -> None:
    """`python -m infra.bench.benchmark.table_size [--quick]`: the figures alone."""
    import sys

    quick = "--quick" in sys.argv[1:]
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    sizes = [20, 2_000] if quick else [20, 2_000, 20_000]
    print("\n".join(describe_sizes(measure_table_sizes(sizes, 2 if quick else 5, 3 if quick else 5))))


if __name__ == "__main__":
    main()
