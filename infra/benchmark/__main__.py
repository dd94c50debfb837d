"""`uv run python -m infra.benchmark [--quick]`: run the benchmarks against the local stack, print
the figures. See infra/benchmark/__init__.py."""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from infra.benchmark.first_token import measure_first_token
from infra.benchmark.store_io import measure_turn_costs
from infra.benchmark.turn_overhead import measure_turn_overhead
from infra.benchmark.webhook_ack import measure_webhook_ack
from infra.local_stack import LocalStack

ROOT = Path(__file__).parents[2]
FUNCTIONS = ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"]


def cold_starts(environment: dict[str, str], samples: int) -> dict[str, list[float]]:
    """Seconds of `samples` fresh processes per function: import, clients, first call."""
    env = {**os.environ, **environment}
    results: dict[str, list[float]] = {name: [] for name in FUNCTIONS}
    for _ in range(samples):
        for name in FUNCTIONS:  # interleaved, so machine noise spreads over all functions alike
            output = subprocess.run(  # noqa: S603 - our own interpreter and module
                [sys.executable, "-m", "infra.benchmark.cold_start", name],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                check=True,
            ).stdout
            results[name].append(json.loads(output.strip().splitlines()[-1])["seconds"])
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the smoke version CI runs: small sizes, few samples")
    args = parser.parse_args(argv)
    histories = [20, 200] if args.quick else [20, 1_000, 10_000]
    samples, posts, cold_samples = (5, 20, 1) if args.quick else (50, 1_000, 10)
    overhead_samples = 5 if args.quick else 50

    with LocalStack() as stack:
        # The table's later sections fill it with long histories. moto copies a whole table for every
        # transaction, so the webhook (a transaction per new number) and the cold starts run first,
        # on a small table, lest they measure moto's copying instead of our code.
        ack = measure_webhook_ack(stack.twilio.sign, stack.environment["TWILIO_WEBHOOK_URL"], posts)
        colds = cold_starts(stack.environment, cold_samples)
        print("DynamoDB per turn (one whole turn; context = load + build, the orchestrator's work)")
        print(
            f"{'history':>8} {'reads':>6} {'writes':>7} {'items read':>11} {'bytes read':>11} "
            f"{'context p50 ms':>15} {'p95 ms':>8}"
        )
        for cost in measure_turn_costs(histories, samples):
            print(
                f"{cost.history:>8} {cost.reads:>6} {cost.writes:>7} {cost.items_read:>11} {cost.bytes_read:>11} "
                f"{cost.context_p50_ms:>15.2f} {cost.context_p95_ms:>8.2f}"
            )
        overhead = measure_turn_overhead(stack.bedrock, overhead_samples)
    # Its own stack with the HTTP gateway (whose queue poller would otherwise answer the webhook
    # section's texts while it is being timed).
    with LocalStack(api_port=0) as api_stack:
        first = measure_first_token(api_stack, overhead_samples)
    print(
        f"\nPer-turn overhead outside the model, median of {overhead.samples} turns: "
        f"turn {overhead.turn_p50_ms:.1f} ms, "
        f"model {overhead.model_p50_ms:.1f} ms, overhead {overhead.overhead_p50_ms:.1f} ms; "
        f"bare DynamoDB calls {overhead.bare_p50_ms:.1f} ms; ratio {overhead.ratio:.2f}x (goal <= 1.25x)"
    )
    print(
        f"\nFirst token over SSE (local gateway), median of {first.samples} turns: client {first.client_p50_ms:.1f} ms "
        f"after sending; {first.added_p50_ms:.1f} ms after the model's first token (max {first.added_max_ms:.1f} ms; "
        "goal <= 30 ms)"
    )
    print(
        f"\nSMS webhook acknowledgement, warm, {posts} signed posts: "
        f"p50 {ack['p50_ms']:.1f} ms, p99 {ack['p99_ms']:.1f} ms, max {ack['max_ms']:.1f} ms"
    )
    print(f"\nCold start (fresh process: import + clients + first call), median of {cold_samples}")
    for name, seconds in colds.items():
        print(f"{name:<20} {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
