"""cost.md and cost.png from cost.json (what `python -m infra.cost` measured and priced).
`python -m infra.bench.cost.report [DIR]` rewrites them from DIR/cost.json alone (default docs/)."""

import json
import sys
from pathlib import Path
from typing import Any

from infra.bench.cost.ledger import LINES
from infra.local.prices import CHECKED, PRICES, REGION

ROOT = Path(__file__).parents[3]


def write_outputs(figures: dict[str, Any], out: Path) -> None:
    (out / "cost.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    write_plot(figures, out / "cost.png")
    (out / "cost.md").write_text(markdown(figures), encoding="utf-8")


def _money(value: float | None) -> str:
    if value is None:
        return "—"
    return f"${value:.4f}" if value < 1 else f"${value:.2f}"


def _cost_rows(figures: dict[str, Any]) -> list[str]:
    comparisons = figures["comparisons"]
    header = "| per 1,000 turns | " + " | ".join(f"{c['history']:,} messages" for c in comparisons) + " |"
    rows = [header, "|---|" + "---:|" * len(comparisons)]
    for line in LINES:
        rows.append(f"| {line} | " + " | ".join(_money(c["lines"][line]) for c in comparisons) + " |")
    rows.append("| **total, ours** | " + " | ".join(f"**{_money(c['total'])}**" for c in comparisons) + " |")
    return rows


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
    for entry in figures["measured"]:
        for channel in ("app", "sms"):
            m = entry[channel]
            operations = ", ".join(f"{name} {n:.2f}" for name, n in m["by_operation"].items())
            own = ", ".join(
                f"{name} {median:.0f} ({low:.0f}-{high:.0f})"
                for name, (median, low, high) in m["own_ms_spread"].items()
            )
            rows.append(
                f"| {m['history']:,} | {channel} | {m['turns']} | {m['model_requests']:.2f} | "
                f"{m['input_tokens']:,.0f} | {m['output_tokens']:,.0f} | {m['table_requests']:.2f} ({operations}) | "
                f"{m['read_units']:.2f} | {m['write_units']:.2f} | {m['stored_bytes']:,.0f} | "
                f"{m['reported_units']:.2f} units; nothing for {m['unreported_requests']:.2f} requests | {own} |"
            )
    return rows


def _peer_rows(figures: dict[str, Any]) -> list[str]:
    rows = [
        "| history | requests | RRU | WRU | bytes stored | moto reported |",
        "|---:|---:|---:|---:|---:|---|",
    ]
    for entry in figures["measured"]:
        p = entry["peer"]
        if p["failure"] is not None:
            rows.append(f"| {p['history']:,} | {p['failure']} | | | | |")
            continue
        rows.append(
            f"| {p['history']:,} | {p['table_requests']:.0f} | {p['read_units']:.1f} | {p['write_units']:.1f} | "
            f"{p['stored_bytes']:,.0f} | {p['reported_units']:.1f} units (it asks for none) |"
        )
    return rows


def _price_rows() -> list[str]:
    rows = ["| price | dollars | per | source | where the figure was read |", "|---|---:|---|---|---|"]
    for price in PRICES:
        rows.append(f"| {price.what} | {price.usd:g} | {price.per:,g} {price.unit} | {price.source} | {price.seen} |")
    return rows


def markdown(figures: dict[str, Any]) -> str:
    assumptions = figures["assumptions"]
    memory_mb = figures["memory_mb"]
    share = assumptions["sms_share"]
    quick = " (a `--quick` run: few turns, two lengths)" if figures["quick"] else ""
    lines = [
        "# What a turn costs",
        "",
        f"Written by `uv run python -m infra.cost`{quick} from `cost.json`; the plot is `cost.png`. Prices:",
        f"{REGION}, on demand, checked {CHECKED} (the table at the end, from `infra/local/prices.py`). The",
        f"turns: {figures['turns_per_length']} measured turns per history length and channel on the local stack,",
        f"after one not counted; {share:.0%} of turns by SMS, the rest from the app; the model",
        f"`{assumptions['model_id']}`.",
        "",
        "![Cost per turn against history length](cost.png)",
        "",
        "## Dollars per 1,000 turns",
        "",
        *_cost_rows(figures),
        "",
        "The model is nearly all of it. Everything the memory costs (the DynamoDB lines) stays the same",
        "whatever the history's length: a turn reads the newest messages and the memory items in one Query",
        "and writes what it adds, and the summary's fold reads what it folds.",
        "",
        "## Beside LangChain's store and a managed memory service",
        "",
        *_memory_rows(figures),
        "",
        "- **LangChain's `DynamoDBChatMessageHistory`** (langchain-community), driven as",
        "  `RunnableWithMessageHistory` drives it: it reads the session's one item to build the prompt,",
        "  then `add_messages` reads it again and writes it back whole. Its request units are measured at",
        "  each length (the sizes of what it reads and writes), so they grow with the history, until the",
        "  item outgrows DynamoDB's 400 KB and its turns fail. It keeps messages only: no state, profile",
        "  or summary. Used as its documentation shows, it also sends the whole history to the model, whose",
        "  input tokens then grow with every turn; the totals above assume its prompt is cut to the same",
        "  window as ours.",
        f"- **Amazon Bedrock AgentCore Memory**: its published prices, per turn "
        f"{assumptions['agentcore_events_per_turn']} new events (the person's message and the reply, each",
        f"  stored as it happens) and {assumptions['agentcore_retrievals_per_turn']} long-term memory",
        "  retrieval (what the prompt needs beyond the window); short-term reads (`ListEvents`) are not",
        "  charged apart. Long-term records are billed by the month as well: at 20 records a person",
        "  (answers, profile facts) and 600 turns a person a month (the capacity plan's 20 turns a day),",
        "  another $0.025 per 1,000 turns, not in the table. Flat with history; the other costs (model,",
        "  Lambda, API Gateway, SQS) are the same for all three.",
        "",
        "## What is measured, computed and assumed",
        "",
        "**Measured** on the local stack (moto's DynamoDB, SQS and SSM, the Bedrock emulator, the Twilio",
        "stand-in), through the functions of `template.yaml` invoked as Lambda invokes them: an app turn is",
        "API Gateway's `POST /chat` event on ApiFunction (the adapter's request to the FastAPI app); a text",
        "is Twilio's signed webhook on SmsWebhookFunction, then, as Lambda's event source mapping does, the",
        "queued message received, SmsWorkerFunction invoked with it, the message deleted.",
        "",
        "- tokens in and out: the emulator's usage report for each model request, as Bedrock bills them",
        "  (the emulator counts 4 characters a token of the request it got and of its reply; its scripted",
        "  replies are shorter than a real model's, so output tokens are low: each 100 output tokens more",
        "  a turn add about $0.55 per 1,000 turns);",
        "- model requests, and DynamoDB and SQS requests: every request, counted by botocore's hooks on",
        "  the functions' clients;",
        "- Lambda invocations and API Gateway requests: one per invocation (the worker's come from the",
        "  queue, not API Gateway);",
        "- each function's own time: its invocation's wall time less the emulator's time answering and",
        "  less the meter's own reads. It includes moto's time, which is not DynamoDB's (moto walks its",
        "  whole table on a Query), so it overstates what Lambda would bill;",
        "- the bytes each write adds to the table and how long they stay (the item's TTL attribute).",
        "",
        "**Computed**, from what was measured:",
        "",
        "- DynamoDB's request units, by its documented rules (`infra/bench/cost/capacity.py`: item sizes; 1",
        "  read unit per 4 KB strongly consistent, half eventually consistent, Query's items summed before",
        "  rounding; 1 write unit per 1 KB, the larger of the item before and after; 2 per 1 KB for each",
        "  item of a transaction, its ConditionChecks included). The item sizes come from the requests and",
        "  answers as sent, and from the stored items each write touches, read just before and after it.",
        "  Not one figure is moto's: moto answers `ReturnConsumedCapacity` with a constant per operation",
        "  (1 for a Query or PutItem, 0.5 for a GetItem or UpdateItem, whatever the sizes) and with",
        "  nothing for TransactWriteItems, which a turn's writes are. The *moto reported* column shows",
        "  what it said. On AWS, DynamoDB reports the real figures: the `ConsumedReadCapacity` and",
        "  `ConsumedWriteCapacity` metrics per turn (the functions' telemetry) check these;",
        "- DynamoDB storage: the bytes a turn adds (with DynamoDB's 100 bytes an item), for as long as",
        "  they stay (our messages' TTL, `MESSAGE_TTL_DAYS`; LangChain's item has none: the same 12 months",
        "  assumed), at the price per GB-month;",
        "- SQS: one request per 64 KB of a request's body.",
        "",
        "**Assumed** (`infra/bench/cost/ledger.py`, options of `infra.cost`):",
        "",
        f"- the model keeps the function waiting {assumptions['model_seconds_per_request']:g} s per model",
        "  request (`--model-seconds`; the capacity plan's ~4 s a turn with about two model requests),",
        "  billed as Lambda duration at the function's memory (from `template.yaml`: "
        + ", ".join(f"{name} {mb} MB" for name, mb in memory_mb.items())
        + ", Arm). Lambda is a small line: doubling this wait changes the total by about 1 %;",
        f"- {share:.0%} of turns come by SMS (`--sms-share`, the capacity plan's share);",
        "- AgentCore Memory's use per turn, above.",
        "",
        "**Not counted**: free tiers; Twilio's own prices (not AWS); the queue's empty receives while",
        "idle (Lambda's pollers long-poll whether or not texts come: a fixed monthly amount, not per",
        "turn); CloudWatch (logs a few hundred bytes a turn at $0.50 per GB ingested, a fixed price per",
        "metric a month, the dashboard and alarms); SnapStart's snapshot caching and restores (per",
        "published version and per cold start, not per turn); the SSM parameter reads (standard",
        "parameters, cached five minutes); data transfer out (a reply is a few KB); Lambda's response",
        "streaming beyond 6 MB a response (free below that).",
        "",
        "## Measured per turn",
        "",
        *_measured_rows(figures),
        "",
        "LangChain's store at the same lengths:",
        "",
        *_peer_rows(figures),
        "",
        "## Prices",
        "",
        f"Checked {CHECKED}, {REGION}, first tier of each. The `source` is the page to check a price against;",
        "the last column says where the figure was read (the stored copies of some price pages hold",
        "their figures in tables the copy did not keep; there the dated secondary pages that quote them",
        "agree with one another).",
        "",
        *_price_rows(),
        "",
    ]
    return "\n".join(lines)


def write_plot(figures: dict[str, Any], path: Path) -> None:
    """Left: dollars per 1,000 turns, all in, against history length. Right: the memory's part alone."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    comparisons = figures["comparisons"]
    histories = [c["history"] for c in comparisons]
    peer = [(c["history"], c["peer_total"], c["peer_memory"]) for c in comparisons if c["peer_memory"] is not None]
    failed = [c["history"] for c in comparisons if c["peer_memory"] is None]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    series = (
        (left, "total", "peer_total", "agentcore_total", "dollars per 1,000 turns, all in"),
        (right, "ours_memory", "peer_memory", "agentcore_memory", "dollars per 1,000 turns, the memory alone"),
    )
    for axis, ours_key, peer_key, agentcore_key, title in series:
        axis.plot(histories, [c[ours_key] for c in comparisons], marker="o", label="ours (DynamoDB, one table)")
        if peer:
            index = 1 if peer_key == "peer_total" else 2
            axis.plot(
                [p[0] for p in peer],
                [p[index] for p in peer],
                marker="s",
                label="LangChain DynamoDBChatMessageHistory",
            )
        axis.plot(
            histories, [c[agentcore_key] for c in comparisons], marker="^", label="AgentCore Memory (published prices)"
        )
        for history in failed:
            axis.axvline(history, color="tab:red", linestyle="--", alpha=0.6)
        if failed:
            axis.plot([], [], color="tab:red", linestyle="--", label="LangChain's item over 400 KB: turns fail")
        axis.set_xscale("log")
        if ours_key == "ours_memory":
            axis.set_yscale("log")
        axis.set_xlabel("messages in the person's history")
        axis.set_ylabel("US dollars")
        axis.set_title(title)
        axis.grid(True, which="both", alpha=0.3)
        axis.legend(fontsize=8)
    figure.suptitle(f"Cost per 1,000 turns against history length (prices of {CHECKED})")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"
    loaded = json.loads((folder / "cost.json").read_text(encoding="utf-8"))
    write_plot(loaded, folder / "cost.png")
    (folder / "cost.md").write_text(markdown(loaded), encoding="utf-8")
