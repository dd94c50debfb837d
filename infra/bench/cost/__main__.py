"""`uv run python -m infra.cost [--quick] [--out DIR] [--sms-share F] [--model-seconds S] [-v]`:
measured turns on the local stack at several history lengths, priced per 1,000 turns, beside
LangChain's DynamoDBChatMessageHistory and AgentCore Memory. Writes cost.md, cost.json and
cost.png to DIR (default .local/; `--out docs` regenerates the committed ones) and the log lines to
DIR/cost.log. See infra/bench/cost/__init__.py.

The turns go through the real turn path, at one history length each (a person whose summary is
caught up, as their earlier turns left it):

- an app turn: API Gateway's event for `POST /chat` (streamed) invoked on ApiFunction as Lambda
  would (infra.local.lambda_runner: the adapter's HTTP request to the FastAPI app, the turn);
- a text: Twilio's signed webhook invoked on SmsWebhookFunction (it queues the turn), then what
  Lambda's event source mapping does: receive the message, invoke SmsWorkerFunction with it, delete it;
- LangChain's store: read the history, add the two messages, as `RunnableWithMessageHistory` does.

Each invocation is timed; its own time is that less the emulator's time answering (the model's
wait, which the ledger prices with an assumption of its own) and less the meter's reads. Tokens
are the emulator's usage reports, as Bedrock would bill them; DynamoDB and SQS are the meter's.
"""

import argparse
import json
import os
import string
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlencode

import boto3
from botocore.exceptions import ClientError

from infra.bench.benchmark.history import seed
from infra.bench.cost.ledger import (
    LINES,
    Assumptions,
    Invocation,
    PeerTurn,
    Turn,
    check_in_cost,
    compare,
    summarize,
    summarize_peer,
)
from infra.bench.cost.meter import Meter
from infra.local.bedrock_emulator import BedrockEmulator
from infra.local.data import local_folder
from infra.local.deployment import DEFAULT_TABLE_NAME, IDEMPOTENCY_TABLE_NAME, TABLE_LOGICAL_ID
from infra.local.errors import LocalToolError, run_tool
from infra.local.lambda_runner import invoke
from infra.local.prices import CHECKED, PRICES, REGION, UnknownModelError, model_prices
from infra.local.stack import LocalStack
from infra.local.template import function_architecture, function_memory_mb, table_ttl_attribute
from infra.local.terminal import Progress, logs_to
from infra.local.twilio_emulator import webhook_form
from onboarding.composition import build_repositories
from onboarding.config import Settings

API, WEBHOOK, WORKER = "ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"
QUICK_HISTORIES, FULL_HISTORIES = [20, 200], [20, 100, 500, 1_000, 2_000, 5_000]
PEER_RETENTION_MONTHS = 12.0  # LangChain's item has no TTL: assumed kept as long as our messages (365 days)
TEMPLATE = Path(__file__).with_name("cost.md.in")
PEER_TABLE = "langchain-history"
# What people answer during onboarding, in turn: answers the coach saves with a tool, a fact it
# keeps, an evasive one it parks, small talk. Each turn takes the next line.
SCRIPT = (
    "Hi! I'm a beginner and I walk about 5 km most days.",
    "I go to the gym twice a week, mostly the treadmill.",
    "No injuries, but my knees get sore on stairs.",
    "My name is Sam, by the way.",
    "I want to lose about 5 kg before the summer.",
    "Not sure yet, let me check my calendar.",
    "Three times a week works, 45 minutes each.",
    "I have dumbbells and a bench at home.",
    "Mostly vegetarian, and I don't eat breakfast.",
    "Thanks, that helps!",
    "Mornings before work are best for me.",
    "Monday, Wednesday and Friday.",
)


class TurnDriver:
    def __init__(self, meter: Meter, stack: LocalStack, sqs: Any) -> None:
        """`sqs`: a client of the metered session (the event source mapping's requests are billed)."""
        self._meter, self._bedrock, self._twilio, self._sqs = meter, stack.bedrock, stack.twilio, sqs
        self._queue_url, self._webhook_url = stack.sms_queue_url, stack.webhook_url
        attributes = sqs.get_queue_attributes(QueueUrl=self._queue_url, AttributeNames=["QueueArn"])
        self._queue_arn = attributes["Attributes"]["QueueArn"]

    def app_turn(self, user_id: str, text: str) -> Turn:
        context: dict[str, Any] = {"resourcePath": "/chat", "httpMethod": "POST", "stage": "v1"}
        context |= {"requestId": str(uuid.uuid4()), "authorizer": {"claims": {"sub": user_id, "token_use": "id"}}}
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        event: dict[str, Any] = {"resource": "/chat", "path": "/chat", "httpMethod": "POST", "headers": headers}
        event |= {"queryStringParameters": None, "requestContext": context, "body": json.dumps({"message": text})}
        self._meter.take()  # whatever came before is not this turn's
        with self._meter.measuring():
            usage_from = len(self._bedrock.usages)
            invocation, response = self._invoke(API, event | {"isBase64Encoded": False})
        if response.get("statusCode") != 200 or "event: done" not in str(response.get("body", "")):
            raise RuntimeError(f"the app turn failed: {response.get('statusCode')} {str(response.get('body'))[:300]}")
        return self._turn("app", (invocation,), usage_from)

    def sms_turn(self, phone: str, text: str) -> Turn:
        from infra.local.event_sources import sqs_event_records

        form = webhook_form(f"SM{uuid.uuid4().hex}", phone, text)
        headers = {"X-Twilio-Signature": self._twilio.sign(self._webhook_url, form)}
        event = {"path": "/sms", "httpMethod": "POST", "body": urlencode(form), "isBase64Encoded": False}
        event |= {"headers": headers | {"Content-Type": "application/x-www-form-urlencoded"}}
        event["requestContext"] = {"requestId": str(uuid.uuid4()), "stage": "v1"}
        sent_before = len(self._twilio.sent)
        self._meter.take()
        with self._meter.measuring():
            usage_from = len(self._bedrock.usages)
            webhook, acknowledged = self._invoke(WEBHOOK, event)
            if acknowledged.get("statusCode") != 200:
                raise RuntimeError(f"the webhook answered {acknowledged.get('statusCode')}")
            received = self._sqs.receive_message(
                QueueUrl=self._queue_url, MaxNumberOfMessages=1, WaitTimeSeconds=5, MessageSystemAttributeNames=["All"]
            )
            if len(messages := received.get("Messages", [])) != 1:
                raise RuntimeError("the webhook queued no turn")
            records = sqs_event_records(messages, self._queue_arn, self._sqs.meta.region_name)
            worker, result = self._invoke(WORKER, {"Records": records})
            if result.get("batchItemFailures"):
                raise RuntimeError("the worker failed the text")
            self._sqs.delete_message(QueueUrl=self._queue_url, ReceiptHandle=messages[0]["ReceiptHandle"])
        if len(self._twilio.sent) <= sent_before:
            raise RuntimeError("the worker sent no reply")
        return self._turn("sms", (webhook, worker), usage_from)

    def _invoke(self, function: str, event: dict[str, Any]) -> tuple[Invocation, Any]:
        model_s, requests, overhead = self._bedrock.model_seconds, len(self._bedrock.requests), self._meter.overhead_s
        started = time.perf_counter()
        response = invoke(function, event)
        wall = time.perf_counter() - started
        _settle(self._bedrock)
        own = wall - (self._bedrock.model_seconds - model_s) - (self._meter.overhead_s - overhead)
        return Invocation(function, max(0.0, own), len(self._bedrock.requests) - requests), response

    def _turn(self, channel: str, invocations: tuple[Invocation, ...], usage_from: int) -> Turn:
        metered, usages = self._meter.take(), self._bedrock.usages[usage_from:]
        tokens_in, tokens_out = (sum(usage[key] for usage in usages) for key in ("inputTokens", "outputTokens"))
        return Turn(channel, invocations, 1, tokens_in, tokens_out, tuple(metered))


def _settle(emulator: BedrockEmulator) -> None:
    """Wait until every answer's time is booked: the emulator's bookkeeping may trail its last byte."""
    deadline = time.monotonic() + 5
    while emulator.answered < len(emulator.requests) and time.monotonic() < deadline:
        time.sleep(0.001)


class PeerSession:
    """LangChain's `DynamoDBChatMessageHistory` for one session, the store ours is set beside: one
    item per session, read and written back whole every turn (as `RunnableWithMessageHistory`
    drives it), until DynamoDB refuses the item as over 400 KB; then `failure` says so, and its
    turns are None. Its `history` messages are written straight in: seeding them turn by turn
    would rewrite the whole item every turn (quadratic, and the point of the comparison)."""

    def __init__(self, meter: Meter, history: int) -> None:
        from langchain_community.chat_message_histories import DynamoDBChatMessageHistory
        from langchain_core.messages import AIMessage, HumanMessage, messages_to_dict

        self._meter = meter
        self.failure: str | None = None
        self._store = DynamoDBChatMessageHistory(table_name=PEER_TABLE, session_id=f"cost-{history}-{time.time_ns()}")
        line = "history message number {}, about as long as a short chat line"
        seeded = [(AIMessage if i % 2 else HumanMessage)(content=line.format(i)) for i in range(history)]
        item = {"SessionId": self._store.session_id, "History": messages_to_dict(seeded)}
        self._guard(lambda: self._store.table.put_item(Item=item))

    def _guard(self, action: Callable[[], object]) -> bool:
        if self.failure is not None:
            return False
        try:
            action()
        except ClientError as error:
            said = str(error.response.get("Error", {}).get("Message", ""))
            if "size" not in said.lower():
                raise
            self.failure = f"fails: {said}"
        return self.failure is None

    def turn(self) -> PeerTurn | None:
        """One turn (what the chain reads for the prompt, then `add_messages`), or None once it fails."""
        from langchain_core.messages import AIMessage, HumanMessage

        def exchange() -> None:
            _ = self._store.messages  # what the chain reads to build the prompt
            answer = AIMessage(content="Noted: a beginner who walks 5 km most days.")
            self._store.add_messages([HumanMessage(content=SCRIPT[0]), answer])

        self._meter.take()
        with self._meter.measuring():
            done = self._guard(exchange)
        metered = self._meter.take()
        return PeerTurn(tuple(metered)) if done else None


def create_peer_table(client: Any) -> None:
    """The table LangChain's store expects: one item per session, keyed by `SessionId`."""
    key = {"AttributeName": "SessionId", "AttributeType": "S"}
    client.create_table(
        TableName=PEER_TABLE,
        KeySchema=[{"AttributeName": "SessionId", "KeyType": "HASH"}],
        AttributeDefinitions=[key],
        BillingMode="PAY_PER_REQUEST",
    )


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the smoke version CI runs: two lengths, three turns each")
    out = "where cost.md, cost.json, cost.png and cost.log go (default .local/; --out docs: the committed ones)"
    parser.add_argument("--out", type=Path, default=local_folder(), help=out)
    share = "the share of turns that come by SMS (default 0.2)"
    parser.add_argument("--sms-share", type=float, default=0.2, help=share)
    wait = "seconds a function waits for each model request, billed as Lambda duration (default 2.0)"
    parser.add_argument("--model-seconds", type=float, default=2.0, help=wait)
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
    histories, turns = (QUICK_HISTORIES, 3) if args.quick else (FULL_HISTORIES, 12)
    memory_mb = {function: function_memory_mb(function) for function in (API, WEBHOOK, WORKER)}
    if any(function_architecture(function) != "arm64" for function in memory_mb):
        raise LocalToolError("the ledger prices Lambda on Arm (arm64); template.yaml says otherwise")
    # Bad input is refused before the stack starts; the model is the stack's functions' own.
    try:
        model_prices(model_id := Settings.from_env({"TABLE_NAME": DEFAULT_TABLE_NAME, **os.environ}).model_id)
        assumptions = Assumptions(model_id, args.model_seconds, args.sms_share)
    except (UnknownModelError, ValueError) as error:
        raise LocalToolError(str(error)) from None
    measured = []
    with Progress("cost", 1 + 3 * len(histories), "steps") as progress, LocalStack() as stack:
        settings = Settings.from_env()
        ttl = {stack.table_name: table_ttl_attribute(TABLE_LOGICAL_ID)}
        ttl[IDEMPOTENCY_TABLE_NAME] = table_ttl_attribute("IdempotencyTable")
        # The meter reads stored items with a client of a session of its own, which it does not meter.
        meter = Meter(boto3.Session().client("dynamodb"), {t: a for t, a in ttl.items() if a}, PEER_RETENTION_MONTHS)
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        meter.install(boto3.DEFAULT_SESSION)  # before the functions' modules (and clients) load
        create_peer_table(boto3.client("dynamodb"))
        driver = TurnDriver(meter, stack, boto3.client("sqs"))
        progress.note = "warm-up"  # one call of each function first: a cold start is not a turn's cost
        driver.app_turn(f"cost-warm-{time.time_ns()}", SCRIPT[0])
        driver.sms_turn(_phone(0), SCRIPT[0])
        progress.advance()
        for history in histories:
            user_id, phone = f"cost-{history}-{time.time_ns()}", _phone(history)
            for user in (f"{user_id}-app", f"{user_id}-sms"):
                seed(boto3.client("dynamodb"), settings.table_name, user, history, summarized=True)
            build_repositories(settings).phones.link(phone, f"{user_id}-sms")  # the phone continues that memory
            progress.note = f"{history:,} messages: app turns"
            # The first turn of each is not counted: its user's clients and caches warm up.
            app = [driver.app_turn(f"{user_id}-app", SCRIPT[i % len(SCRIPT)]) for i in range(-1, turns)][1:]
            progress.advance(note=f"{history:,} messages: texts")
            sms = [driver.sms_turn(phone, SCRIPT[i % len(SCRIPT)]) for i in range(-1, turns)][1:]
            progress.advance(note=f"{history:,} messages: LangChain's store")
            peer = PeerSession(meter, history)
            peer_turns = [turn for _ in range(turns + 1) if (turn := peer.turn()) is not None][1:]
            progress.advance()
            summaries = summarize("app", history, app), summarize("sms", history, sms)
            measured.append((*summaries, summarize_peer(history, peer_turns, peer.failure)))
    comparisons = [compare(app, sms, peer, assumptions, memory_mb) for app, sms, peer in measured]
    figures: dict[str, Any] = {"quick": args.quick, "turns_per_length": turns, "assumptions": asdict(assumptions)}
    figures["memory_mb"] = memory_mb
    figures["measured"] = [
        {"app": asdict(app), "sms": asdict(sms), "peer": asdict(peer)} for app, sms, peer in measured
    ]
    totals = ("total", "peer_total", "agentcore_total")
    figures["comparisons"] = [asdict(c) | {key: getattr(c, key) for key in totals} for c in comparisons]
    args.out.mkdir(parents=True, exist_ok=True)
    write_outputs(figures, args.out)
    tables = _cost_rows(figures), _memory_rows(figures), _measured_rows(figures), _peer_rows(figures)
    print("\n\n".join("\n".join(table) for table in tables), file=console)
    print(f"\nWrote cost.md, cost.json and cost.png to {args.out}/", file=console)
    return 0


def _phone(history: int) -> str:
    return f"+1555{(time.time_ns() // 1000 + history) % 10_000_000:07d}"


def write_outputs(figures: dict[str, Any], out: Path) -> None:
    (out / "cost.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    write_plot(figures, out / "cost.png")
    (out / "cost.md").write_text(markdown(figures), encoding="utf-8")


def _money(value: float | None) -> str:
    return "—" if value is None else f"${value:.4f}" if value < 1 else f"${value:.2f}"


def _cost_rows(figures: dict[str, Any]) -> list[str]:
    comparisons = figures["comparisons"]
    rows = ["| per 1,000 turns | " + " | ".join(f"{c['history']:,} messages" for c in comparisons) + " |"]
    rows.append("|---|" + "---:|" * len(comparisons))
    rows += [f"| {line} | " + " | ".join(_money(c["lines"][line]) for c in comparisons) + " |" for line in LINES]
    return [*rows, "| **total, ours** | " + " | ".join(f"**{_money(c['total'])}**" for c in comparisons) + " |"]


def _check_in_rows(figures: dict[str, Any]) -> list[str]:
    """Check-ins a month for 1,000 users, computed from the prices (ledger.check_in_cost)."""
    kinds = [("weekly", False), ("weekly", True), ("daily", True)]
    costs = [check_in_cost(figures["assumptions"]["model_id"], often, sms) for often, sms in kinds]
    rows = ["| a month, 1,000 users | " + " | ".join(f"{o}, {'SMS' if s else 'app'}" for o, s in kinds) + " |"]
    rows.append("|---|" + "---:|" * len(kinds))
    rows += [f"| {line} | " + " | ".join(_money(c[line]) for c in costs) + " |" for line in costs[0]]
    return [*rows, "| **total** | " + " | ".join(f"**{_money(sum(c.values()))}**" for c in costs) + " |"]


def _memory_rows(figures: dict[str, Any]) -> list[str]:
    rows = [
        "| history | ours: DynamoDB (computed) | LangChain's store: DynamoDB (computed) | AgentCore Memory "
        "(published prices) | total, ours | total with LangChain's store | total with AgentCore Memory |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in figures["comparisons"]:
        peer = _money(c["peer_memory"]) if c["peer_memory"] is not None else "fails: its item outgrows 400 KB"
        rows.append(
            f"| {c['history']:,} | {_money(c['ours_memory'])} | {peer} | {_money(c['agentcore_memory'])} | "
            f"{_money(c['total'])} | {_money(c['peer_total'])} | {_money(c['agentcore_total'])} |"
        )
    return rows


def _measured_rows(figures: dict[str, Any]) -> list[str]:
    rows = [
        "| history | channel | turns | model requests | tokens in | tokens out | DynamoDB requests "
        "(by operation) | RRU | WRU | bytes stored | moto reported | own time, ms: median (lowest-highest) |",
        "|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for m in (entry[channel] for entry in figures["measured"] for channel in ("app", "sms")):
        operations = ", ".join(f"{name} {n:.2f}" for name, n in m["by_operation"].items())
        spreads = m["own_ms_spread"].items()
        own = ", ".join(f"{name} {median:.0f} ({low:.0f}-{high:.0f})" for name, (median, low, high) in spreads)
        rows.append(
            f"| {m['history']:,} | {m['channel']} | {m['turns']} | {m['model_requests']:.2f} | "
            f"{m['input_tokens']:,.0f} | {m['output_tokens']:,.0f} | {m['table_requests']:.2f} ({operations}) | "
            f"{m['read_units']:.2f} | {m['write_units']:.2f} | {m['stored_bytes']:,.0f} | "
            f"{m['reported_units']:.2f} units; nothing for {m['unreported_requests']:.2f} requests | {own} |"
        )
    return rows


def _peer_rows(figures: dict[str, Any]) -> list[str]:
    rows = ["| history | requests | RRU | WRU | bytes stored | moto reported |", "|---:|---:|---:|---:|---:|---|"]
    for p in (entry["peer"] for entry in figures["measured"]):
        rows.append(
            f"| {p['history']:,} | {p['failure']} | | | | |"
            if p["failure"] is not None
            else f"| {p['history']:,} | {p['table_requests']:.0f} | {p['read_units']:.1f} | {p['write_units']:.1f} | "
            f"{p['stored_bytes']:,.0f} | {p['reported_units']:.1f} units (it asks for none) |"
        )
    return rows


def markdown(figures: dict[str, Any]) -> str:
    """cost.md: the template's words (cost.md.in) around the figures' tables."""
    assumptions, share = figures["assumptions"], f"{figures['assumptions']['sms_share']:.0%}"
    prices = ["| price | dollars | per | source | where the figure was read |", "|---|---:|---|---|---|"]
    prices += [f"| {p.what} | {p.usd:g} | {p.per:,g} {p.unit} | {p.source} | {p.seen} |" for p in PRICES]
    return string.Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        quick=" (a `--quick` run: few turns, two lengths)" if figures["quick"] else "",
        region=REGION,
        checked=CHECKED,
        turns=figures["turns_per_length"],
        share=share,
        model_id=assumptions["model_id"],
        events=assumptions["agentcore_events_per_turn"],
        retrievals=assumptions["agentcore_retrievals_per_turn"],
        model_seconds=f"{assumptions['model_seconds_per_request']:g}",
        memory_mb=", ".join(f"{name} {mb} MB" for name, mb in figures["memory_mb"].items()),
        **{name: "\n".join(rows(figures)) for name, rows in TABLES.items()},
        price_rows="\n".join(prices),
    )


TABLES = {"cost_rows": _cost_rows, "memory_rows": _memory_rows, "measured_rows": _measured_rows}
TABLES["peer_rows"] = _peer_rows
TABLES["check_in_rows"] = _check_in_rows


def write_plot(figures: dict[str, Any], path: Path) -> None:
    """Left: dollars per 1,000 turns, all in, against history length. Right: the memory's part alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparisons = figures["comparisons"]
    histories = [c["history"] for c in comparisons]
    failed = [c["history"] for c in comparisons if c["peer_memory"] is None]
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    kinds = (
        ("total", "peer_total", "agentcore_total", "all in"),
        ("ours_memory", "peer_memory", "agentcore_memory", ""),
    )
    for axis, (ours, peer, agentcore, what) in zip(axes, kinds, strict=True):
        axis.plot(histories, [c[ours] for c in comparisons], marker="o", label="ours (DynamoDB, one table)")
        fitting = [c for c in comparisons if c["peer_memory"] is not None]
        if fitting:
            langchain = "LangChain DynamoDBChatMessageHistory"
            axis.plot([c["history"] for c in fitting], [c[peer] for c in fitting], marker="s", label=langchain)
        axis.plot(
            histories, [c[agentcore] for c in comparisons], marker="^", label="AgentCore Memory (published prices)"
        )
        for history in failed:
            axis.axvline(history, color="tab:red", linestyle="--", alpha=0.6)
        if failed:
            axis.plot([], [], color="tab:red", linestyle="--", label="LangChain's item over 400 KB: turns fail")
        axis.set(xscale="log", yscale="linear" if what else "log", xlabel="messages in the person's history")
        axis.set(ylabel="US dollars", title=f"dollars per 1,000 turns, {what or 'the memory alone'}")
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Cost per 1,000 turns against history length (prices of {CHECKED})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    sys.exit(main())
