"""The fidelity run's report: its figures, the table and the plot (docs/fidelity.md, .png, .json)."""

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from infra.bench.benchmark.stats import percentile
from infra.bench.fidelity_script import FACTS, GAP_S, TOKEN_BUDGET, TurnRecord


def summarize(records: Sequence[TurnRecord]) -> dict[str, Any]:
    scored = [r for r in records if r.model_called]
    needed = sum(len(r.needed) for r in scored)
    return {
        "turns": len(records),
        "turns_with_model": len(scored),
        "sms_turns": sum(1 for r in records if r.channel == "sms"),
        "fact_checks": needed,
        "ours_present": sum(len(r.present) for r in scored),
        "baseline_present": sum(len(r.baseline_present) for r in scored),
        "ours_turns_complete": sum(1 for r in scored if len(r.present) == len(r.needed)),
        "baseline_turns_complete": sum(1 for r in scored if len(r.baseline_present) == len(r.needed)),
        "max_prompt_tokens": max((r.prompt_tokens for r in scored), default=0),
        "mean_prompt_tokens": round(sum(r.prompt_tokens for r in scored) / max(1, len(scored))),
        "p95_prompt_tokens": round(percentile([r.prompt_tokens for r in scored], 95)) if scored else 0,
        "turns_over_budget": sum(1 for r in scored if r.prompt_tokens > TOKEN_BUDGET),
        "budget": TOKEN_BUDGET,
    }


def write_report(records: Sequence[TurnRecord], figures: dict[str, Any], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    scored = [r for r in records if r.model_called]
    x = [r.number for r in scored]
    share = [100 * len(r.present) / len(r.needed) if r.needed else 100 for r in scored]
    base = [100 * len(r.baseline_present) / len(r.needed) if r.needed else 100 for r in scored]
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
    top.plot(x, share, label="ours: summary + profile + agent_context + window", color="tab:green")
    top.plot(x, base, label="baseline: the seed's 15-message window", color="tab:red", alpha=0.8)
    top.set_ylabel("needed facts in the prompt (%)")
    top.set_ylim(-5, 105)
    top.legend(loc="lower left")
    bottom.plot(x, [r.prompt_tokens for r in scored], label="ours: prompt tokens", color="tab:green")
    bottom.plot(x, [r.baseline_tokens for r in scored], label="baseline: prompt tokens", color="tab:red", alpha=0.8)
    bottom.axhline(TOKEN_BUDGET, color="black", linestyle="--", label=f"budget ({TOKEN_BUDGET})")
    bottom.set_ylabel("estimated tokens")
    bottom.set_xlabel("turn")
    bottom.legend(loc="upper left")
    figure.suptitle("Memory fidelity over a scripted onboarding (local stack, Bedrock emulator)")
    figure.tight_layout()
    figure.savefig(out / "fidelity.png", dpi=110)
    plt.close(figure)
    (out / "fidelity.md").write_text(
        "# Memory fidelity evaluation\n\n"
        "Written by `uv run python -m infra.fidelity` (see its docstring for the method). A scripted client\n"
        "goes through the whole onboarding on the local stack (HTTP API, Twilio webhook and queue worker,\n"
        "moto's DynamoDB server, the Bedrock emulator through langchain-aws): it states facts early, answers\n"
        'the coach with small talk in between, says "start over" once, moves to SMS and back, and pauses\n'
        f"past the idle gap ({GAP_S} s in this run) once. For every turn, the prompt the model received is\n"
        "checked for every fact the current step needs; the baseline is the seed's window-only memory (the\n"
        "step prompt with nothing known, the last 15 messages, the message) on the same stored conversation.\n"
        "Tokens are this project's estimate (docs/decisions/0011-memory-beyond-the-window.md).\n\n"
        + "\n".join(table_rows(figures))
        + "\n\nFacts tracked (value, and the steps whose prompts need it):\n\n"
        + "\n".join(f'- {f.name}: "{f.value}" — {", ".join(sorted(f.needed_by))}' for f in FACTS)
        + "\n\n![needed facts in the prompt, and prompt size, per turn](fidelity.png)\n"
    )
    (out / "fidelity.json").write_text(
        json.dumps({"figures": figures, "turns": [r.__dict__ for r in records]}, indent=1, ensure_ascii=False)
    )


def table_rows(figures: dict[str, Any]) -> list[str]:
    checks = figures["fact_checks"] or 1
    ours, base, turns = figures["ours_present"], figures["baseline_present"], figures["turns_with_model"]
    return [
        "| figure | ours | baseline (15-message window) |",
        "|---|---|---|",
        f"| turns (model called / all; by SMS) | {turns} / {figures['turns']}; {figures['sms_turns']} | same script |",
        f"| needed facts in the prompt | {ours} / {checks} ({100 * ours / checks:.1f} %) "
        f"| {base} / {checks} ({100 * base / checks:.1f} %) |",
        f"| turns whose prompt held every needed fact | {figures['ours_turns_complete']} / {turns} "
        f"| {figures['baseline_turns_complete']} / {turns} |",
        f"| prompt tokens, mean / max (budget {figures['budget']}) "
        f"| {figures['mean_prompt_tokens']} / {figures['max_prompt_tokens']} | |",
        f"| turns over the budget | {figures['turns_over_budget']} | |",
        "",
        "The threading design's success metrics (its goals; context retrieval p95 is in docs/benchmark.md):",
        "",
        "| metric | goal | measured | |",
        "|---|---|---|---|",
        *_success_rows(figures),
    ]


def _success_rows(figures: dict[str, Any]) -> list[str]:
    budget, turns = figures["budget"], figures["turns_with_model"] or 1
    mean, p95 = figures["mean_prompt_tokens"], figures["p95_prompt_tokens"]
    continuity = figures["ours_turns_complete"] / turns
    return [
        f"| token efficiency: prompt tokens against the budget ({budget}) | < 40 % | "
        f"mean {mean} ({100 * mean / budget:.1f} %), p95 {p95} ({100 * p95 / budget:.1f} %) "
        f"| {'met' if p95 < 0.4 * budget else '**missed**'} |",
        f"| conversation continuity: turns whose prompt held every fact the turn needs | every turn | "
        f"{figures['ours_turns_complete']} / {figures['turns_with_model']} ({100 * continuity:.1f} %) "
        f"| {'met' if continuity == 1 else '**missed**'} |",
    ]
