"""Per-turn overhead outside the model, against the bare DynamoDB calls a turn needs.

A turn's wall time minus the time the emulator spent answering its model calls is what our code
adds (loading and building the context, prompts, tools, LangChain's message conversion, the
writes). The bare calls are the same table requests made straight through boto3: the turn's
Query (newest first, the same Limit) and its two writes of the same sizes. Both run side by side,
alternating, on the same local server, so the ratio holds on a noisy machine. The emulator's time
is measured on its side (request read to last byte sent): botocore's reading of the stream counts
as overhead, which makes the ratio conservative.
"""

import asyncio
import statistics
import time
from dataclasses import dataclass
from typing import Any

import boto3

from infra.bedrock_emulator import BedrockEmulator
from onboarding.settings import Settings
from onboarding.store import HEAD_ITEMS, MESSAGE_PREFIX, USER_PREFIX
from onboarding.store_factory import build_store
from onboarding.wiring import build_turn_service

MESSAGE = "I walk my dog every day and swim on Sundays"


@dataclass(frozen=True)
class Overhead:
    samples: int
    turn_p50_ms: float
    model_p50_ms: float
    overhead_p50_ms: float
    bare_p50_ms: float

    @property
    def ratio(self) -> float:
        return self.overhead_p50_ms / self.bare_p50_ms


async def _turn(service: Any, emulator: BedrockEmulator, user_id: str, text: str) -> tuple[float, float]:
    model_before = emulator.model_seconds
    requests_before = len(emulator.requests)
    started = time.perf_counter()
    turn = await service.start_turn(user_id, text)
    await turn.collect()
    wall = time.perf_counter() - started
    _settle(emulator)
    if len(emulator.requests) == requests_before:
        raise RuntimeError("the turn did not call the model; there is nothing to subtract")
    return wall, emulator.model_seconds - model_before


def _settle(emulator: BedrockEmulator) -> None:
    """Wait until every answer's time is booked: the emulator's bookkeeping may trail its last byte."""
    deadline = time.monotonic() + 5
    while emulator.answered < len(emulator.requests) and time.monotonic() < deadline:
        time.sleep(0.001)


def _bare_calls(client: Any, table: str, user_id: str, limit: int, index: int) -> float:
    partition = {"S": f"{USER_PREFIX}{user_id}"}
    started = time.perf_counter()
    client.query(
        TableName=table,
        KeyConditionExpression="pk = :pk",
        ExpressionAttributeValues={":pk": partition},
        ScanIndexForward=False,
        Limit=limit,
    )
    for role, text in (("user", MESSAGE), ("assistant", MESSAGE * 3)):
        client.put_item(
            TableName=table,
            Item={
                "pk": {"S": f"{USER_PREFIX}{user_id}-bare"},
                "sk": {"S": f"{MESSAGE_PREFIX}{time.time_ns()}#{role}{index}"},
                "role": {"S": role},
                "content": {"S": text},
                "created_at": {"S": "2026-01-01T00:00:00+00:00"},
            },
            ConditionExpression="attribute_not_exists(sk)",
        )
    return time.perf_counter() - started


def measure_turn_overhead(emulator: BedrockEmulator, samples: int) -> Overhead:
    settings = Settings.from_env().model_copy(update={"rate_limit_messages": 0})
    store = build_store(settings)
    service = build_turn_service(settings, store)
    client = boto3.client("dynamodb", region_name=settings.region)
    user_id = f"overhead-{time.time_ns()}"
    limit = settings.history_load_limit + len(HEAD_ITEMS)
    walls, models, bares = [], [], []
    for index in range(samples + 2):
        wall, model = asyncio.run(_turn(service, emulator, user_id, f"{MESSAGE} ({index})"))
        bare = _bare_calls(client, settings.table_name, user_id, limit, index)
        if index >= 2:  # the first turns warm up clients and imports
            walls.append(wall)
            models.append(model)
            bares.append(bare)
    overheads = [wall - model for wall, model in zip(walls, models, strict=True)]
    return Overhead(
        samples,
        statistics.median(walls) * 1000,
        statistics.median(models) * 1000,
        statistics.median(overheads) * 1000,
        statistics.median(bares) * 1000,
    )
