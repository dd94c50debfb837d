"""The benchmark's report: each section's goals as table rows (what the console prints too), the
sections' own tables, and benchmark.md, benchmark.json and the two plots written from them. A
quick run judges nothing but the deployment sizes: its samples are too few to judge a time by."""

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Row = tuple[str, str, str, bool | None]  # figure, goal, measured, met (None: not judged)


@dataclass
class Outcome:
    """A section's goals, its own part of the report (markdown lines), and its figures."""

    rows: list[Row] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)


PRIMING_HEAD = [
    "",
    "A fresh python3.13 process per run on the `sam build` artifact: init, then (primed) the function's",
    "before-checkpoint and after-restore hooks as Lambda runs them around a snapshot, then the first call",
    "on a fresh event. Its own work is its time less its wait on the local servers (botocore's",
    "`before-send` to `before-parse` of each request, and each request to Twilio's stand-in); median of",
    "the runs, the smallest and largest in brackets.",
    "",
    "| function | first call's own work, unprimed | primed | waiting on the servers, unprimed / primed "
    "| before-checkpoint hook | after-restore hook |",
    "|---|---:|---:|---:|---:|---:|",
]


def quantile(values: list[float], percent: int) -> float:
    return values[0] if len(values) == 1 else statistics.quantiles(values, n=100, method="inclusive")[percent - 1]


def rows_table(rows: list[Row]) -> list[str]:
    verdicts = {True: "met", False: "**missed**", None: ""}
    lines = ["| figure | goal | measured | |", "|---|---|---|---|"]
    return lines + [f"| {figure} | {goal} | {measured} | {verdicts[met]} |" for figure, goal, measured, met in rows]


def history_outcome(measured: dict[str, Any], judged: bool) -> Outcome:
    lengths = [length for length in measured["lengths"] if not length["backlog"]]
    backlog = next(length for length in measured["lengths"] if length["backlog"])
    first, last = lengths[0], lengths[-1]
    turn, store = last["turn_ms"] / first["turn_ms"], last["store_ms"] / first["store_ms"]
    context = max(length["context_p95_ms"] for length in lengths)
    longer = f"{last['history']:,} of the user's own messages against {first['history']}"
    each = [f"{n['history']:,}: {n['reads']:g}R + {n['writes']:g}W, {n['items_read']} items" for n in lengths]
    constant = all(n["reads"] == 1 and n["writes"] <= 2 for n in lengths)
    rows: list[Row] = [("DynamoDB requests per turn", "1 read + ≤ 2 writes, constant", ", ".join(each), constant)]
    times = f"{turn:.2f}× ({first['turn_ms']:.1f} → {last['turn_ms']:.1f} ms)"
    rows.append((f"a turn (reply and fold) with {longer}, summary caught up", "≤ 1.2×", times, turn <= 1.2))
    times = f"{store:.2f}× ({first['store_ms']:.1f} → {last['store_ms']:.1f} ms)"
    rows.append((f"the store's time in that turn, {longer}", "≤ 1.1×", times, store <= 1.1))
    folds, fewer = f"{backlog['folds']} of {backlog['turns']}", backlog["folds"] < backlog["turns"]
    figure = f"a backlog of {backlog['history']:,} messages: turns followed by a fold (a model call)"
    rows.append((figure, "not every turn", folds, fewer))
    worst = f"worst p95 {context:.1f} ms"
    rows.append(("context retrieval (load + build)", "p95 ≤ 20 ms", worst, context <= 20))
    rows.append(("context retrieval, the threading design's goal", "p95 < 200 ms", worst, context < 200))
    detail = [
        "",
        f"Medians of {first['turns']} turns at each length, on moto's server with the flat-cost layer. The backlog",
        "user has as many messages and no summary. LangChain's store at such lengths: docs/cost.md.",
        "",
        "| history | turn ms (p95) | reply ms | fold ms | store ms | bytes read | context p50 / p95 ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in [*lengths, backlog]:
        fold = "—" if n["fold_ms"] is None else f"{n['fold_ms']:.1f}"
        detail.append(
            f"| {n['history']:,}{' (backlog)' if n['backlog'] else ''} | {n['turn_ms']:.1f} ({n['turn_p95_ms']:.1f}) "
            f"| {n['reply_ms']:.1f} | {fold} | {n['store_ms']:.1f} | {n['bytes_read']:,.0f} "
            f"| {n['context_p50_ms']:.1f} / {n['context_p95_ms']:.1f} |"
        )
    return Outcome([(*row[:3], row[3] if judged else None) for row in rows], detail, {"history": measured})


def overhead_outcome(summary: dict[str, Any], label: str, judged: bool, paced: bool) -> Outcome:
    ratio = summary["ratio"]
    measured = (
        f"{ratio:.2f}×, median of {summary['runs']} runs of {summary['samples']} pairs (runs "
        f"{summary['ratio_min']:.2f}–{summary['ratio_max']:.2f}×; {summary['turn_p50_ms']:.1f} vs "
        f"{summary['bare_p50_ms']:.1f} ms; our CPU per turn {summary['cpu_per_turn_ms']:.1f} ms)"
    )
    figure = f"a turn against a bare path doing the same library work, {label}, recall off on both"
    rows: list[Row] = [(figure, "(≤ 1.25×)" if paced else "≤ 1.25×", measured, None if paced else ratio <= 1.25)]
    if not paced:
        added = (
            f"+{summary['recall_added_p50_ms']:.1f} ms p50, +{summary['recall_added_p95_ms']:.1f} ms p95 "
            f"({summary['recall_on_p50_ms']:.1f} against {summary['recall_off_p50_ms']:.1f} ms; the index answered "
            f"{summary['recalled']} of {summary['recall_turns']} recalls)"
        )
        met = summary["recall_added_p95_ms"] <= 40 and summary["recalled"] == summary["recall_turns"]
        rows.append(("recall's added latency: the same turns with recall on and off", "p95 ≤ 40 ms", added, met))
    judged_rows = [(*row[:3], row[3] if judged else None) for row in rows]
    return Outcome(judged_rows, figures={"overhead_paced" if paced else "overhead": summary})


def webhook_outcome(timings: dict[str, list[float]], posts: int, judged: bool) -> Outcome:
    ms, server = timings["ms"], timings["server_ms"]
    ours = [total - waited for total, waited in zip(ms, server, strict=True)]
    p99 = quantile(ms, 99)
    measured = f"p99 {p99:.1f} ms (p50 {quantile(ms, 50):.1f}, max {max(ms):.1f})"
    outside = f"p99 {quantile(ours, 99):.1f} ms (p50 {quantile(ours, 50):.1f}); waiting on the servers p99 "
    rows: list[Row] = [
        (f"webhook acknowledgement, {posts:,} warm posts", "p99 ≤ 300 ms", measured, p99 <= 300 if judged else None),
        (
            "of which outside the servers (ours, Powertools, botocore)",
            "",
            f"{outside}{quantile(server, 99):.1f} ms",
            None,
        ),
    ]
    return Outcome(rows, figures={"webhook_ack": timings})


def write(figures: dict[str, Any], out: Path) -> None:
    """benchmark.json, benchmark.md and the plots of what the run measured."""
    (out / "benchmark.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    sections, source = figures["sections"], figures["provenance"]
    dirty = " with uncommitted changes" if source["uncommitted_changes"] else ""
    quick = " (a `--quick` run: small sizes, few samples, no verdicts but the sizes')" if figures["quick"] else ""
    lines = [
        "# Benchmark: the performance goals against a full run",
        "",
        f"Measured at commit `{source['commit']}`{dirty}, {source['when']}{quick}: Python {source['python']} (the",
        f"functions: Python 3.13 on the `sam build` artifacts), {source['cpus']} CPUs, load average",
        f"{source['load_before']:.2f} at the start and {source['load_after']:.2f} at the end (each section's in",
        f"`benchmark.json`). Written by `uv run python -m infra.benchmark --out docs` in {source['minutes']} minutes;",
        "how each figure is measured, what was changed because of one and what is not ours:",
        "docs/decisions/0012-performance.md and 0016. Local servers on one machine: moto's DynamoDB server",
        "(with the flat-cost layer, decision 0004), the Bedrock emulator, the Twilio and S3 Vectors stand-ins.",
        "",
        *rows_table([row for section in sections.values() for row in section["rows"]]),
    ]
    for name, section in sections.items():
        lines += [f"\n## {name[0].upper()}{name[1:]}", *section["detail"]] if section["detail"] else []
    lines += ["", *(f"![{name}]({name})" for name in _plots(sections, out)), ""]
    (out / "benchmark.md").write_text("\n".join(lines), encoding="utf-8")


def _plots(sections: dict[str, Any], out: Path) -> list[str]:
    """benchmark-latency.png: the webhook's posts in order, and the cold starts (when both ran)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    ack = sections.get("webhook acknowledgement", {}).get("figures", {}).get("webhook_ack")
    if ack and (colds := sections.get("cold starts", {}).get("figures", {}).get("cold_start_s")):
        figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
        # In the order posted: on moto a table that grows shows as a trend; a distribution would hide it.
        posts, ours = range(1, len(ack["ms"]) + 1), [t - s for t, s in zip(ack["ms"], ack["server_ms"], strict=True)]
        left.scatter(posts, ack["ms"], s=4, label="acknowledgement")
        left.scatter(posts, ours, s=4, color="tab:green", label="of which outside the servers")
        left.axhline(300, color="tab:red", linestyle="--", label="goal: p99 <= 300 ms")
        left.set(yscale="log", xlabel="post number (each from a new phone number)", ylabel="ms", title="SMS webhook")
        left.legend(fontsize=8)
        right.boxplot([[run["seconds"] for run in runs] for runs in colds.values()], tick_labels=list(colds))
        right.set(ylabel="seconds", title="cold start: process start to first answer (goals: 1.0, 0.35, 1.0 s)")
        written.append(_save(plt, figure, out / "benchmark-latency.png"))
    return written


def _save(plt: Any, figure: Any, path: Path) -> str:
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path.name
