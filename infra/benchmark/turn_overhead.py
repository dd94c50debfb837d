"""Per-turn overhead outside the model, against the bare DynamoDB calls the turn made.

A turn's wall time minus the time the emulator spent answering its model calls is what our code
adds (loading and building the context, prompts, tools, LangChain's message conversion, the
Bedrock client's signing and stream parsing, the writes). The bare calls are the very requests the
turn sent to DynamoDB, captured from botocore as the turn made them and replayed straight through
boto3 right after it: the same Query, and the same writes (PutItem, or TransactWriteItems when a
tool changed the state or profile) aimed at a shadow partition so their conditions hold again.
Both run alternately on the same local server, so the ratio holds on a noisy machine. The
emulator's time is measured on its side (request read to last byte sent): the client's reading of
the stream counts as overhead, which makes the ratio conservative.
"""

import asyncio
import copy
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import boto3
from botocore import xform_name

from infra.bedrock_emulator import BedrockEmulator
from infra.local_stack import LocalStack
from onboarding.composition import build_repositories, build_turn_service
from onboarding.config import Settings
from onboarding.persistence.keys import USER_PREFIX

MESSAGE = "I walk my dog every day and swim on Sundays"


@dataclass(frozen=True)
class Overhead:
    samples: int
    turn_p50_ms: float
    model_p50_ms: float
    overhead_p50_ms: float
    bare_p50_ms: float
    requests_per_turn: dict[str, float]  # mean over the turns: not every turn's tool writes a transaction

    @property
    def ratio(self) -> float:
        return self.overhead_p50_ms / self.bare_p50_ms


@dataclass
class RequestRecorder:
    """The DynamoDB requests made on one session, as their API parameters."""

    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def before_parameter_build(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        self.requests.append((model.name, copy.deepcopy(params)))


def _shadow(node: Any, partition: str) -> Any:
    """`node` with the user's partition key swapped for its shadow (a write lands beside the turn's)."""
    if isinstance(node, dict):
        return {key: _shadow(value, partition) for key, value in node.items()}
    if isinstance(node, list):
        return [_shadow(value, partition) for value in node]
    return f"{partition}-bare" if node == partition else node


def _replay(client: Any, requests: list[tuple[str, dict[str, Any]]], partition: str) -> float:
    """Seconds to send `requests` again straight through boto3 (writes to the shadow partition)."""
    prepared = [
        (getattr(client, xform_name(name)), params if name == "Query" else _shadow(params, partition))
        for name, params in requests
    ]
    started = time.perf_counter()
    for call, params in prepared:
        call(**params)
    return time.perf_counter() - started


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


def measure_turn_overhead(emulator: BedrockEmulator, samples: int) -> Overhead:
    recorder = RequestRecorder()
    session = boto3.Session()
    session.events.register("before-parameter-build.dynamodb", recorder.before_parameter_build)
    saved_session = boto3.DEFAULT_SESSION
    boto3.DEFAULT_SESSION = session  # the store factory builds its client on the default session
    try:
        settings = Settings.from_env().model_copy(update={"rate_limit_messages": 0})
        service = build_turn_service(settings, build_repositories(settings))
    finally:
        boto3.DEFAULT_SESSION = saved_session
    client = boto3.client("dynamodb", region_name=settings.region)  # not recorded
    user_id = f"overhead-{time.time_ns()}"
    walls, models, bares = [], [], []
    requests_per_turn: dict[str, int] = {}
    for index in range(samples + 2):
        recorder.requests.clear()
        wall, model = asyncio.run(_turn(service, emulator, user_id, f"{MESSAGE} ({index})"))
        bare = _replay(client, recorder.requests, f"{USER_PREFIX}{user_id}")
        if index >= 2:  # the first turns warm up clients and imports
            walls.append(wall)
            models.append(model)
            bares.append(bare)
            for name, _ in recorder.requests:
                requests_per_turn[name] = requests_per_turn.get(name, 0) + 1
    overheads = [wall - model for wall, model in zip(walls, models, strict=True)]
    return Overhead(
        samples,
        statistics.median(walls) * 1000,
        statistics.median(models) * 1000,
        statistics.median(overheads) * 1000,
        statistics.median(bares) * 1000,
        {name: count / samples for name, count in requests_per_turn.items()},
    )


@dataclass(frozen=True)
class OverheadRuns:
    """The overhead measured in several runs, each on a stack of its own: the figure is the median
    run, with the spread of the runs, since one run's median moves from run to run on a shared machine."""

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

    @property
    def turn_p50_ms(self) -> float:
        return self._median("turn_p50_ms")

    @property
    def model_p50_ms(self) -> float:
        return self._median("model_p50_ms")

    @property
    def overhead_p50_ms(self) -> float:
        return self._median("overhead_p50_ms")

    @property
    def bare_p50_ms(self) -> float:
        return self._median("bare_p50_ms")

    @property
    def requests_per_turn(self) -> dict[str, float]:
        names = {name for run in self.runs for name in run.requests_per_turn}
        return {name: statistics.mean(run.requests_per_turn.get(name, 0.0) for run in self.runs) for name in names}

    def summary(self) -> dict[str, Any]:
        """What benchmark.json keeps: the median run's figures, each run's, and the spread."""
        return {
            "samples": self.samples,
            "runs": len(self.runs),
            "turn_p50_ms": self.turn_p50_ms,
            "model_p50_ms": self.model_p50_ms,
            "overhead_p50_ms": self.overhead_p50_ms,
            "bare_p50_ms": self.bare_p50_ms,
            "ratio": self.ratio,
            "ratio_min": min(self.ratios),
            "ratio_max": max(self.ratios),
            "ratios": self.ratios,
            "requests_per_turn": self.requests_per_turn,
            "per_run": [asdict(run) | {"ratio": run.ratio} for run in self.runs],
        }


def measure_overhead_runs(runs: int, samples: int, chunk_delay_s: float = 0.0) -> OverheadRuns:
    """`runs` runs of `measure_turn_overhead`, each against a fresh local stack (a fresh table, so
    moto's table walk costs every run alike)."""
    measured = []
    for _ in range(runs):
        with LocalStack(chunk_delay_s=chunk_delay_s) as stack:
            measured.append(measure_turn_overhead(stack.bedrock, samples))
    return OverheadRuns(measured)
