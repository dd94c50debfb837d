"""What our code adds to a turn, against a bare path doing the same library work.

A turn (`TurnService.start_turn` and its streamed reply, tool rounds and writes, as the mobile API
runs it) is timed beside a bare path that does what any code answering the same message with the
same libraries must do: one boto3 Query for the newest messages and the head items (Limit 23, as a
turn's load), the writes the turn sent (captured from botocore and replayed to a shadow partition,
so their conditions hold again), and each of the turn's model requests through
`ChatBedrockConverse.astream` with the same messages and tools (captured from LangChain's callback).
Both talk to the same servers, each in a process of its own (moto's DynamoDB server, the Bedrock
emulator), so the model's and the servers' time is in both and nothing of ours is subtracted as
model time. Turns and bare paths alternate in a shuffled order on one event loop (as the API's
server keeps one). The figure: median turn / median bare path, their difference, and the CPU time
this process spends per turn (`time.process_time`: our code and the libraries, not the servers).
"""

import asyncio
import copy
import random
import statistics
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3
from botocore import xform_name
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage

from infra.bench.benchmark.model_process import emulator_process
from infra.local.iam.identity import acting_as
from infra.local.stack import LocalStack, temporary_environment
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.persistence.keys import HEAD_ITEMS, USER_PREFIX

MESSAGE = "I walk my dog every day and swim on Sundays"
LOAD_LIMIT = 23  # a turn's Query: HISTORY_LOAD_LIMIT (20) messages and the three head items
_ORDER = random.Random(5)  # noqa: S311 - the order of samples, not a secret


@dataclass
class _Captured:
    """What one turn asked of the libraries: its DynamoDB writes and its model requests."""

    writes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    model_calls: list[tuple[list[BaseMessage], list[Any]]] = field(default_factory=list)

    def before_parameter_build(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        if model.name != "Query" and model.name != "GetItem":
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


@dataclass(frozen=True)
class Overhead:
    samples: int
    turn_p50_ms: float
    bare_p50_ms: float
    cpu_per_turn_ms: float
    requests_per_turn: dict[str, float]  # the writes and model calls a turn made, mean over turns

    @property
    def ratio(self) -> float:
        return self.turn_p50_ms / self.bare_p50_ms

    @property
    def added_ms(self) -> float:
        return self.turn_p50_ms - self.bare_p50_ms


class _Runner:
    """One stack's turns and bare paths for one user."""

    def __init__(self, settings: Settings, captured: _Captured) -> None:
        self.captured = captured
        observed = build_chat_model(settings)
        observed.callbacks = [_ModelCalls(captured)]  # what each model call of the turn is sent
        self.service = build_turn_service(settings, build_repositories(settings), observed)
        self.llm = build_chat_model(settings)
        self.client = boto3.client("dynamodb", region_name=settings.region)
        self.table = settings.table_name
        self.user_id = f"overhead-{time.time_ns()}"
        # Each turn's work, replayed once and in order by a bare path: the shadow partition's items
        # then go through the same versions as the turn's, so the writes' conditions hold again.
        self.pending: deque[tuple[list[tuple[str, dict[str, Any]]], list[tuple[list[BaseMessage], list[Any]]]]] = (
            deque()
        )
        self.replayed: list[tuple[list[tuple[str, dict[str, Any]]], list[Any]]] = []

    async def turn(self, index: int) -> tuple[float, float]:
        """Seconds of one turn, wall and CPU; what it asked of the libraries becomes the bare path's work."""
        self.captured.writes.clear()
        self.captured.model_calls.clear()
        cpu, started = time.process_time(), time.perf_counter()
        turn = await self.service.start_turn(self.user_id, f"{MESSAGE} ({index})")
        await turn.collect()
        wall, spent = time.perf_counter() - started, time.process_time() - cpu
        self.pending.append((list(self.captured.writes), list(self.captured.model_calls)))
        return wall, spent

    async def bare(self) -> float:
        """Seconds of the bare path doing the oldest turn's library work not yet replayed."""
        writes, calls = self.pending.popleft()
        self.replayed.append((writes, calls))
        partition = f"{USER_PREFIX}{self.user_id}"
        prepared = [(getattr(self.client, xform_name(name)), _shadow(params, partition)) for name, params in writes]
        models = [self.llm.bind_tools(tools) if tools else self.llm for _, tools in calls]
        started = time.perf_counter()
        self.client.query(
            TableName=self.table,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :first AND :last",
            ExpressionAttributeValues={
                ":pk": {"S": partition},
                ":first": {"S": "MSG#"},
                ":last": {"S": HEAD_ITEMS[-1]},
            },
            ScanIndexForward=False,
            Limit=LOAD_LIMIT,
            ConsistentRead=True,
        )
        for model, (messages, _) in zip(models, calls, strict=True):
            async for _ in model.astream(messages):
                pass
        for call, params in prepared:
            call(**params)
        return time.perf_counter() - started


def measure_turn_overhead(samples: int) -> Overhead:
    """`samples` turns and as many bare paths on the current local stack; each pair in a random order."""
    captured = _Captured()
    session = boto3.Session()
    session.events.register("before-parameter-build.dynamodb", captured.before_parameter_build)
    saved, boto3.DEFAULT_SESSION = boto3.DEFAULT_SESSION, session
    try:
        runner = _Runner(Settings.from_env().model_copy(update={"rate_limit_messages": 0}), captured)
    finally:
        boto3.DEFAULT_SESSION = saved
    loop = asyncio.new_event_loop()
    turns: list[float] = []
    cpu: list[float] = []
    bares: list[float] = []
    counts: dict[str, int] = {}
    try:
        for index in range(2):  # warm up clients and imports
            loop.run_until_complete(runner.turn(index))
            loop.run_until_complete(runner.bare())
        for index in range(2, samples + 2):
            if runner.pending and _ORDER.random() < 0.5:  # the pair's order, shuffled
                bare = loop.run_until_complete(runner.bare())
                wall, spent = loop.run_until_complete(runner.turn(index))
            else:
                wall, spent = loop.run_until_complete(runner.turn(index))
                bare = loop.run_until_complete(runner.bare())
            turns.append(wall)
            cpu.append(spent)
            bares.append(bare)
            writes, calls = runner.replayed[-1]
            for name, _ in writes:
                counts[name] = counts.get(name, 0) + 1
            counts["ConverseStream"] = counts.get("ConverseStream", 0) + len(calls)
    finally:
        loop.close()
    return Overhead(
        samples,
        statistics.median(turns) * 1000,
        statistics.median(bares) * 1000,
        statistics.median(cpu) * 1000,
        {name: count / samples for name, count in counts.items()},
    )


@dataclass(frozen=True)
class OverheadRuns:
    """Several runs, each on a stack of its own: the figure is the median run, with the runs' spread."""

    runs: list[Overhead]

    @property
    def ratios(self) -> list[float]:
        return [run.ratio for run in self.runs]

    @property
    def ratio(self) -> float:
        return statistics.median(self.ratios)

    @property
    def samples(self) -> int:
        return self.runs[0].samples

    def _median(self, attribute: str) -> float:
        return float(statistics.median(getattr(run, attribute) for run in self.runs))

    def summary(self) -> dict[str, Any]:
        return {
            "samples": self.samples,
            "runs": len(self.runs),
            "turn_p50_ms": self._median("turn_p50_ms"),
            "bare_p50_ms": self._median("bare_p50_ms"),
            "added_ms": self._median("added_ms"),
            "cpu_per_turn_ms": self._median("cpu_per_turn_ms"),
            "ratio": self.ratio,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "per_run": [asdict(run) | {"ratio": run.ratio, "added_ms": run.added_ms} for run in self.runs],
        }


def measure_overhead_runs(runs: int, samples: int, chunk_delay_s: float = 0.0) -> OverheadRuns:
    """`runs` runs, each on a fresh local stack with the emulator in a process of its own."""
    measured = []
    for _ in range(runs):
        with LocalStack() as stack, emulator_process(chunk_delay_s) as model_url:
            del stack  # its DynamoDB server (a child) and environment; the model is the child emulator
            with temporary_environment({"AWS_ENDPOINT_URL_BEDROCK_RUNTIME": model_url}), acting_as("ApiFunction"):
                measured.append(measure_turn_overhead(samples))
    return OverheadRuns(measured)
