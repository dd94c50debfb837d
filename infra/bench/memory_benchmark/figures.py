"""Owns the benchmark's figures for one dataset, from its scored questions, and their tables.

Every count of "ours" (the headline and each category alike) is of what reached the model without
the summary's help: offline the emulator wrote the summary, so what only it carried is counted
apart (`summary_only`), never claimed.
"""

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from infra.bench.memory_benchmark.baselines import BASELINES, CEILING
from infra.bench.memory_benchmark.dataset import CATEGORIES, MEM0_LABELS
from infra.bench.memory_benchmark.replay import QuestionResult
from infra.bench.memory_benchmark.scoring import Score

MEMORIES = ("ours", "without-recall", *BASELINES, CEILING)
TITLES = {
    "ours": "ours, with recall",
    "without-recall": "ours, recall off",
    "window-15": "window-15 (seed)",
    "full-cut": "full history cut to budget",
    "langchain-window": "LangChain window (20 messages)",
    CEILING: "all of the history (ceiling)",
}


def claimed(score: Score) -> bool:
    return score.recalled and score.carrier != "summary"


def scores(result: QuestionResult) -> dict[str, Score]:
    found = {"ours": result.ours, "without-recall": result.without_recall, **result.baselines}
    if result.ceiling is not None:
        found[CEILING] = result.ceiling
    return found


def _recalled(name: str, score: Score) -> bool:
    return claimed(score) if name in ("ours", "without-recall") else score.recalled


def percentile(values: Sequence[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)


def figures(results: Sequence[QuestionResult]) -> dict[str, Any]:
    answerable = [r for r in results if r.answerable]
    abstention = [r for r in results if not r.answerable]
    updates = [r for r in answerable if r.update]
    full = statistics.fmean(r.full_tokens for r in results) if results else 0.0
    out: dict[str, Any] = {
        "conversations": len({r.sample_id for r in results}),
        "questions": len(results),
        "answerable": len(answerable),
        "abstention_questions": len(abstention),
        "summary_only": sum(r.ours.recalled and r.ours.carrier == "summary" for r in answerable),
        "ours_answer_only": sum(claimed(r.ours) and r.ours.via == "answer" for r in answerable),
        "updates": len(updates),
        "ours_updates_current": sum(claimed(r.ours) and not r.ours.superseded_as_current for r in updates),
        "ours_superseded_as_current": sum(r.ours.superseded_as_current for r in results),
        "full_history_mean_tokens": round(full),
        "unparsed_evidence": sorted({f"{r.sample_id}: {e}" for r in results for e in r.unparsed_evidence}),
        "recall_ms_p50": percentile([r.recall_ms for r in results if r.recall_ms is not None], 0.5),
        "recall_ms_p95": percentile([r.recall_ms for r in results if r.recall_ms is not None], 0.95),
        "mean_recalled": round(statistics.fmean(r.recalled for r in results), 1) if results else 0,
    }
    for name in MEMORIES:
        picked = [scores(r)[name] for r in results if name in scores(r)]
        if not picked:
            continue
        mean_tokens = statistics.fmean(s.tokens for s in picked)
        out[name] = {
            "recall": sum(_recalled(name, scores(r)[name]) for r in answerable),
            "evidence_share": round(statistics.fmean(scores(r)[name].evidence_share for r in answerable), 3)
            if answerable
            else 0.0,
            "mean_tokens": round(mean_tokens),
            "tokens_ratio": round(mean_tokens / full, 3) if full else None,
            "abstention_clean": sum(not scores(r)[name].false_evidence for r in abstention),
            "holds_old_value": sum(scores(r)[name].holds_old_value for r in updates),
        }
    by_category: dict[str, dict[str, int]] = {}
    for category in sorted({r.category for r in answerable}, key=_category_order):
        group = [r for r in answerable if r.category == category]
        by_category[category] = {
            "questions": len(group),
            **{name: sum(_recalled(name, scores(r)[name]) for r in group) for name in MEMORIES if name in out},
        }
    out["by_category"] = by_category
    carriers = sorted({r.ours.carrier or "missing" for r in answerable})
    out["by_carrier"] = {c: sum((r.ours.carrier or "missing") == c for r in answerable) for c in carriers}
    return out


def _category_order(name: str) -> int:
    numbers = {label: number for number, label in CATEGORIES.items()}
    return [4, 1, 2, 3, 5, 6].index(numbers[name]) if name in numbers else 99  # LoCoMo's own order


def _ratio(ratio: float | None) -> str:
    return f"{100 * ratio:.1f} %" if ratio is not None else "–"


def _pct(hits: int, total: int) -> str:
    return f"{100 * hits / total:.1f} % ({hits}/{total})" if total else "–"


def table(f: Mapping[str, Any]) -> list[str]:
    """The dataset's tables, as Markdown lines."""
    names = [name for name in MEMORIES if name in f]
    n, a, u = f["answerable"], f["abstention_questions"], f["updates"]
    rows = [
        "| figure | " + " | ".join(TITLES[name] for name in names) + " |",
        "|---|" + "---|" * len(names),
        f"| evidence recall ({n} answerable) | " + " | ".join(_pct(f[m]["recall"], n) for m in names) + " |",
        "| LoCoMo's retrieval recall (share of evidence dialogs present) | "
        + " | ".join(f"{f[m]['evidence_share']:.3f}" for m in names)
        + " |",
        "| mean prompt tokens (% of the full conversation's) | "
        + " | ".join(f"{f[m]['mean_tokens']} ({_ratio(f[m]['tokens_ratio'])})" for m in names)
        + " |",
    ]
    if u:
        rows.append(
            f"| current value after a correction ({u}) | {_pct(f['ours_updates_current'], u)} | "
            + " | ".join(f"old value in {f[m]['holds_old_value']} of {u}" for m in names[1:])
            + " |"
        )
    if a:
        rows.append(
            f"| abstention: no false evidence ({a}) | "
            + " | ".join(_pct(f[m]["abstention_clean"], a) for m in names)
            + " |"
        )
    rows += [
        "",
        "| by category (LoCoMo's number; Mem0's label for it) | questions | "
        + " | ".join(TITLES[name] for name in names)
        + " |",
        "|---|---|" + "---|" * len(names),
    ]
    numbers = {label: number for number, label in CATEGORIES.items()}
    for category, group in f["by_category"].items():
        number = numbers.get(category)
        label = f"{category} ({number}; Mem0: {MEM0_LABELS.get(number or 0, '–')})" if number else category
        total = group["questions"]
        rows.append(f"| {label} | {total} | " + " | ".join(_pct(group[m], total) for m in names) + " |")
    rows += [
        "",
        f"Ours, with recall: {f['ours_answer_only']} of its recalls found the answer's words but not every "
        f"evidence dialog; {f['summary_only']} questions had their evidence only with the summary's help (not "
        f"counted: offline the emulator wrote the summary); where the rest was found: "
        + ", ".join(f"{c} {k}" for c, k in f["by_carrier"].items())
        + ".",
    ]
    if f["unparsed_evidence"]:
        rows.append(
            f"Evidence entries that name no dialog ({len(f['unparsed_evidence'])}, reported, not scored): "
            + "; ".join(f"`{e}`" for e in f["unparsed_evidence"])
            + "."
        )
    return rows
