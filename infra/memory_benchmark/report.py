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


ABOUT = """**Abstention, offline.** A question nothing in the conversation answers (LoCoMo's category 5)
carries a trap: LoCoMo's `adversarial_answer`, or in our data a plausible value the client never
says (a cat's name, a marathon). Offline it is scored for *no false evidence*: the trap is nowhere
in what the model read (saved answers, profile, summary, window, tool results; for a baseline, its
window). In our data the trap is never said, so this checks that no memory makes one up or brings
one in from elsewhere; it cannot check that the model then says "you never told me". On LoCoMo's
own file the adversarial answer is usually something the other speaker said, so there a memory
that keeps that message fails the row by design: the distractor reached the model.

**Answer accuracy (`--aws`).** Offline, no answer accuracy is claimed: the coach is the emulator's
script. `--aws` replays the same conversations with the real model (Bedrock with the shell's
credentials and `AWS_REGION`; the coach's model is `BEDROCK_MODEL_ID`), DynamoDB staying the local
one, and at each question also judges the coach's answer with a second model call, the way
LoCoMo results are usually judged (Mem0's evaluation: question, gold answer, generated answer,
a CORRECT/WRONG label; an abstention is CORRECT only when the coach says it was not told). The
judge is `--judge-model` (default `JUDGE_MODEL_ID`, else the project's default model) at
temperature 0; a verdict that names no label, or a judge call that fails after its retries,
counts as wrong and is counted apart. A judge of the
same family as the coach may favour its answers; a real model's run is one sample. Our synthetic
client answers in the order the local coach asks; a real model that asks in another order may
save an answer under another question, and the evidence figures then show it. The test suite
runs this path against the emulator, whose judge is a deterministic test double (key words of the
gold answer in the answer): it checks the plumbing, not any model.

**Cost of `--aws`** (an estimate, not a measured bill): each client turn is one or more model
requests of about 2,000-3,000 tokens (the offline mean prompt above, tool rounds repeat it), so the
full run (3,140 turns and 140 judged questions) is roughly 10 million input tokens: on the order of
$10-20 at Claude Haiku 4.5's list prices (docs/cost.md's table); `--quick` (88 turns) stays under $1.
"""


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
        + "\n\n![Recall by category and prompt tokens](memory-benchmark.png)\n\n"
        + ABOUT,
        encoding="utf-8",
    )
