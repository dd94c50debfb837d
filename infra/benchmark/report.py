"""docs/benchmark.md from docs/benchmark.json: each goal of the performance issue with the figure
a full run measured, and whether it is met. `python -m infra.benchmark.report [DIR]` rewrites it
from the JSON alone; the benchmark calls it after a full run."""

import json
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
MB = 1e6


_QUICK = [False]  # set while a --quick run's figures are rendered: no verdicts from so few samples


def _verdict(met: bool) -> str:
    if _QUICK[0]:
        return "not judged (--quick)"
    return "met" if met else "**missed**"


def _growth_rows(growth: dict[str, Any]) -> list[str]:
    rows = [
        f"\n**{growth['server']}** (the peer's item holds at most {growth['peer_limit']:,} such messages)\n",
        "| history | ours ms | ours bytes read | peer ms | peer bytes read | peer bytes sent | context p50 / p95 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for point in growth["points"]:
        ours, peer = point["ours"], point["peer"]
        peer_cells = (
            f"{peer['p50_ms']:.1f} | {peer['bytes_read']:,} | {peer['bytes_sent']:,}"
            if peer["failure"] is None
            else f"{peer['failure']} | | "
        )
        rows.append(
            f"| {point['history']:,} | {ours['p50_ms']:.1f} | {ours['bytes_read']:,} | {peer_cells} | "
            f"{point['context_p50_ms']:.1f} / {point['context_p95_ms']:.1f} |"
        )
    return rows


def _spread(figure: dict[str, float]) -> str:
    return f"{figure['median_ms']:.1f} ms ({figure['min_ms']:.1f}–{figure['max_ms']:.1f})"


def _priming_rows(gains: list[dict[str, Any]]) -> list[str]:
    rows = [
        "",
        "## SnapStart priming: the first call after a restore",
        "",
        "A fresh process per run: init, then (primed) the function's before-checkpoint and after-restore",
        "hooks as Lambda runs them around a snapshot, then the first call on a fresh event. The first",
        "call's own work is its time less its wait on the local servers (botocore's `before-send` to",
        "`before-parse` of each request, and each request to Twilio's stand-in). That window also holds",
        "the client's side of a first request (opening the connection pool, the HTTP parser's first",
        "use), which priming builds too, so priming can shorten the wait as well. Median of the runs,",
        "with the smallest and largest in brackets.",
        "",
        "| function | first call's own work, unprimed | primed | waiting on the servers, unprimed / primed | "
        "before-checkpoint hook | after-restore hook |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for gain in gains:
        rows.append(
            f"| {gain['function']} ({gain['runs']} runs each) | {_spread(gain['unprimed_own'])} | "
            f"{_spread(gain['primed_own'])} | {gain['unprimed_server']['median_ms']:.1f} / "
            f"{gain['primed_server']['median_ms']:.1f} ms | {_spread(gain['prime_hook'])} | "
            f"{_spread(gain['restore_hook'])} |"
        )
    return rows


def render(figures: dict[str, Any]) -> str:
    _QUICK[0] = bool(figures.get("quick"))
    growth = {g["server"]: g for g in figures["store_growth"]}
    moto = growth["moto server"]
    dynalite = growth.get("dynalite", moto)  # --quick measures on moto only
    ours = [p["ours"]["p50_ms"] for p in dynalite["points"]]
    growth_ratio = ours[-1] / ours[0]
    turn_costs = figures["turn_costs"]
    constant = all(c["reads"] == 1 and c["writes"] <= 2 for c in turn_costs)
    overhead = figures["overhead"]
    overhead_ratio = overhead["ratio"]  # the median of the runs' ratios
    paced = figures["overhead_paced"]
    paced_ratio = paced["ratio"]
    first = figures["first_token"]
    ack = figures["webhook_ack"]
    colds = {
        name: {key: statistics.median(run[key] for run in runs) for key in runs[0]}
        for name, runs in figures["cold_start_s"].items()
    }
    context_p95 = max(p["context_p95_ms"] for p in dynalite["points"])
    lines = [
        "# Benchmark: the performance goals against a full run",
        "",
        "Written by `uv run python -m infra.benchmark` (a full run) from `benchmark.json`; plots in",
        "`benchmark-store-growth.png` and `benchmark-latency.png`. How each figure is measured, what was",
        "changed because of one and what is not ours: docs/decisions/0012-performance.md. Local servers on",
        "one machine: moto's DynamoDB server, dynalite, the Bedrock emulator, the Twilio emulator.",
        "",
        "| figure | goal | measured | |",
        "|---|---|---|---|",
        "| DynamoDB requests per turn | 1 read + ≤ 2 writes, constant | "
        + ", ".join(f"{c['history']:,}: {c['reads']}R + {c['writes']}W, {c['items_read']} items" for c in turn_costs)
        + f" | {_verdict(constant)} |",
        f"| store cost, 10,000 vs 20 messages (dynalite) | ≤ 1.1× | {growth_ratio:.2f}× "
        f"({ours[0]:.1f} → {ours[-1]:.1f} ms); the peer fails beyond {dynalite['peer_limit']:,} messages | "
        f"{_verdict(growth_ratio <= 1.1)} |",
        f"| per-turn overhead outside the model (moto server, a fresh table each run, an instant model) | "
        f"≤ 1.25× the bare calls | "
        f"{overhead_ratio:.2f}×, median of {overhead['runs']} runs of {overhead['samples']} turns "
        f"(runs {overhead['ratio_min']:.2f}–{overhead['ratio_max']:.2f}×; "
        f"{overhead['overhead_p50_ms']:.1f} vs {overhead['bare_p50_ms']:.1f} ms, "
        f"{overhead['overhead_p50_ms'] - overhead['bare_p50_ms']:.1f} ms more than the bare calls) | "
        f"{_verdict(overhead_ratio <= 1.25)} |",
        f"| the same, the model pausing {figures['paced_delta_s'] * 1000:g} ms before each chunk | "
        f"(≤ 1.25×) | {paced_ratio:.2f}× (runs {paced['ratio_min']:.2f}–{paced['ratio_max']:.2f}×; "
        f"{paced['overhead_p50_ms']:.1f} vs {paced['bare_p50_ms']:.1f} ms) | |",
    ]
    for name, goal in (("ApiFunction", 1.0), ("SmsWorkerFunction", 1.0), ("SmsWebhookFunction", 0.35)):
        cold = colds[name]
        lines.append(
            f"| cold start, {name} (median, a fresh stack) | ≤ {goal} s | {cold['seconds']:.2f} s "
            f"(init {cold['init_seconds']:.2f}, first call {cold['first_call_seconds']:.2f}, of which "
            f"{cold['first_call_server_seconds']:.2f} waiting on the local servers) | "
            f"{_verdict(cold['seconds'] <= goal)} |"
        )
    sizes = figures.get("deployment_sizes")
    if isinstance(sizes, list):
        for size in sizes:
            total = size["own_bytes"] + sum(size["layer_bytes"].values())
            lines.append(
                f"| deployment size, {size['function']} | ≤ 120 MB | {total / MB:.1f} MB "
                f"| {_verdict(total <= 120 * MB)} |"
            )
    else:
        lines.append(f"| deployment size | ≤ 120 MB | {sizes} | |")
    lines += [
        f"| first token to the client | ≤ emulator's + 30 ms | +{first['added_p50_ms']:.1f} ms median, "
        f"+{first['added_max_ms']:.1f} ms max | {_verdict(first['added_max_ms'] <= 30)} |",
        f"| webhook acknowledgement, {ack['posts']:,} warm posts | p99 ≤ 300 ms | p99 {ack['p99_ms']:.1f} ms "
        f"(p50 {ack['p50_ms']:.1f}, max {ack['max_ms']:.1f}) | {_verdict(ack['p99_ms'] <= 300)} |",
        f"| of which outside the servers (ours, Powertools, botocore) | | p99 {ack['outside_servers_p99_ms']:.1f} ms "
        f"(p50 {ack['outside_servers_p50_ms']:.1f}); waiting on moto's server p99 {ack['server_p99_ms']:.1f} ms "
        f"(p50 {ack['server_p50_ms']:.1f}) | |",
        f"| context retrieval (dynalite) | p95 ≤ 20 ms | worst p95 {context_p95:.1f} ms over all history lengths | "
        f"{_verdict(context_p95 <= 20)} |",
        f"| context retrieval, seed 002's success metric (dynalite) | p95 < 200 ms | worst p95 {context_p95:.1f} ms | "
        f"{_verdict(context_p95 < 200)} |",
        f"| context retrieval (moto server) | (p95 ≤ 20 ms) | worst p95 "
        f"{max(p['context_p95_ms'] for p in moto['points']):.1f} ms: moto walks its table on every Query | |",
        "",
        *_priming_rows(figures["priming"]),
        "",
        "## Store cost per turn against LangChain's DynamoDBChatMessageHistory",
        *_growth_rows(dynalite),
        *_growth_rows(moto),
        "",
        "![store growth](benchmark-store-growth.png)",
        "",
        "![latency](benchmark-latency.png)",
        "",
    ]
    return "\n".join(lines)


def write_report(out: Path) -> None:
    figures = json.loads((out / "benchmark.json").read_text(encoding="utf-8"))
    (out / "benchmark.md").write_text(render(figures), encoding="utf-8")


if __name__ == "__main__":
    write_report(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
