"""`uv run python -m infra.cost [--quick] [--out DIR] [-v]`: measured turns on the local stack at
several history lengths, priced per 1,000 turns, beside LangChain's DynamoDBChatMessageHistory
and AgentCore Memory. Writes cost.md, cost.json and cost.png to DIR (default .local/; `--out docs`
regenerates the committed ones) and the log lines to DIR/cost.log. See infra/bench/cost/__init__.py."""

import argparse
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

import boto3

from infra.bench.benchmark.peer_store import create_peer_table
from infra.bench.benchmark.store_io import seed_history
from infra.bench.cost.figures import summarize, summarize_peer
from infra.bench.cost.ledger import LINES, Assumptions, Comparison, compare
from infra.bench.cost.meter import Meter
from infra.bench.cost.report import write_outputs
from infra.bench.cost.turns import (
    API,
    SCRIPT,
    WEBHOOK,
    WORKER,
    PeerSession,
    PeerTurn,
    Turn,
    TurnDriver,
)
from infra.local.data import local_folder
from infra.local.deployment import DEFAULT_TABLE_NAME, IDEMPOTENCY_TABLE_NAME, TABLE_LOGICAL_ID
from infra.local.errors import LocalToolError, run_tool
from infra.local.prices import UnknownModelError, model_prices
from infra.local.stack import LocalStack
from infra.local.template import function_architecture, function_memory_mb, table_ttl_attribute
from infra.local.terminal import Progress, logs_to
from onboarding.composition import build_repositories
from onboarding.config import Settings

FUNCTIONS = (API, WEBHOOK, WORKER)
QUICK_HISTORIES, FULL_HISTORIES = [20, 200], [20, 100, 500, 1_000, 2_000, 5_000]
QUICK_TURNS, FULL_TURNS = 3, 12
PEER_RETENTION_MONTHS = 12.0  # LangChain's item has no TTL: assumed kept as long as our messages (365 days)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the smoke version CI runs: two lengths, three turns each")
    parser.add_argument(
        "--out",
        type=Path,
        default=local_folder(),
        help="where cost.md, cost.json, cost.png and cost.log go (default .local/; --out docs regenerates the "
        "committed ones)",
    )
    parser.add_argument(
        "--sms-share", type=float, default=0.2, help="the share of turns that come by SMS (default 0.2)"
    )
    parser.add_argument(
        "--model-seconds",
        type=float,
        default=2.0,
        help="seconds a function waits for each model request, billed as Lambda duration (default 2.0; the "
        "local emulator answers at once)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log_file = None if args.verbose else args.out / "cost.log"
    with logs_to(log_file) as console:
        code = run_tool(lambda: run(args, console))
        if log_file is not None and code == 0:
            print(f"Log lines: {log_file} (-v prints them instead)", file=console)
    return code


def run(args: argparse.Namespace, console: TextIO) -> int:
    histories = QUICK_HISTORIES if args.quick else FULL_HISTORIES
    turns = QUICK_TURNS if args.quick else FULL_TURNS
    memory_mb = {function: function_memory_mb(function) for function in FUNCTIONS}
    if any(function_architecture(function) != "arm64" for function in FUNCTIONS):
        raise LocalToolError("the ledger prices Lambda on Arm (arm64); template.yaml says otherwise")
    assumptions = _assumptions(args)  # bad input is refused before the stack starts
    with Progress("cost", 1 + 3 * len(histories), "steps") as progress, LocalStack() as stack:
        settings = Settings.from_env()
        driver, meter = _driver(stack)
        progress.note = "warm-up"
        _warm_up(driver, settings)
        progress.advance()
        measured = []
        for history in histories:
            progress.note = f"{history:,} messages: app turns"
            app = _app_turns(driver, settings, history, turns)
            progress.advance(note=f"{history:,} messages: texts")
            sms = _texts(driver, settings, history, turns)
            progress.advance(note=f"{history:,} messages: LangChain's store")
            peer = _peer_turns(meter, history, turns)
            progress.advance()
            measured.append((app, sms, peer))
    comparisons = [compare(app, sms, peer, assumptions, memory_mb) for app, sms, peer in measured]
    _print(console, measured, comparisons, assumptions)
    figures: dict[str, Any] = {
        "quick": args.quick,
        "turns_per_length": turns,
        "assumptions": asdict(assumptions),
        "memory_mb": memory_mb,
        "measured": [{"app": asdict(app), "sms": asdict(sms), "peer": asdict(peer)} for app, sms, peer in measured],
        "comparisons": [
            asdict(comparison)
            | {
                "total": comparison.total,
                "peer_total": comparison.peer_total,
                "agentcore_total": comparison.agentcore_total,
            }
            for comparison in comparisons
        ],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    write_outputs(figures, args.out)
    print(f"\nWrote cost.md, cost.json and cost.png to {args.out}/", file=console)
    return 0


def _assumptions(args: argparse.Namespace) -> Assumptions:
    # The settings the stack's functions will read (the stack names their table when it starts).
    model_id = Settings.from_env({"TABLE_NAME": DEFAULT_TABLE_NAME, **os.environ}).model_id
    try:
        model_prices(model_id)
        return Assumptions(model_id, args.model_seconds, args.sms_share)
    except (UnknownModelError, ValueError) as error:
        raise LocalToolError(str(error)) from None


def _driver(stack: LocalStack) -> tuple[TurnDriver, Meter]:
    # The meter reads stored items with a client of a session of its own, which it does not meter.
    reader = boto3.Session().client("dynamodb")
    ttl = {
        stack.table_name: table_ttl_attribute(TABLE_LOGICAL_ID),
        IDEMPOTENCY_TABLE_NAME: table_ttl_attribute("IdempotencyTable"),
    }
    meter = Meter(reader, {table: attribute for table, attribute in ttl.items() if attribute}, PEER_RETENTION_MONTHS)
    if boto3.DEFAULT_SESSION is None:
        boto3.setup_default_session()
    meter.install(boto3.DEFAULT_SESSION)  # before the functions' modules (and clients) load
    create_peer_table(boto3.client("dynamodb"))
    sqs = boto3.client("sqs")
    webhook_url = stack.webhook_url
    return TurnDriver(meter, stack.bedrock, stack.twilio, sqs, stack.sms_queue_url, webhook_url), meter


def _warm_up(driver: TurnDriver, settings: Settings) -> None:
    """One call of each function first: a cold start is not a turn's cost."""
    driver.app_turn(f"cost-warm-{time.time_ns()}", SCRIPT[0])
    driver.sms_turn(_phone(0), SCRIPT[0])


def _phone(history: int) -> str:
    return f"+1555{(time.time_ns() // 1000 + history) % 10_000_000:07d}"


def _app_turns(driver: TurnDriver, settings: Settings, history: int, turns: int) -> Any:
    user_id = f"cost-app-{history}-{time.time_ns()}"
    seed_history(settings, user_id, history)
    # The first turn folds the seeded history into a summary at once, which a person with that
    # history did over many earlier turns: it is not counted.
    driver.app_turn(user_id, SCRIPT[-1])
    measured: list[Turn] = [driver.app_turn(user_id, SCRIPT[index % len(SCRIPT)]) for index in range(turns)]
    return summarize("app", history, measured)


def _texts(driver: TurnDriver, settings: Settings, history: int, turns: int) -> Any:
    user_id, phone = f"cost-sms-{history}-{time.time_ns()}", _phone(history)
    seed_history(settings, user_id, history)
    build_repositories(settings).phones.link(phone, user_id)  # the phone continues that user's memory
    driver.sms_turn(phone, SCRIPT[-1])  # not counted, as for the app
    measured = [driver.sms_turn(phone, SCRIPT[index % len(SCRIPT)]) for index in range(turns)]
    return summarize("sms", history, measured)


def _peer_turns(meter: Meter, history: int, turns: int) -> Any:
    peer = PeerSession(meter, history)
    peer.turn()  # as for ours, the first is not counted
    measured: list[PeerTurn] = []
    for _ in range(turns):
        turn = peer.turn()
        if turn is None:
            break
        measured.append(turn)
    return summarize_peer(history, measured, peer.failure)


def _print(console: TextIO, measured: list[Any], comparisons: list[Comparison], assumptions: Assumptions) -> None:
    def say(*parts: object) -> None:
        print(*parts, file=console, flush=True)

    say("Measured per turn (app | SMS): model requests, tokens in / out, DynamoDB requests, request units computed")
    say(
        f"{'history':>8} | {'model':>5} {'in':>6} {'out':>5} {'reqs':>5} {'RRU':>6} {'WRU':>6} | "
        f"{'model':>5} {'in':>6} {'out':>5} {'reqs':>5} {'RRU':>6} {'WRU':>6} | moto reported (app)"
    )
    for app, sms, _ in measured:
        say(
            f"{app.history:>8} | {app.model_requests:>5.2f} {app.input_tokens:>6.0f} {app.output_tokens:>5.0f} "
            f"{app.table_requests:>5.2f} {app.read_units:>6.2f} {app.write_units:>6.2f} | "
            f"{sms.model_requests:>5.2f} {sms.input_tokens:>6.0f} {sms.output_tokens:>5.0f} "
            f"{sms.table_requests:>5.2f} {sms.read_units:>6.2f} {sms.write_units:>6.2f} | "
            f"{app.reported_units:.2f} units, nothing for {app.unreported_requests:.2f} requests"
        )
    say(
        f"\nEach function's own time per turn, ms: median (lowest-highest) over the {measured[0][0].turns} turns "
        "(the model's wait and the meter's reads left out; moto's time left in)"
    )
    for app, sms, _ in measured:
        times = [(name, figures.own_ms_spread[name]) for figures in (app, sms) for name in figures.own_ms_spread]
        say(f"{app.history:>8} | " + "; ".join(f"{name} {m:.0f} ({lo:.0f}-{hi:.0f})" for name, (m, lo, hi) in times))
    say("\nLangChain's DynamoDBChatMessageHistory per turn (computed request units)")
    for _, _, peer in measured:
        if peer.failure is not None:
            say(f"{peer.history:>8} | {peer.failure[:90]}")
        else:
            say(
                f"{peer.history:>8} | {peer.table_requests:.0f} requests, {peer.read_units:.1f} RRU, "
                f"{peer.write_units:.1f} WRU"
            )
    say(
        f"\nDollars per 1,000 turns ({assumptions.model_id}; {assumptions.sms_share:.0%} by SMS; "
        f"the model holds a function {assumptions.model_seconds_per_request:g} s a request)"
    )
    for row in dollar_table(comparisons):
        say(row)
    say(
        "\nMemory per 1,000 turns: ours (DynamoDB) | LangChain's store (DynamoDB) | AgentCore Memory (published "
        "prices); then the total per 1,000 turns with each"
    )
    for c in comparisons:
        peer = "fails (item over 400 KB)" if c.peer_memory is None else f"${c.peer_memory:.4f}"
        peer_total = "fails" if c.peer_total is None else f"${c.peer_total:.4f}"
        say(
            f"{c.history:>8} | ${c.ours_memory:.4f} | {peer} | ${c.agentcore_memory:.4f}; "
            f"totals ${c.total:.4f} | {peer_total} | ${c.agentcore_total:.4f}"
        )


TABLE_HEADER = "per 1,000 turns, at history"
LINE_WIDTH = max(len(line) for line in (*LINES, "total", TABLE_HEADER)) + 2
HISTORY_WIDTH = 11


def dollar_table(comparisons: Sequence[Comparison]) -> list[str]:
    """Dollars per 1,000 turns, one row per line of the bill and one column per history length:
    every name whole, and within 100 columns for up to six lengths."""
    rows = [
        f"{'per 1,000 turns, at history':<{LINE_WIDTH}}"
        + "".join(f"{c.history:>{HISTORY_WIDTH},}" for c in comparisons)
    ]
    rows += [
        f"{line:<{LINE_WIDTH}}" + "".join(f"{c.lines[line]:>{HISTORY_WIDTH}.5f}" for c in comparisons) for line in LINES
    ]
    rows.append(f"{'total':<{LINE_WIDTH}}" + "".join(f"{c.total:>{HISTORY_WIDTH}.4f}" for c in comparisons))
    return rows


if __name__ == "__main__":
    sys.exit(main())
