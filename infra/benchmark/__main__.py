"""`uv run python -m infra.benchmark [--quick] [--out DIR] [-v]`: run the benchmarks against the local
stack, print the figures, write the report, figures and plots to DIR (default .local/; `--out docs`
regenerates the committed ones) and the log lines to DIR/benchmark.log. See infra/benchmark/__init__.py."""

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from infra.benchmark.dynalite import LocalDynalite, require_node
from infra.benchmark.environment import temporary_environment
from infra.benchmark.first_calls import fresh_processes, measure_priming
from infra.benchmark.first_token import measure_first_token
from infra.benchmark.plots import write_figures, write_latency_plot, write_store_growth_plot
from infra.benchmark.report import write_report
from infra.benchmark.sizes import measure_sizes
from infra.benchmark.stats import percentile
from infra.benchmark.store_growth import Growth, measure_store_growth
from infra.benchmark.store_io import measure_turn_costs
from infra.benchmark.turn_overhead import measure_overhead_runs
from infra.benchmark.webhook_ack import measure_webhook_ack
from infra.errors import run_tool
from infra.local_data import local_folder
from infra.local_stack import LocalDynamoDB, LocalStack
from infra.terminal import Progress, logs_to

ROOT = Path(__file__).parents[2]
FUNCTIONS = ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"]
# The emulator's pause before each streamed chunk in the paced overhead figure: a fast model's
# cadence (a chunk of a few tokens at a few hundred tokens a second). Slower models leave the
# client more time to do its work while it waits, so this is the harder case of the two.
PACED_DELTA_S = 0.005
# The sections, in the order they run (for the progress line).
SECTIONS = (
    "cold starts",
    "SnapStart priming",
    "webhook acknowledgement",
    "DynamoDB per turn",
    "overhead, instant model",
    "overhead, paced model",
    "first token over SSE",
    "deployment sizes (sam build)",
    "store growth",
)


def cold_starts(stack: LocalStack, samples: int) -> dict[str, list[dict[str, float]]]:
    """Seconds of `samples` fresh processes per function: init, first call, its wait on the servers."""
    runs = fresh_processes(stack, FUNCTIONS, samples)
    return {name: runs[(name, False)] for name in FUNCTIONS}


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the smoke version CI runs: small sizes, few samples, moto only (no Node.js), no goal verdicts",
    )
    parser.add_argument("--sizes", action="store_true", help="also run `sam build` for the deployment sizes")
    parser.add_argument(
        "--out",
        type=Path,
        default=local_folder(),
        help="where benchmark.md, benchmark.json, the PNG plots and benchmark.log go (default .local/; "
        "--out docs regenerates the committed figures)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.quick:
        # Said before anything runs, not after half an hour: the full run needs Node.js for dynalite.
        require_node("the full benchmark compares the stores on dynalite")
    log_file = None if args.verbose else args.out / "benchmark.log"
    with logs_to(log_file) as console:
        with Progress("benchmark", len(SECTIONS), "sections") as progress:
            code = run(args, console, progress)
        if log_file is not None:
            print(f"Log lines: {log_file} (-v prints them instead)", file=console)
    return code


def run(args: argparse.Namespace, console: TextIO, progress: Progress) -> int:
    """Every section in turn; the figures on `console`, the files in `args.out`."""

    def say(*parts: object) -> None:
        print(*parts, file=console, flush=True)

    out: Path = args.out
    histories = [20, 200] if args.quick else [20, 1_000, 10_000]
    growth_histories = [20, 200, 500] if args.quick else [20, 100, 500, 1_000, 2_000, 5_000, 10_000]
    samples, posts, cold_samples = (5, 20, 1) if args.quick else (50, 1_000, 10)
    overhead_samples = 5 if args.quick else 50
    overhead_runs = 2 if args.quick else 5
    priming_samples = 1 if args.quick else 7
    growth_samples = 3 if args.quick else 30
    sections = iter(SECTIONS[1:])
    progress.note = SECTIONS[0]

    def section_done() -> None:
        progress.advance(note=next(sections, ""))

    # Cold starts on a fresh stack of their own: after the webhook's posts, moto's table walk on
    # every Query made the first call wait on the server more than it worked.
    with LocalStack() as cold_stack:
        colds = cold_starts(cold_stack, cold_samples)
    section_done()
    priming = measure_priming(["ApiFunction", "SmsWorkerFunction"], priming_samples)
    section_done()
    with LocalStack() as stack:
        # The table's later sections fill it with long histories. moto copies a whole table for every
        # transaction, so the webhook (a transaction per new number) runs first, on a small table,
        # lest it measure moto's copying instead of our code.
        ack = measure_webhook_ack(stack.twilio.sign, stack.webhook_url, posts)
        section_done()
        say("DynamoDB per turn (one whole turn; context = load + build, the orchestrator's work)")
        say(
            f"{'history':>8} {'reads':>6} {'writes':>7} {'items read':>11} {'bytes read':>11} "
            f"{'context p50 ms':>15} {'p95 ms':>8}"
        )
        turn_costs = measure_turn_costs(histories, samples)
        section_done()
        for cost in turn_costs:
            say(
                f"{cost.history:>8} {cost.reads:>6} {cost.writes:>7} {cost.items_read:>11} {cost.bytes_read:>11} "
                f"{cost.context_p50_ms:>15.2f} {cost.context_p95_ms:>8.2f}"
            )
    # Its own stack, so the bare calls it compares with are not slowed by the tens of thousands of
    # items the sections before left in the table (moto's Query walks the whole table).
    # Twice: against an instant model (every chunk at once, so all the client's stream work comes
    # after the model's time: the judged figure), and against a stream paced like a fast model's,
    # where that work overlaps the wait for the next chunk, as it does against Bedrock.
    # Several runs, each on a fresh stack: one run's median moves from run to run.
    overhead = measure_overhead_runs(overhead_runs, overhead_samples)
    section_done()
    paced = measure_overhead_runs(overhead_runs, overhead_samples, PACED_DELTA_S)
    section_done()
    # Its own stack with the HTTP gateway (whose queue poller would otherwise answer the webhook
    # section's texts while it is being timed).
    # One user sends every turn, more than the rate limit lets through a minute: it is off here.
    with temporary_environment({"RATE_LIMIT_MESSAGES": "0"}), LocalStack(api_port=0) as api_stack:
        first = measure_first_token(api_stack, overhead_samples)
    section_done()
    for label, figure in (
        ("an instant model", overhead),
        (f"a model pausing {PACED_DELTA_S * 1000:g} ms a chunk", paced),
    ):
        replayed = ", ".join(f"{count:.2f} {name}" for name, count in figure.requests_per_turn.items())
        say(
            f"\nPer-turn overhead outside the model, {label}, median of {figure.samples} turns: "
            f"turn {figure.turn_p50_ms:.1f} ms, "
            f"model {figure.model_p50_ms:.1f} ms, overhead {figure.overhead_p50_ms:.1f} ms; "
            f"bare DynamoDB calls {figure.bare_p50_ms:.1f} ms; ratio {figure.ratio:.2f}x "
            f"(median of {len(figure.runs)} runs, {min(figure.ratios):.2f}-{max(figure.ratios):.2f}x; goal <= 1.25x, "
            f"{verdict(figure.ratio <= 1.25, args.quick)}); the turn's requests, replayed bare: {replayed}"
        )
    say(
        f"\nFirst token over SSE (local gateway), median of {first.samples} turns: client {first.client_p50_ms:.1f} ms "
        f"after sending; {first.added_p50_ms:.1f} ms after the model's first token (max {first.added_max_ms:.1f} ms; "
        "goal <= 30 ms)"
    )
    say(
        f"\nSMS webhook acknowledgement, warm, {posts} signed posts: "
        f"p50 {ack.p50_ms:.1f} ms, p99 {ack.p99_ms:.1f} ms, max {ack.max_ms:.1f} ms (goal: p99 <= 300 ms); "
        f"waiting on the servers p50 {percentile(ack.server_ms, 50):.1f} ms, "
        f"p99 {percentile(ack.server_ms, 99):.1f} ms; "
        f"the rest p50 {percentile(ack.outside_servers_ms, 50):.1f} ms, "
        f"p99 {percentile(ack.outside_servers_ms, 99):.1f} ms"
    )
    say(f"\nCold start (fresh process on a fresh stack: import + clients + first call), median of {cold_samples}")
    for name, runs in colds.items():
        seconds = [run["seconds"] for run in runs]
        init = statistics.median(run["init_seconds"] for run in runs)
        first_call = statistics.median(run["first_call_seconds"] for run in runs)
        waited = statistics.median(run["first_call_server_seconds"] for run in runs)
        say(
            f"{name:<20} {statistics.median(seconds):.2f} s (min {min(seconds):.2f}, max {max(seconds):.2f}); "
            f"init {init:.2f} s, first call {first_call:.2f} s (of which waiting on the servers {waited:.2f} s)"
        )
    say(f"\nSnapStart priming: the first call's own work (waiting on the servers apart), median of {priming_samples}")
    for gain in priming:
        say(
            f"{gain.function:<20} unprimed {gain.unprimed_own}, primed {gain.primed_own}; "
            f"servers {gain.unprimed_server.median_ms:.1f} / {gain.primed_server.median_ms:.1f} ms; "
            f"before-checkpoint hook {gain.prime_hook}, after-restore hook {gain.restore_hook}"
        )
    sizes = measure_sizes() if args.sizes or not args.quick else "skipped: --quick (add --sizes to run sam build)"
    section_done()
    say("\nDeployment size, unzipped, with the function's own layers (goal <= 120 MB each; Lambda's limit 250 MB)")
    if isinstance(sizes, str):
        say(sizes)
    else:
        for size in sizes:
            parts = ", ".join(f"{layer} {n / 1e6:.1f}" for layer, n in size.layer_bytes.items())
            say(f"{size.function:<20} {size.total_bytes / 1e6:6.1f} MB (own {size.own_bytes / 1e6:.1f}; {parts})")
    growths = store_growths(growth_histories, growth_samples, dynalite=not args.quick)
    section_done()
    for growth in growths:
        print_growth(growth, say)
    out.mkdir(parents=True, exist_ok=True)
    write_store_growth_plot(growths, out / "benchmark-store-growth.png")
    cold_seconds = {name: [run["seconds"] for run in runs] for name, runs in colds.items()}
    write_latency_plot(ack, cold_seconds, out / "benchmark-latency.png")
    if args.quick:
        say("\nStore cost on dynalite: skipped in --quick (the full run compares on it; it needs Node.js and npm)")
    figures: dict[str, Any] = {"store_growth": growths, "overhead": overhead.summary(), "quick": args.quick}
    figures["overhead_paced"] = paced.summary()
    figures["priming"] = priming
    figures |= {"paced_delta_s": PACED_DELTA_S, "first_token": first, "cold_start_s": colds}
    figures["deployment_sizes"] = sizes
    figures["turn_costs"] = turn_costs
    figures["webhook_ack"] = {
        "p50_ms": ack.p50_ms,
        "p99_ms": ack.p99_ms,
        "max_ms": ack.max_ms,
        "posts": posts,
        "server_p50_ms": percentile(ack.server_ms, 50),
        "server_p99_ms": percentile(ack.server_ms, 99),
        "outside_servers_p50_ms": percentile(ack.outside_servers_ms, 50),
        "outside_servers_p99_ms": percentile(ack.outside_servers_ms, 99),
    }
    write_figures(figures, out / "benchmark.json")
    write_report(out)
    say(f"\nWrote benchmark.md, benchmark.json and the PNG plots to {out}/")
    return 0


def verdict(met: bool, quick: bool) -> str:
    """A goal's verdict; none in --quick, whose few samples could not carry one."""
    return "not judged in --quick" if quick else ("met" if met else "missed")


def store_growths(histories: list[int], samples: int, dynalite: bool = True) -> list[Growth]:
    """Both stores on moto's server and (unless `dynalite` is False) on dynalite, each server fresh,
    so its table holds only this."""
    dynamodb = LocalDynamoDB().start()
    try:
        on_moto = measure_store_growth("moto server", dynamodb.url, histories, samples)
    finally:
        dynamodb.stop()
    if not dynalite:
        return [on_moto]
    with LocalDynalite() as server:
        on_dynalite = measure_store_growth("dynalite", server.url, histories, samples, transactions=False)
    return [on_moto, on_dynalite]


def print_growth(growth: Growth, say: Callable[..., None] = print) -> None:
    say(
        f"\nStore cost per turn vs history, {growth.server} (one table for all lengths; median of turns; "
        "context = load + build)"
    )
    say(
        f"{'history':>8} | {'ours ms':>8} {'reqs':>5} {'read B':>8} {'sent B':>7} | "
        f"{'peer ms':>8} {'reqs':>5} {'read B':>9} {'sent B':>8} | {'context p50':>11} {'p95 ms':>7}"
    )
    for point in growth.points:
        ours, peer = point.ours, point.peer
        peer_text = (
            f"{peer.p50_ms:>8.1f} {peer.requests:>5} {peer.bytes_read:>9} {peer.bytes_sent:>8}"
            if peer.failure is None
            else f"{peer.failure[:44]:>33}"
        )
        say(
            f"{point.history:>8} | {ours.p50_ms:>8.1f} {ours.requests:>5} {ours.bytes_read:>8} {ours.bytes_sent:>7} | "
            f"{peer_text} | {point.context_p50_ms:>11.2f} {point.context_p95_ms:>7.2f}"
        )
    say(
        f"ours at {growth.points[-1].history} vs {growth.points[0].history} messages: {growth.ours_ratio():.2f}x "
        f"(goal <= 1.1x); the peer's item holds at most {growth.peer_limit} such messages (400 KB)"
    )


if __name__ == "__main__":
    sys.exit(run_tool(main))
