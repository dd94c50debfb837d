"""A LoCoMo-protocol memory benchmark, offline: our memory with hybrid, lexical-only and dense-only
recall and without it, beside baselines at our prompt's budget and the whole history, in one run.

    uv run python -m infra.memory_benchmark                     # 10 synthetic conversations of 300 turns
    uv run python -m infra.memory_benchmark --quick             # 1 short conversation (CI)
    uv run python -m infra.memory_benchmark --data locomo10.zip --synthetic   # LoCoMo's, and ours
    uv run python -m infra.memory_benchmark --aws --quick       # real Bedrock, answers judged (costs money)

`--data` takes a file in LoCoMo's layout (`locomo10.json`, or the repository's `data/locomo10.zip`;
you supply it, nothing is downloaded); `--conversations N` takes the first N of each dataset.
Each conversation goes into the local stack's memory as it happened and each question is asked
against that memory without being stored (infra.bench.memory_benchmark.replay); the figures are in
docs/memory-benchmark.md. Writes memory-benchmark.md, .png, .json and .log to --out (default
.local/); `--report JSON` rewrites the report from a saved memory-benchmark.json.
"""

import argparse
import json
import os
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any

from infra.bench.memory_benchmark import report
from infra.bench.memory_benchmark.dataset import Conversation, DatasetError, load
from infra.bench.memory_benchmark.judge import (
    JUDGE_MODEL_ENV,
    BedrockRecorder,
    LlmJudge,
    accuracy,
    has_credentials,
    judge_settings,
    model_endpoint,
)
from infra.bench.memory_benchmark.replay import QuestionResult, Replayer
from infra.bench.memory_benchmark.report import figures
from infra.bench.memory_benchmark.synthetic import conversations
from infra.local.data import local_folder
from infra.local.stack import LocalStack
from infra.local.terminal import Progress, logs_to
from onboarding.config import DEFAULT_MODEL_ID, Settings
from onboarding.llm.bedrock import build_chat_model
from onboarding.memory.tokens import count_tokens

TOKEN_BUDGET = 12_000
GAP_S = 2
# The replay's settings: sessions (and the synthetic replay's pauses) apart by more than the gap,
# no rate limit, messages that never expire (LoCoMo's are dated 2023).
ENVIRONMENT = {
    "CONVERSATION_GAP_S": str(GAP_S),
    "TOKEN_BUDGET": str(TOKEN_BUDGET),
    "RATE_LIMIT_MESSAGES": "0",
    "MESSAGE_TTL_DAYS": "0",
}


# One client replays months of conversation in minutes: the WAF's per-client rate rule (a load
# test's case, infra/local/stack.py) would refuse it.
ONE_CLIENT = {"WafRateLimiting": "Disabled"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m infra.memory_benchmark", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one short synthetic conversation (with --data: its first)")
    p.add_argument("--conversations", type=int, default=10, help="the first N conversations of each dataset")
    p.add_argument("--data", type=Path, help="LoCoMo's data (locomo10.json, locomo10.zip or a folder of them)")
    p.add_argument("--synthetic", action="store_true", help="with --data: the synthetic set too, in the same run")
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


def datasets(args: argparse.Namespace) -> dict[str, list[Conversation]]:
    """The conversations to run, by dataset; DatasetError for a file not in LoCoMo's layout."""
    count = 1 if args.quick else args.conversations
    if count < 1:
        raise DatasetError("--conversations must be at least 1")
    chosen: dict[str, list[Conversation]] = {}
    if args.data:
        chosen["LoCoMo"] = load(args.data)[:count]
    if not args.data or args.synthetic:
        chosen["synthetic"] = conversations(1, 10, 0) if args.quick else conversations(count)
    return chosen


def run(chosen: dict[str, list[Conversation]], args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Every conversation replayed on a stack of its own; the figures by dataset."""
    results: dict[str, list[QuestionResult]] = {name: [] for name in chosen}
    work = sum(
        (c.dialogs if c.has_other_party else c.client_turns) + len(c.questions) for cs in chosen.values() for c in cs
    )
    recorder = BedrockRecorder() if args.aws else None
    judge: LlmJudge | None = None
    region = ""
    with Progress("memory benchmark", work, "turns") as progress:
        for name, conversations_ in chosen.items():
            for number, conversation in enumerate(conversations_):
                # A stack (and table) per conversation: each starts from an empty memory and index.
                with (
                    tempfile.TemporaryDirectory() as scratch,
                    LocalStack(
                        data_file=Path(scratch) / "table.jsonl", api_port=0, real_model=args.aws, parameters=ONE_CLIENT
                    ) as stack,
                ):
                    region = stack.region
                    if args.aws and judge is None:
                        judge = LlmJudge(build_chat_model(judge_settings(Settings.from_env(), args.judge_model)))
                    replayer = Replayer(stack, conversation, name, GAP_S + 0.2, number, recorder, judge)
                    results[name] += replayer.run(progress)
    found: dict[str, Any] = {"datasets": {name: figures(found) for name, found in results.items()}}
    for name, conversations_ in chosen.items():  # what a message costs to embed, on average
        said = [count_tokens(d.content) for c in conversations_ for s in c.sessions for d in s.dialogs]
        found["datasets"][name]["mean_message_tokens"] = round(sum(said) / len(said), 1) if said else 0.0
    found["added_ms_p95"] = max((f["added_ms_p95"]["ours"] or 0.0) for f in found["datasets"].values())
    if args.aws:
        found |= {
            "mode": "aws",
            "model_endpoint": model_endpoint(region),
            "coach_model": Settings.from_env().model_id,
            "judge_model": args.judge_model,
            "answer_accuracy": {name: accuracy(found_) for name, found_ in results.items()},
        }
    (out / "memory-benchmark.json").write_text(
        json.dumps(
            {"figures": found, "questions": {n: [asdict(r) for r in rs] for n, rs in results.items()}}, indent=1
        ),
        encoding="utf-8",
    )
    return found


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.aws and not has_credentials():
        print(
            "error: --aws needs AWS credentials for Bedrock (AWS_PROFILE, or AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY) and a region (AWS_REGION); nothing was run.",
            file=sys.stderr,
        )
        return 2
    out: Path = args.out
    if args.report:
        found = json.loads(args.report.read_text(encoding="utf-8"))["figures"]
        report.write(found, out, found.get("command", "uv run python -m infra.memory_benchmark"))
        return 0
    try:
        chosen = datasets(args)
    except DatasetError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    os.environ.update(ENVIRONMENT)
    out.mkdir(parents=True, exist_ok=True)
    with logs_to(None if args.verbose else out / "memory-benchmark.log") as console:
        command = "uv run python -m infra.memory_benchmark " + " ".join(argv if argv is not None else sys.argv[1:])
        found = run(chosen, args, out)
        found["command"] = command.strip()
        report.write(found, out, found["command"])
        saved = json.loads((out / "memory-benchmark.json").read_text(encoding="utf-8"))
        (out / "memory-benchmark.json").write_text(json.dumps(saved | {"figures": found}, indent=1), encoding="utf-8")
        print((out / "memory-benchmark.md").read_text(encoding="utf-8"), file=console)
        print(f"\nReport and plot: {out / 'memory-benchmark.md'}, {out / 'memory-benchmark.png'}", file=console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
