"""The memory benchmark's report: memory-benchmark.md (the tables and how they were measured) and
memory-benchmark.png (recall by category and mean prompt tokens, ours beside the baselines)."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

from infra.memory_benchmark.replay import BASELINES

GOALS: tuple[tuple[str, Callable[[dict[str, Any]], bool]], ...] = (
    ("evidence recall ≥ 95 %", lambda f: f["ours_recall"] >= 0.95 * f["answerable"]),
    ("current value after every correction", lambda f: f["ours_updates_current"] == f["updates"]),
    ("0 prompts presenting a superseded value as current", lambda f: f["ours_superseded_as_current"] == 0),
    ("mean prompt tokens ≤ 30 % of the full history", lambda f: (f["ours_tokens_ratio"] or 1) <= 0.30),
)


def goal_rows(figures: dict[str, Any]) -> list[str]:
    return [
        "| goal | met |",
        "|---|---|",
        *(f"| {name} | {'met' if ok(figures) else 'missed'} |" for name, ok in GOALS),
    ]


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["ours", *BASELINES]
    categories = list(figures["by_category"])
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        shares = [100 * figures["by_category"][c][name] / figures["by_category"][c]["questions"] for c in categories]
        left.bar([x + i * width for x in range(len(categories))], shares, width, label=name)
    left.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(categories))], categories)
    left.set_ylabel("evidence in the prompt (%)")
    left.set_ylim(0, 105)
    left.legend(loc="lower left", fontsize=8)
    tokens = [figures["ours_mean_tokens"], *(figures[f"{b}_mean_tokens"] for b in BASELINES)]
    right.bar(["ours", *BASELINES, "full"], [*tokens, figures["full_history_mean_tokens"]])
    right.set_ylabel("mean prompt tokens")
    right.tick_params(axis="x", labelrotation=45)
    model = "real model" if figures.get("mode") == "aws" else "Bedrock emulator"
    figure.suptitle(f"Memory benchmark (LoCoMo layout, local stack, {model})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write(figures: dict[str, Any], table: list[str], out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plot(figures, out / "memory-benchmark.png")
    aws = figures.get("mode") == "aws"
    model = (
        f"the model at {figures.get('model_endpoint')} ({figures.get('coach_model')}), each answer judged by "
        f"{figures.get('judge_model')}"
        if aws
        else "the Bedrock emulator through langchain-aws"
    )
    (out / "memory-benchmark.md").write_text(
        f"# Memory benchmark (LoCoMo layout, {'real model, judged answers' if aws else 'offline'})\n\n"
        f"Measured with `{command}`: every conversation replayed through the local stack (the HTTP API\n"
        f"and the Twilio webhook, DynamoDB on moto's server, {model});\n"
        "at each question, what the model got is scored against three baselines built from the same\n"
        "transcript at the same point. "
        + (
            "A real model is not deterministic: this run is one sample, and the judge is a model too.\n\n"
            if aws
            else "The replay is deterministic (the same data gives the same counts),\n"
            "so one run is the figure; no timing is measured here.\n\n"
        )
        + "\n".join(table)
        + "\n\n"
        + "\n".join(goal_rows(figures))
        + "\n\n![Recall by category and prompt tokens](memory-benchmark.png)\n",
        encoding="utf-8",
    )
