"""The benchmark's sections: each runs on its own (its own local stack, its own processes), at a
quick scale or a full one, and returns the lines it prints and the figures it keeps. `infra.benchmark`
runs them in order; tests/e2e/test_benchmark_sections.py runs each one's quick form.
"""

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infra.bench.benchmark.stats import percentile
from infra.local.stack import temporary_environment

FUNCTIONS = ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"]
MODEL_FUNCTIONS = ["ApiFunction", "SmsWorkerFunction"]
# The emulator's pause before each streamed chunk in the paced overhead figure: a fast model's
# cadence (a chunk of a few tokens at a few hundred tokens a second).
PACED_DELTA_S = 0.005
COLD_START_GOALS_S = {"ApiFunction": 1.0, "SmsWorkerFunction": 1.0, "SmsWebhookFunction": 0.35}


@dataclass
class Workspace:
    """What sections share within one run: the quick or full scale, and the built artifact."""

    quick: bool
    scratch: Path
    _build: Path | None = None

    def artifacts(self) -> Path:
        """`sam build` (x86_64) of the current tree, made once per run (infra/bench/benchmark/artifacts.py)."""
        from infra.bench.benchmark.artifacts import build_artifacts

        if self._build is None:
            self._build = build_artifacts(self.scratch / "artifacts")
        return self._build

    def pick(self, quick: Any, full: Any) -> Any:
        return quick if self.quick else full


@dataclass
class Outcome:
    lines: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


def cold_starts(work: Workspace) -> Outcome:
    from infra.bench.benchmark.first_calls import measure_cold_starts
    from infra.local.stack import LocalStack

    samples = work.pick(1, 9)
    with LocalStack() as stack:
        runs = measure_cold_starts(stack, work.artifacts(), FUNCTIONS, samples)
    lines = [
        f"Cold start (a fresh python3.13 process on the sam build artifact, timed from its start; the API "
        f"under uvicorn to its first answer), median of {samples} with min-max:"
    ]
    for name, phases in runs.items():
        seconds = [run["seconds"] for run in phases]
        init = statistics.median(run["init_seconds"] for run in phases)
        first = statistics.median(run["first_call_seconds"] for run in phases)
        goal = COLD_START_GOALS_S[name]
        verdict = (
            "" if work.quick else f"; goal <= {goal} s, {'met' if statistics.median(seconds) <= goal else 'missed'}"
        )
        lines.append(
            f"{name:<20} {statistics.median(seconds):.3f} s (min {min(seconds):.3f}, max {max(seconds):.3f}); "
            f"init {init:.3f} s, first call {first:.3f} s{verdict}"
        )
    return Outcome(lines, {"cold_start_s": runs})


def priming(work: Workspace) -> Outcome:
    from infra.bench.benchmark.first_calls import measure_priming
    from infra.local.stack import LocalStack

    samples = work.pick(1, 7)
    with LocalStack() as stack:
        gains = measure_priming(stack, work.artifacts(), MODEL_FUNCTIONS, samples)
    lines = [f"SnapStart priming: the first call's own work (waiting on the servers apart), median of {samples}"]
    for gain in gains:
        lines.append(
            f"{gain.function:<20} unprimed {gain.unprimed_own}, primed {gain.primed_own}; "
            f"servers {gain.unprimed_server.median_ms:.1f} / {gain.primed_server.median_ms:.1f} ms; "
            f"before-checkpoint hook {gain.prime_hook}, after-restore hook {gain.restore_hook}"
        )
    return Outcome(lines, {"priming": gains})


def webhook_acknowledgement(work: Workspace) -> Outcome:
    from infra.bench.benchmark.webhook_ack import measure_webhook_ack
    from infra.local.iam.identity import acting_as
    from infra.local.stack import LocalStack

    posts = work.pick(20, 1_000)
    with LocalStack() as stack, acting_as("SmsWebhookFunction"):
        ack = measure_webhook_ack(stack.twilio.sign, stack.webhook_url, posts)
    verdict = "" if work.quick else f"; goal p99 <= 300 ms, {'met' if ack.p99_ms <= 300 else 'missed'}"
    lines = [
        f"SMS webhook acknowledgement, warm, {posts} signed posts: p50 {ack.p50_ms:.1f} ms, p99 {ack.p99_ms:.1f} ms, "
        f"max {ack.max_ms:.1f} ms{verdict}; waiting on the servers p50 {percentile(ack.server_ms, 50):.1f} ms, "
        f"p99 {percentile(ack.server_ms, 99):.1f} ms; the rest p50 {percentile(ack.outside_servers_ms, 50):.1f} ms, "
        f"p99 {percentile(ack.outside_servers_ms, 99):.1f} ms"
    ]
    figures = {
        "p50_ms": ack.p50_ms,
        "p99_ms": ack.p99_ms,
        "max_ms": ack.max_ms,
        "posts": posts,
        "server_p50_ms": percentile(ack.server_ms, 50),
        "server_p99_ms": percentile(ack.server_ms, 99),
        "outside_servers_p50_ms": percentile(ack.outside_servers_ms, 50),
        "outside_servers_p99_ms": percentile(ack.outside_servers_ms, 99),
    }
    return Outcome(lines, {"webhook_ack": figures, "_ack": ack})


def dynamodb_per_turn(work: Workspace) -> Outcome:
    from infra.bench.benchmark.store_io import measure_turn_costs
    from infra.local.iam.identity import acting_as
    from infra.local.stack import LocalStack

    histories, samples = work.pick(([20, 200], 5), ([20, 1_000, 10_000], 50))
    with LocalStack() as stack, acting_as("ApiFunction"):
        del stack
        costs = measure_turn_costs(histories, samples)
    lines = [
        "DynamoDB per turn (one whole turn; context = load + build, the orchestrator's work)",
        f"{'history':>8} {'reads':>6} {'writes':>7} {'items read':>11} {'bytes read':>11} "
        f"{'context p50 ms':>15} {'p95 ms':>8}",
    ]
    for cost in costs:
        lines.append(
            f"{cost.history:>8} {cost.reads:>6} {cost.writes:>7} {cost.items_read:>11} {cost.bytes_read:>11} "
            f"{cost.context_p50_ms:>15.2f} {cost.context_p95_ms:>8.2f}"
        )
    return Outcome(lines, {"turn_costs": costs})


def _overhead(work: Workspace, delta_s: float, key: str, label: str) -> Outcome:
    from infra.bench.benchmark.turn_overhead import measure_overhead_runs

    runs, samples = work.pick((2, 5), (5, 30))
    measured = measure_overhead_runs(runs, samples, delta_s)
    summary = measured.summary()
    verdict = "" if work.quick else f"; goal <= 1.25x, {'met' if measured.ratio <= 1.25 else 'missed'}"
    lines = [
        f"Turn against a bare path doing the same library work, {label}, median of {runs} runs of {samples} pairs: "
        f"turn {summary['turn_p50_ms']:.1f} ms, bare {summary['bare_p50_ms']:.1f} ms, "
        f"+{summary['added_ms']:.1f} ms; ratio {measured.ratio:.2f}x "
        f"(runs {summary['ratio_min']:.2f}-{summary['ratio_max']:.2f}x{verdict}); "
        f"our process's CPU per turn {summary['cpu_per_turn_ms']:.1f} ms"
    ]
    return Outcome(lines, {key: summary})


def overhead_instant(work: Workspace) -> Outcome:
    return _overhead(work, 0.0, "overhead", "an instant model")


def overhead_paced(work: Workspace) -> Outcome:
    outcome = _overhead(work, PACED_DELTA_S, "overhead_paced", f"a model pausing {PACED_DELTA_S * 1000:g} ms a chunk")
    outcome.figures["paced_delta_s"] = PACED_DELTA_S
    return outcome


def first_token(work: Workspace) -> Outcome:
    from infra.bench.benchmark.first_token import measure_first_token
    from infra.local.stack import LocalStack

    samples = work.pick(5, 50)
    # One user sends every turn, more than the rate limit lets through a minute: it is off here.
    with temporary_environment({"RATE_LIMIT_MESSAGES": "0"}), LocalStack(api_port=0) as stack:
        first = measure_first_token(stack, samples)
    verdict = "" if work.quick else f"; goal <= 30 ms, {'met' if first.added_max_ms <= 30 else 'missed'}"
    lines = [
        f"First token over SSE (local gateway), median of {first.samples} turns: client {first.client_p50_ms:.1f} ms "
        f"after sending; {first.added_p50_ms:.1f} ms after the model's first token (max {first.added_max_ms:.1f} ms"
        f"{verdict})"
    ]
    return Outcome(lines, {"first_token": first})


def deployment_sizes(work: Workspace) -> Outcome:
    from infra.bench.benchmark.sizes import measure_sizes

    sizes = measure_sizes()
    lines = ["Deployment size, unzipped, with the function's own layers (goal <= 120 MB each; Lambda's limit 250 MB)"]
    if isinstance(sizes, str):
        lines.append(sizes)
    else:
        for size in sizes:
            parts = ", ".join(f"{layer} {n / 1e6:.1f}" for layer, n in size.layer_bytes.items())
            lines.append(
                f"{size.function:<20} {size.total_bytes / 1e6:6.1f} MB (own {size.own_bytes / 1e6:.1f}; {parts})"
            )
    return Outcome(lines, {"deployment_sizes": sizes})


def store_growth(work: Workspace) -> Outcome:
    from infra.bench.benchmark.dynalite import DynaliteUnavailableError, LocalDynalite
    from infra.bench.benchmark.store_growth import describe_growth, measure_store_growth
    from infra.local.dynamodb_process import LocalDynamoDB

    histories = work.pick([20, 200, 500], [20, 100, 500, 1_000, 2_000, 5_000, 10_000])
    samples = work.pick(3, 30)
    dynamodb = LocalDynamoDB().start()
    try:
        growths = [measure_store_growth("moto server", dynamodb.url, histories, samples)]
    finally:
        dynamodb.stop()
    lines: list[str] = []
    if work.quick:
        # The quick run needs no Node.js: the comparison with dynalite is the full run's.
        lines.append("Store cost on dynalite: skipped in --quick (the full run compares on it; it needs Node.js)")
    else:
        try:
            with LocalDynalite() as dynalite:
                growths.append(measure_store_growth("dynalite", dynalite.url, histories, samples, transactions=False))
        except DynaliteUnavailableError as missing:
            lines.append(f"Store growth on dynalite: skipped ({missing}); moto's server with the flat-cost layer below")
    for growth in growths:
        lines += describe_growth(growth, verdict=not work.quick)
    return Outcome(lines, {"store_growth": growths})


def table_size(work: Workspace) -> Outcome:
    from infra.bench.benchmark.table_size import describe_sizes, measure_table_sizes

    sizes = work.pick([20, 2_000], [20, 2_000, 20_000])
    figures = measure_table_sizes(sizes, work.pick(2, 5), work.pick(2, 5))
    return Outcome(describe_sizes(figures), {"table_size": figures})


SECTIONS: dict[str, Callable[[Workspace], Outcome]] = {
    "cold starts": cold_starts,
    "SnapStart priming": priming,
    "webhook acknowledgement": webhook_acknowledgement,
    "DynamoDB per turn": dynamodb_per_turn,
    "overhead, instant model": overhead_instant,
    "overhead, paced model": overhead_paced,
    "first token over SSE": first_token,
    "deployment sizes (sam build)": deployment_sizes,
    "store growth": store_growth,
    "turn against the table's size": table_size,
}
