"""The memory benchmark's report: memory-benchmark.md (the goals, each dataset's tables, the recall
step's latency and cost, how the figures were measured) and memory-benchmark.png (evidence recall by
category, ours with and without recall beside the baselines and the ceiling, per dataset)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from infra.bench.memory_benchmark.figures import MEMORIES, TITLES, table
from infra.bench.memory_benchmark.judge import accuracy_rows
from infra.bench.memory_benchmark.recall_cost import CHECKED, cost_rows

RECALL_GOAL, TOKENS_GOAL, CATEGORY_FLOOR, LATENCY_GOAL_MS = 0.60, 0.15, 0.50, 40.0


def _share(f: Mapping[str, Any], memory: str = "ours") -> float:
    return f[memory]["recall"] / f["answerable"] if f["answerable"] else 0.0


def goal_rows(found: Mapping[str, Any]) -> list[str]:
    rows = ["| goal | measured | |", "|---|---|---|"]

    def add(goal: str, measured: str, met: bool) -> None:
        rows.append(f"| {goal} | {measured} | {'met' if met else '**missed**'} |")

    datasets = found["datasets"]
    if "LoCoMo" in datasets:
        f = datasets["LoCoMo"]
        add(
            "LoCoMo: evidence recall ≥ 60 % of the answerable questions",
            f"{100 * _share(f):.1f} %",
            _share(f) >= RECALL_GOAL,
        )
        ratio = f["ours"]["tokens_ratio"] or 1.0
        add(
            "LoCoMo: mean prompt ≤ 15 % of the full conversation's tokens", f"{100 * ratio:.1f} %", ratio <= TOKENS_GOAL
        )
        low = [f"{c} {100 * g['ours'] / g['questions']:.1f} %" for c, g in f["by_category"].items()
               if g["questions"] and g["ours"] / g["questions"] < CATEGORY_FLOOR]  # fmt: skip
        rows.append(f"| LoCoMo: every category below 50 % named | {', '.join(low) or 'none'} | |")
    if "synthetic" in datasets:
        f = datasets["synthetic"]
        add("synthetic: evidence recall 100 %", f"{100 * _share(f):.1f} %", f["ours"]["recall"] == f["answerable"])
        stale = f["ours_superseded_as_current"]
        add("synthetic: 0 superseded values presented as current", str(stale), stale == 0)
    added = found.get("turn_added_ms_p95")
    if added is not None:
        add("a turn's added p95 on the local stack ≤ 40 ms", f"{added} ms", added <= LATENCY_GOAL_MS)
    return rows


def plot(found: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = found["datasets"]
    figure, axes = plt.subplots(1, len(datasets), figsize=(7 * len(datasets), 4.8), squeeze=False)
    for axis, (name, f) in zip(axes[0], datasets.items(), strict=True):
        categories = list(f["by_category"])
        memories = [m for m in MEMORIES if m in f]
        width = 0.8 / len(memories)
        for i, memory in enumerate(memories):
            shares = [100 * f["by_category"][c][memory] / f["by_category"][c]["questions"] for c in categories]
            axis.bar([x + i * width for x in range(len(categories))], shares, width, label=TITLES[memory])
        axis.set_xticks([x + width * (len(memories) - 1) / 2 for x in range(len(categories))], categories, fontsize=8)
        axis.set_ylabel("evidence in the prompt (%)")
        axis.set_ylim(0, 105)
        axis.set_title(f"{name} ({f['answerable']} answerable questions)")
        axis.legend(loc="upper right", fontsize=7)
    figure.suptitle("Memory benchmark (LoCoMo protocol, local stack, offline lexical embedding)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _latency_rows(found: Mapping[str, Any]) -> list[str]:
    rows = [
        "| recall on the local stack | p50 | p95 |",
        "|---|---|---|",
        "| a turn's added latency: how long it waited for recall after its own table calls "
        f"({found.get('turns_measured', 0)} turns) "
        f"| {found.get('turn_added_ms_p50')} ms | {found.get('turn_added_ms_p95')} ms |",
        f"| the recall itself in those turns (one embedding and one index query, beside the table calls) "
        f"| {found.get('turn_recall_ms_p50')} ms | {found.get('turn_recall_ms_p95')} ms |",
    ]
    for name, f in found["datasets"].items():
        rows.append(
            f"| the recall of each {name} question (the same calls, the user's whole history indexed) "
            f"| {f.get('recall_ms_p50')} ms | {f.get('recall_ms_p95')} ms |"
        )
    return rows


def _cost(found: Mapping[str, Any]) -> list[str]:
    f = found["datasets"].get("LoCoMo") or next(iter(found["datasets"].values()))
    added = max(0.0, f["ours"]["mean_tokens"] - f["without-recall"]["mean_tokens"])
    return cost_rows(added, message_tokens=f.get("mean_message_tokens", 60.0))


def write(found: Mapping[str, Any], out: Path, command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    plot(found, out / "memory-benchmark.png")
    aws = found.get("mode") == "aws"
    lines = [
        f"# Memory benchmark (LoCoMo's protocol, {'real model, judged answers' if aws else 'offline'})",
        "",
        f"Measured with `{command}`. How each conversation goes in, how each question is asked and what",
        "is counted: [How it is measured](#how-it-is-measured), below.",
        "",
        "## Goals",
        "",
        *goal_rows(found),
        "",
    ]
    for name, f in found["datasets"].items():
        lines += [f"## {name}: {f['conversations']} conversations, {f['questions']} questions", "", *table(f), ""]
        if aws:
            lines += [*accuracy_rows({**found, "answer_accuracy": found["answer_accuracy"].get(name)}), ""]
    lines += [
        "## Latency of recall",
        "",
        *_latency_rows(found),
        "",
        f"## What recall costs per 1,000 turns (list prices checked {CHECKED}; "
        "infra/bench/memory_benchmark/recall_cost.py)",
        "",
        *_cost(found),
        "",
        "![Evidence recall by category](memory-benchmark.png)",
        "",
        ABOUT,
    ]
    (out / "memory-benchmark.md").write_text("\n".join(lines), encoding="utf-8")


ABOUT = """## How it is measured

**The protocol (LoCoMo's, faithfully).** Each conversation goes into a fresh local stack (the API,
DynamoDB on moto's server with its stream, the recall indexer fed by the stream, the S3 Vectors
stand-in, the Bedrock emulator). LoCoMo's conversations have both speakers: every turn is stored as
the conversation has it, speaker_a's as the client's messages and speaker_b's as the other party's
(not generated), an image turn with its caption (`[shares …]`, as LoCoMo's own evaluation shows
it), each session at its own date, and the summary folds as a turn's would. Our synthetic
conversations have the client's lines only; the coach answers them through the real turn path.
Each question is then asked against the memory as it stands after the last session, without being
stored (the product's preview of a turn, then the agent's answer with its tools on a copy of the
memory): once with recall, once with the `recall` flag off. The baselines and the ceiling are
built from the original transcript only, so no reply of our coach lends them our memory.

**What is counted.** Evidence recall: every evidence dialog's text is in what the model read, or,
failing that, the answer's words are (each `;`-part, whole words after LoCoMo's normalisation; how
many recalls came from the answer alone is said under each table). LoCoMo's own retrieval measure,
the share of evidence dialogs present, is beside it. Evidence ids are read tolerantly
(`D8:6; D9:17`, `D:11:26`, `D30:05`); any that name no dialog are listed. Ours counts only what
reached the model without the summary's help, in the headline and in every category. Mean prompt
tokens: the first request of each question (system prompt, window, question), beside the full
history's (every message and the question).

**Abstention on LoCoMo.** LoCoMo's adversarial questions mostly ask about the wrong speaker (what
one of them did, when the other did it), so the trap is often something really said, by the other
speaker. A memory that brings back the lines the question bears on brings the trap's words with
them: the ceiling, which holds everything, is the lowest of all on that row. The row says how
often the trap's words reached the model, not that the model was misled by them; only `--aws`'s
judged answers say that.

**Categories.** Named as LoCoMo's evaluation code treats its numbers: 1 multi-hop (scored as a
multi-part answer), 2 temporal, 3 open-domain (world knowledge with the conversation), 4
single-hop, 5 adversarial (nothing answers it: scored for no false evidence); its tables print
them as 4, 1, 2, 3, 5. Mem0's evaluation labels the same numbers otherwise (1 single-hop, 2
temporal, 3 multi-hop, 4 open-domain; as Mem0 numbers them), so a "single-hop" figure of Mem0's is
LoCoMo's multi-hop; each row above gives both. Our synthetic questions add 6, knowledge update.

**What the offline embedding can and cannot show.** The local Titan is a lexical embedding (hashed
words and word pairs over crude stems, infra/bedrock_emulator/embeddings.py): a recalled message
shares words with the question or with the message it answers. It cannot find "my knee hurts" for
"any injuries?", a date for "when", or anything said in other words; it is fooled by words that
recur everywhere (the speakers' names). So the offline recall is a lower bound on what Titan Text
Embeddings V2 would find, not an estimate of it; the index's search is exact here (an S3 Vectors
index is approximate, and may miss a near vector now and then). `--aws` runs the same protocol with
the real model and the real embedding model (the local index still), and judges each answer with
a second model call (Mem0's judge prompt: question, gold answer, answer; CORRECT or WRONG): it
measures what the figures here cannot, whether the model answers from what it was given. It costs
money: each question is two previews and two answers, roughly 2,000 LoCoMo questions × 2 ×
3,000-4,500 input tokens, about 15-20 million tokens, on the order of $20-30 at Claude Haiku 4.5's
list prices, plus the synthetic set's replay (roughly $10-20) and the judge's calls.
"""
