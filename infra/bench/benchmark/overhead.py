"""What our code adds to a turn, and what recall adds, each against the same turn without it.

- Overhead: a turn (`TurnService.start_turn` and its streamed reply, tool rounds and writes, as the
  mobile API runs it) beside a bare path doing what any code answering the same message with the
  same libraries must do: one boto3 Query for the newest messages and the head items (a turn's
  load), the writes the turn sent (captured from botocore and replayed to a shadow partition, so
  their conditions hold again), and each of the turn's model requests through
  `ChatBedrockConverse.astream` with the same messages and tools (captured from LangChain's
  callback). Recall is off on both sides.
- Recall: the same turns with recall on and off, two users side by side (the embedding of the
  message and the index's query against none); what it adds is the difference.

The timed work runs in a process of its own (`python -m infra.bench.benchmark.overhead SPEC`,
signing as ApiFunction), and the local stack, its recall indexer, the emulator and every other
server in the benchmark's: nothing but the turn and its counterpart shares the timed interpreter.
Pairs run in a shuffled order on one event loop (as the API's server keeps one).
"""

import asyncio
import copy
import json
import random
import statistics
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import boto3
from botocore import xform_name
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage

from infra.bench.benchmark.report import quantile
from infra.local.stack import LocalStack
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.persistence.schema import HEAD_ITEMS, USER_PREFIX

MESSAGE = "I walk my dog every day and swim on Sundays"
ROOT = __file__.rsplit("/infra/", 1)[0]
_ORDER = random.Random(5)  # noqa: S311 - the order of samples, not a secret


@dataclass
class _Captured:
    """What one turn asked of the libraries: its DynamoDB writes and its model requests."""

    writes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    model_calls: list[tuple[list[BaseMessage], list[Any]]] = field(default_factory=list)

    def before_parameter_build(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name not in ("Query", "GetItem"):
            self.writes.append((model.name, copy.deepcopy(params)))


class _ModelCalls(BaseCallbackHandler):
    def __init__(self, captured: _Captured) -> None:
        self._captured = captured

    def on_chat_model_start(self, serialized: Any, messages: list[list[BaseMessage]], **kwargs: Any) -> None:
        tools = list(kwargs.get("invocation_params", {}).get("tools") or [])
        self._captured.model_calls.append((list(messages[0]), tools))


def _shadow(node: Any, partition: str) -> Any:
    """`node` with the user's partition key swapped for its shadow (a write lands beside the turn's)."""
    if isinstance(node, dict):
        return {key: _shadow(value, partition) for key, value in node.items()}
    if isinstance(node, list):
        return [_shadow(value, partition) for value in node]
    return f"{partition}-bare" if node == partition else node


class _Runner:
    """The turns and bare paths of one user, and two more users' turns with recall on and off."""

    def __init__(self, settings: Settings, captured: _Captured) -> None:
        without = settings.model_copy(update={"recall_index_arn": None})
        observed = build_chat_model(without)
        observed.callbacks = [_ModelCalls(captured)]  # what each model call of the turn is sent
        self.captured, self.service = captured, build_turn_service(without, build_repositories(without), observed)
        self.recall = {True: build_turn_service(settings), False: build_turn_service(without)}
        self.llm, self.table = build_chat_model(without), settings.table_name
        self.client = boto3.client("dynamodb", region_name=settings.region)
        self.user_id = f"overhead-{time.time_ns()}"
        # Each turn's work, replayed once and in order by a bare path: the shadow partition's items
        # then go through the same versions as the turn's, so the writes' conditions hold again.
        self.pending: deque[tuple[list[tuple[str, dict[str, Any]]], list[Any]]] = deque()

    async def turn(self, index: int) -> tuple[float, float]:
        """Seconds of one turn, wall and CPU; what it asked of the libraries becomes the bare path's work."""
        self.captured.writes.clear()
        self.captured.model_calls.clear()
        cpu, started = time.process_time(), time.perf_counter()
        await (await self.service.start_turn(self.user_id, f"{MESSAGE} ({index})")).collect()
        wall, spent = time.perf_counter() - started, time.process_time() - cpu
        self.pending.append((list(self.captured.writes), list(self.captured.model_calls)))
        return wall, spent

    async def bare(self) -> float:
        """Seconds of the bare path doing the oldest turn's library work not yet replayed."""
        writes, calls = self.pending.popleft()
        partition = f"{USER_PREFIX}{self.user_id}"
        prepared = [(getattr(self.client, xform_name(name)), _shadow(params, partition)) for name, params in writes]
        models = [self.llm.bind_tools(tools) if tools else self.llm for _, tools in calls]
        keys = {":pk": {"S": partition}, ":first": {"S": "MSG#"}, ":last": {"S": HEAD_ITEMS[-1]}}
        started = time.perf_counter()
        self.client.query(  # a turn's one read: the newest messages and the head items
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
            ExpressionAttributeValues=keys,
            ScanIndexForward=False,
            Limit=20 + len(HEAD_ITEMS),
            ConsistentRead=True,
        )
        for model, (messages, _) in zip(models, calls, strict=True):
            async for _ in model.astream(messages):
                pass
        for call, params in prepared:
            call(**params)
        return time.perf_counter() - started

    async def recalled(self, recall: bool, index: int) -> float:
        started, user = time.perf_counter(), f"recall-{recall}-{self.user_id}"
        await (await self.recall[recall].start_turn(user, f"{MESSAGE} ({index})")).collect()
        return time.perf_counter() - started


def measure(samples: int) -> dict[str, Any]:
    """`samples` pairs of each kind, after two of each to warm up; in milliseconds."""
    captured, queries = _Captured(), []
    boto3.DEFAULT_SESSION = session = boto3.Session()  # every client is made on it, with these hooks
    session.events.register("before-parameter-build.dynamodb", captured.before_parameter_build)
    session.events.register("after-call.s3vectors.QueryVectors", lambda **_: queries.append(1))
    runner = _Runner(Settings.from_env().model_copy(update={"rate_limit_messages": 0}), captured)
    figures: dict[str, list[float]] = {key: [] for key in ("turn", "bare", "cpu", "recall_on", "recall_off")}
    loop = asyncio.new_event_loop()
    try:
        for index in range(samples + 2):
            # A turn and its bare path in a shuffled order, then the recall users' turns in one.
            first_bare = bool(runner.pending) and _ORDER.random() < 0.5
            bare = loop.run_until_complete(runner.bare()) if first_bare else None
            wall, spent = loop.run_until_complete(runner.turn(index))
            timed = {"turn": wall, "cpu": spent, "bare": bare or loop.run_until_complete(runner.bare())}
            for recall in _ORDER.sample([True, False], 2):
                timed[f"recall_{'on' if recall else 'off'}"] = loop.run_until_complete(runner.recalled(recall, index))
            for key, seconds in timed.items():
                figures[key] += [seconds * 1000] if index >= 2 else []
    finally:
        loop.close()
    return {f"{key}_ms": values for key, values in figures.items()} | {
        "recalled": len(queries),
        "recall_turns": samples + 2,
    }


def measure_runs(runs: int, samples: int, chunk_delay_s: float) -> list[dict[str, Any]]:
    """`runs` runs, each on a fresh local stack, the timed work in a process of its own."""
    measured = []
    for _ in range(runs):
        with LocalStack(chunk_delay_s=chunk_delay_s) as stack:
            completed = subprocess.run(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "infra.bench.benchmark.overhead", json.dumps({"samples": samples})],
                cwd=ROOT,
                env=stack.process_environment("ApiFunction"),
                capture_output=True,
                text=True,
                check=False,
            )
        if completed.returncode != 0:
            raise RuntimeError(f"the overhead's timed process failed: {completed.stderr[-3000:]}")
        measured.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    return measured


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median run's ratio with the runs' spread; recall's added p50/p95 over every run's turns."""
    ratios = [statistics.median(run["turn_ms"]) / statistics.median(run["bare_ms"]) for run in runs]

    def pooled(key: str) -> list[float]:
        return [value for run in runs for value in run[key]]

    on, off = pooled("recall_on_ms"), pooled("recall_off_ms")
    return {
        "runs": len(runs),
        "samples": len(runs[0]["turn_ms"]),
        "ratio": statistics.median(ratios),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
        "turn_p50_ms": statistics.median(pooled("turn_ms")),
        "bare_p50_ms": statistics.median(pooled("bare_ms")),
        "cpu_per_turn_ms": statistics.median(pooled("cpu_ms")),
        "recall_added_p50_ms": statistics.median(on) - statistics.median(off),
        "recall_added_p95_ms": quantile(on, 95) - quantile(off, 95),
        "recall_on_p50_ms": statistics.median(on),
        "recall_off_p50_ms": statistics.median(off),
        "recalled": sum(run["recalled"] for run in runs),
        "recall_turns": sum(run["recall_turns"] for run in runs),
    }


if __name__ == "__main__":
    print(json.dumps(measure(json.loads(sys.argv[1])["samples"])))
