"""The benchmark's PNG plots and its figures as JSON, written where the caller says (--out:
.local/ unless told otherwise; docs/ for the committed figures)."""

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from infra.bench.benchmark.stats import percentile
from infra.bench.benchmark.store_growth import Growth
from infra.bench.benchmark.webhook_ack import WebhookAck


def write_store_growth_plot(growths: list[Growth], path: Path) -> None:
    """Per server: milliseconds and bytes read per turn against history length, both stores."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, len(growths), figsize=(6 * len(growths), 8), squeeze=False)
    for column, growth in enumerate(growths):
        histories = [point.history for point in growth.points]
        for row, (label, attribute) in enumerate(
            (("ms per turn (median)", "p50_ms"), ("bytes read per turn", "bytes_read"))
        ):
            axis = axes[row][column]
            ours = [getattr(point.ours, attribute) for point in growth.points]
            peer = [
                (point.history, getattr(point.peer, attribute)) for point in growth.points if point.peer.failure is None
            ]
            axis.plot(histories, ours, marker="o", label="ours (Query newest N + 2 PutItem)")
            if peer:
                axis.plot(*zip(*peer, strict=True), marker="s", label="LangChain DynamoDBChatMessageHistory")
            axis.axvline(
                growth.peer_limit,
                color="tab:red",
                linestyle="--",
                label=f"peer fails beyond {growth.peer_limit:,} messages (400 KB item)",
            )
            axis.set_xscale("log")
            axis.set_yscale("log")
            axis.set_xlabel("messages in the user's history")
            axis.set_ylabel(label)
            axis.set_title(f"{growth.server}: {label}")
            axis.grid(True, which="both", alpha=0.3)
            axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_latency_plot(ack: WebhookAck, colds: dict[str, list[float]], path: Path) -> None:
    """The webhook's acknowledgement times in the order posted, and each function's cold starts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    # In the order posted: on moto each new number's transaction copies the table, so the time grows
    # with the table; a distribution would hide that. The part outside the servers is ours.
    posts = range(1, len(ack.timings_ms) + 1)
    left.scatter(posts, ack.timings_ms, s=4, label="acknowledgement")
    left.scatter(posts, ack.outside_servers_ms, s=4, color="tab:green", label="of which outside the servers")
    p99 = percentile(ack.timings_ms, 99)
    left.axhline(300, color="tab:red", linestyle="--", label="goal: p99 <= 300 ms")
    left.axhline(p99, color="grey", linestyle=":", label=f"p99 {p99:.0f} ms")
    left.set_yscale("log")
    left.set_xlabel("post number (each from a new phone number)")
    left.set_ylabel("ms")
    left.set_title(f"SMS webhook acknowledgement, {len(ack.timings_ms)} warm posts")
    left.legend(fontsize=8)
    left.grid(True, which="both", alpha=0.3)
    names = list(colds)
    right.boxplot([colds[name] for name in names], tick_labels=names)
    goals = {"ApiFunction": 1.0, "SmsWebhookFunction": 0.35, "SmsWorkerFunction": 1.0}
    for index, name in enumerate(names, start=1):
        right.hlines(goals[name], index - 0.4, index + 0.4, colors="tab:red", linestyles="--")
    right.set_ylabel("seconds")
    right.set_title("cold start: import + clients + first call (red: goal)")
    right.grid(True, axis="y", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def write_figures(figures: dict[str, Any], path: Path) -> None:
    def plain(value: Any) -> Any:
        if hasattr(value, "__dataclass_fields__"):
            return asdict(value)
        raise TypeError(f"cannot write {type(value).__name__} as JSON")

    path.write_text(json.dumps(figures, indent=2, default=plain) + "\n", encoding="utf-8")
