"""A LoCoMo-format memory benchmark, offline: our memory beside three baselines, in one run.

    uv run python -m infra.memory_benchmark             # 10 synthetic conversations of 300 turns
    uv run python -m infra.memory_benchmark --quick     # 1 short conversation (CI)
    uv run python -m infra.memory_benchmark --data locomo10.json   # any file in LoCoMo's layout
    uv run python -m infra.memory_benchmark --aws --quick   # real Bedrock, answers judged (costs money)

Each conversation is replayed through the local stack (infra.memory_benchmark.replay); at each
question, what the model got is scored: evidence recall, current values after corrections, prompt
tokens. Offline the model is the scripted coach, so no answer accuracy is claimed, and facts
carried only by the summary are reported apart (the emulator wrote that summary). With `--aws`
the model is real Bedrock (infra.memory_benchmark.aws) and each answer is also judged by a second
model call (infra.memory_benchmark.judge).
Writes memory-benchmark.md, .png, .json and .log to --out (default .local/); `--report JSON`
rewrites the report from a saved memory-benchmark.json.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from infra.local_data import local_folder
from infra.local_stack import LocalStack
from infra.memory_benchmark import report
from infra.memory_benchmark.aws import BedrockRecorder, has_credentials, model_endpoint
from infra.memory_benchmark.dataset import Conversation, DatasetError, load
from infra.memory_benchmark.judge import JUDGE_MODEL_ENV, LlmJudge, accuracy, accuracy_rows, judge_settings
from infra.memory_benchmark.replay import BASELINES, QuestionResult, Replayer
from infra.memory_benchmark.synthetic import conversations
from infra.terminal import Progress, logs_to
from onboarding.config import DEFAULT_MODEL_ID, Settings
from onboarding.llm.chat_model import build_chat_model

TOKEN_BUDGET = 12_000
GAP_S = 2


def _pct(hits: int, total: int) -> str:
    return f"{100 * hits / total:.1f} % ({hits}/{total})" if total else "–"


def figures(results: Sequence[QuestionResult]) -> dict[str, object]:
    answerable = [r for r in results if r.answerable]
    abstention = [r for r in results if not r.answerable]
    updates = [r for r in answerable if r.update]
    claimed = [r for r in answerable if r.ours.carrier != "summary"]
    ours_tokens = statistics.fmean(r.ours.tokens for r in results) if results else 0.0
    full_tokens = statistics.fmean(r.full_tokens for r in results) if results else 0.0
    out: dict[str, object] = {
        "questions": len(results),
        "answerable": len(answerable),
        "abstention_questions": len(results) - len(answerable),
        "ours_recall": sum(r.ours.recalled and r.ours.carrier != "summary" for r in answerable),
        "ours_recall_with_summary": sum(r.ours.recalled for r in answerable),
        "summary_only": len(answerable) - len(claimed),
        "updates": len(updates),
        "ours_updates_current": sum(r.ours.recalled and not r.ours.superseded_as_current for r in updates),
        "ours_superseded_as_current": sum(r.ours.superseded_as_current for r in results),
        "ours_abstention_clean": sum(not r.ours.false_evidence for r in abstention),
        "ours_mean_tokens": round(ours_tokens),
        "full_history_mean_tokens": round(full_tokens),
        "ours_tokens_ratio": round(ours_tokens / full_tokens, 3) if full_tokens else None,
    }
    for name in BASELINES:
        out[f"{name}_recall"] = sum(r.baselines[name].recalled for r in answerable)
        out[f"{name}_mean_tokens"] = (
            round(statistics.fmean(r.baselines[name].tokens for r in results)) if results else 0
        )
        out[f"{name}_holds_old_value"] = sum(r.baselines[name].holds_old_value for r in updates)
        out[f"{name}_abstention_clean"] = sum(not r.baselines[name].false_evidence for r in abstention)
    for key, values in (
        ("by_category", sorted({r.category for r in answerable})),
        ("by_carrier", sorted({r.ours.carrier or "missing" for r in answerable})),
    ):
        table = {}
        for value in values:
            group = [
                r for r in answerable if (r.category if key == "by_category" else r.ours.carrier or "missing") == value
            ]
            table[value] = {
                "questions": len(group),
                "ours": sum(r.ours.recalled for r in group),
                **{name: sum(r.baselines[name].recalled for r in group) for name in BASELINES},
            }
        out[key] = table
    return out


def table(f: dict[str, object]) -> list[str]:
    n, u = int(f["answerable"]), int(f["updates"])  # type: ignore[call-overload]
    a = int(f["abstention_questions"])  # type: ignore[call-overload]
    rows = [
        "| figure | ours | window-15 (seed) | full history cut to budget | LangChain window (20 messages) |",
        "|---|---|---|---|---|",
        f"| evidence recall (answerable: {n}) | {_pct(int(f['ours_recall']), n)} | "  # type: ignore[call-overload]
        + " | ".join(_pct(int(f[f"{b}_recall"]), n) for b in BASELINES)  # type: ignore[call-overload]
        + " |",
        f"| current value after a correction ({u}) | {_pct(int(f['ours_updates_current']), u)} | "  # type: ignore[call-overload]
        + " | ".join(f"old value in {int(f[f'{b}_holds_old_value'])} of {u}" for b in BASELINES)  # type: ignore[call-overload]
        + " |",
        f"| prompts presenting a superseded value as current | {f['ours_superseded_as_current']} | – | – | – |",
        f"| abstention: no false evidence ({a}: the trap value is not in what the model read) | "
        + " | ".join(_pct(int(f.get(f"{b}_abstention_clean", 0)), a) for b in ("ours", *BASELINES))  # type: ignore[call-overload]
        + " |",
        f"| mean prompt tokens | {f['ours_mean_tokens']} ({f['ours_tokens_ratio']} of the full history's "
        f"{f['full_history_mean_tokens']}) | " + " | ".join(str(f[f"{b}_mean_tokens"]) for b in BASELINES) + " |",
        "",
        "| by category | questions | ours | " + " | ".join(BASELINES) + " |",
        "|---|---|---|" + "---|" * len(BASELINES),
    ]
    for key in ("by_category", "by_carrier"):
        if key == "by_carrier":
            rows += [
                "",
                "| ours by carrier | questions | ours | " + " | ".join(BASELINES) + " |",
                "|---|---|---|---|---|---|",
            ]
        for name, g in f[key].items():  # type: ignore[attr-defined]
            rows.append(
                f"| {name} | {g['questions']} | {g['ours']} | " + " | ".join(str(g[b]) for b in BASELINES) + " |"
            )
    summary = (
        "written by the real model in this run"
        if f.get("mode") == "aws"
        else "not claimed: offline the emulator wrote it"
    )
    rows.append(
        f"\nFacts carried only by the summary ({summary}): {f['summary_only']}; "
        f"abstention questions (nothing answers them; scored offline only for false evidence): "
        f"{f['abstention_questions']}."
    )
    return [*rows, "", *accuracy_rows(f)]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m infra.memory_benchmark", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one short conversation (CI)")
    p.add_argument("--conversations", type=int, default=10)
    p.add_argument("--data", type=Path, help="a file in LoCoMo's layout instead of the synthetic conversations")
    p.add_argument(
        "--aws",
        action="store_true",
        help="the real model (Bedrock, with this shell's credentials and region; BEDROCK_MODEL_ID) and "
        "an LLM judge of its answers: costs money",
    )
    p.add_argument(
        "--judge-model",
        default=os.environ.get(JUDGE_MODEL_ENV) or DEFAULT_MODEL_ID,
        help=f"the judge's Bedrock model id with --aws (default: ${JUDGE_MODEL_ENV}, else {DEFAULT_MODEL_ID})",
    )
    p.add_argument("--report", type=Path, help="only rewrite the report from a memory-benchmark.json")
    p.add_argument("--out", type=Path, default=local_folder())
    p.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.aws and not has_credentials():
        print(
            "error: --aws needs AWS credentials for Bedrock (AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY) and a region (AWS_REGION); nothing was run.",
            file=sys.stderr,
        )
        return 2
    if args.report:
        found = json.loads(args.report.read_text(encoding="utf-8"))["figures"]
        report.write(found, table(found), args.out, found.get("command", "uv run python -m infra.memory_benchmark"))
        print("\n".join(table(found)))
        return 0
    try:
        chosen: list[Conversation] = (
            load(args.data)
            if args.data
            else conversations(1, 10, 0)
            if args.quick
            else conversations(args.conversations)
        )
    except DatasetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    os.environ.update({"CONVERSATION_GAP_S": str(GAP_S), "TOKEN_BUDGET": str(TOKEN_BUDGET), "RATE_LIMIT_MESSAGES": "0"})
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    turns = sum(c.client_turns + len(c.questions) for c in chosen)
    results: list[QuestionResult] = []
    # --aws: requests are recorded where they leave (the model is not ours to record), and the
    # judge is built, by the project's one model builder, once the first stack has set the table.
    recorder = BedrockRecorder() if args.aws else None
    judge: LlmJudge | None = None
    with logs_to(None if args.verbose else out / "memory-benchmark.log") as console:
        with Progress("memory benchmark", turns, "turns") as progress:
            for number, conversation in enumerate(chosen):
                # A stack (and table) per conversation: moto copies its whole table on every
                # transaction, so one table for all would slow each turn as the run goes on.
                with (
                    tempfile.TemporaryDirectory() as scratch,
                    LocalStack(data_file=Path(scratch) / "table.jsonl", api_port=0, real_model=args.aws) as stack,
                ):
                    if args.aws and judge is None:
                        judge = LlmJudge(build_chat_model(judge_settings(Settings.from_env(), args.judge_model)))
                    replayer = Replayer(stack, conversation, GAP_S + 0.2, number, recorder, judge)
                    results += replayer.run(TOKEN_BUDGET, progress)
        found = figures(results)
        if args.aws:
            found |= {
                "mode": "aws",
                "model_endpoint": model_endpoint(stack.region),
                "coach_model": Settings.from_env({**os.environ, "TABLE_NAME": stack.table_name}).model_id,
                "judge_model": args.judge_model,
                "answer_accuracy": accuracy(results),
            }
        found["command"] = "uv run python -m infra.memory_benchmark " + " ".join(
            argv if argv is not None else sys.argv[1:]
        )
        report.write(found, table(found), out, str(found["command"]).strip())
        (out / "memory-benchmark.json").write_text(
            json.dumps({"figures": found, "questions": [asdict(r) for r in results]}, indent=1), encoding="utf-8"
        )
        print("\n".join(table(found)), file=console)
        print(f"\nReport and plot: {out / 'memory-benchmark.md'}, {out / 'memory-benchmark.png'}", file=console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
