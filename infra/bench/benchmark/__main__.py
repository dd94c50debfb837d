"""`uv run python -m infra.benchmark [--quick] [--section NAME ...] [--out DIR] [-v]`: run the
benchmark's sections against local servers, print each goal's figure and verdict, and write
benchmark.md, benchmark.json and the plots to DIR (default .local/; `--out docs` regenerates the
committed ones) and the log lines to DIR/benchmark.log. Every run names the commit, the Python,
the CPUs and the machine's load it was measured with. See infra/bench/benchmark/__init__.py."""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from infra.bench.benchmark import report
from infra.bench.benchmark.report import Outcome
from infra.local.data import local_folder
from infra.local.errors import run_tool
from infra.local.stack import temporary_environment
from infra.local.terminal import Progress, logs_to

ROOT = Path(__file__).parents[3]
FUNCTIONS = ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction", "CheckInFunction"]
MODEL_FUNCTIONS = ["ApiFunction", "SmsWorkerFunction"]
# CheckInFunction: a firing is asynchronous (nobody waits on it), so its goal is the model functions'.
COLD_START_GOALS_S = {"ApiFunction": 1.0, "SmsWorkerFunction": 1.0, "SmsWebhookFunction": 0.35, "CheckInFunction": 1.0}
PACED_DELTA_S = 0.005  # a fast model's cadence: a chunk of a few tokens at a few hundred tokens a second


@dataclass
class Workspace:
    """What sections share within one run: the quick or full scale, and the built artifact."""

    quick: bool
    scratch: Path
    _build: Path | None = None

    def artifacts(self) -> Path:
        """`sam build` (x86_64) of the current tree, made once per run."""
        from infra.bench.benchmark.processes import build_artifacts

        self._build = self._build or build_artifacts(self.scratch / "x86_64")
        return self._build

    def pick(self, quick: Any, full: Any) -> Any:
        return quick if self.quick else full


def cold_starts(work: Workspace) -> Outcome:
    from infra.bench.benchmark.processes import cold_starts as measure
    from infra.local.stack import LocalStack

    samples = work.pick(2, 15)
    with LocalStack() as stack:
        runs = measure(stack, work.artifacts(), FUNCTIONS, samples)
    outcome = Outcome(figures={"cold_start_s": runs})
    for name, phases in runs.items():
        median = {key: statistics.median(run[key] for run in phases) for key in phases[0]}
        low, high = min(run["seconds"] for run in phases), max(run["seconds"] for run in phases)
        measured = (
            f"{median['seconds']:.3f} s ({low:.3f}–{high:.3f}; init {median['init_seconds']:.3f}, first call "
            f"{median['first_call_seconds']:.3f}; CPU {median['cpu_seconds']:.3f} s)"
        )
        goal, figure = COLD_START_GOALS_S[name], f"cold start, {name} (median of {samples} fresh processes)"
        outcome.rows.append((figure, f"≤ {goal} s", measured, None if work.quick else median["seconds"] <= goal))
    return outcome


def priming(work: Workspace) -> Outcome:
    from infra.bench.benchmark.processes import priming as measure
    from infra.local.stack import LocalStack

    samples = work.pick(1, 7)
    with LocalStack() as stack:
        gains = measure(stack, work.artifacts(), MODEL_FUNCTIONS, samples)

    def spread(figure: list[float]) -> str:
        return f"{figure[0]:.1f} ms ({figure[1]:.1f}–{figure[2]:.1f})"

    outcome = Outcome(detail=list(report.PRIMING_HEAD), figures={"priming": gains})
    for gain in gains:
        name, primed = gain["function"], spread(gain["primed_own"])
        waits = f"{gain['unprimed_server'][0]:.1f} / {gain['primed_server'][0]:.1f} ms"
        hooks = f"{spread(gain['prime_hook'])} | {spread(gain['restore_hook'])}"
        outcome.detail.append(
            f"| {name} ({samples} runs each) | {spread(gain['unprimed_own'])} | {primed} | {waits} | {hooks} |"
        )
        outcome.rows.append((f"first call after a SnapStart restore, primed, {name} (its own work)", "", primed, None))
    return outcome


def warm_check_in(work: Workspace) -> Outcome:
    from infra.bench.benchmark.processes import warm_calls
    from infra.local.stack import LocalStack

    processes, calls = work.pick(1, 3), work.pick(3, 10)
    with LocalStack() as stack:
        runs = warm_calls(stack, work.artifacts(), "CheckInFunction", processes, calls)
    seconds = [run["seconds"] * 1000 for run in runs]
    waits = statistics.median(run["server_seconds"] * 1000 for run in runs)
    measured = (
        f"{statistics.median(seconds):.1f} ms ({min(seconds):.1f}–{max(seconds):.1f}; waiting on the servers "
        f"{waits:.1f}; {calls} calls after the first in each of {processes} fresh processes)"
    )
    figure = "a check-in, warm: CheckInFunction's firing by SMS (the model and Twilio stand-ins answering)"
    return Outcome([(figure, "", measured, None)], figures={"warm_check_in": runs})


def deployment_sizes(work: Workspace) -> Outcome:
    from infra.bench.benchmark.processes import ArtifactsUnavailableError, build_artifacts, deployment_sizes

    try:
        sizes = deployment_sizes(build_artifacts(work.scratch / "arm64", arm64=True))
    except ArtifactsUnavailableError as missing:
        return Outcome([("deployment size", "≤ 120 MB", f"skipped: {missing}", None)])
    outcome = Outcome(figures={"deployment_sizes": sizes})
    for size in sizes:  # judged in a quick run too: a build is a build
        parts = ", ".join(f"{layer} {n / 1e6:.1f}" for layer, n in size["layers"].items())
        measured, met = f"{size['total'] / 1e6:.1f} MB (own {size['own'] / 1e6:.1f}; {parts})", size["total"] <= 120e6
        outcome.rows.append((f"deployment size, {size['function']} (arm64, unzipped)", "≤ 120 MB", measured, met))
    return outcome


def long_time_user(work: Workspace) -> Outcome:
    from infra.bench.benchmark.history import measure_history

    histories = work.pick([20, 200], [20, 2_000, 20_000])
    measured = measure_history(histories, work.pick(500, 2_000), work.pick(1, 5), work.pick(2, 5))
    return report.history_outcome(measured, judged=not work.quick)


def _overhead(work: Workspace, delta_s: float, label: str) -> Outcome:
    from infra.bench.benchmark.overhead import measure_runs, summarize

    summary = summarize(measure_runs(work.pick(1, 5), work.pick(3, 30), delta_s))
    return report.overhead_outcome(summary, label, judged=not work.quick, paced=delta_s > 0)


def overhead_instant(work: Workspace) -> Outcome:
    return _overhead(work, 0.0, "an instant model")


def overhead_paced(work: Workspace) -> Outcome:
    return _overhead(work, PACED_DELTA_S, f"a model pausing {PACED_DELTA_S * 1000:g} ms a chunk")


def first_token(work: Workspace) -> Outcome:
    from infra.bench.benchmark.latency import first_token as measure
    from infra.local.stack import LocalStack

    # One user sends every turn, more than the rate limit lets through a minute: it is off here.
    with temporary_environment({"RATE_LIMIT_MESSAGES": "0"}), LocalStack(api_port=0) as stack:
        first = measure(stack, work.pick(5, 50))
    measured = f"+{first['added_p50_ms']:.1f} ms median, +{first['added_max_ms']:.1f} ms max ({first['samples']} turns)"
    row = (
        "first token to the client",
        "≤ emulator's + 30 ms",
        measured,
        None if work.quick else first["added_max_ms"] <= 30,
    )
    return Outcome([row], figures={"first_token": first})


def webhook_acknowledgement(work: Workspace) -> Outcome:
    from infra.bench.benchmark.latency import webhook_acknowledgements
    from infra.local.iam.identity import acting_as
    from infra.local.stack import LocalStack

    posts = work.pick(20, 1_000)
    with LocalStack() as stack, acting_as("SmsWebhookFunction"):
        timings = webhook_acknowledgements(stack.twilio.sign, stack.webhook_url, posts)
    return report.webhook_outcome(timings, posts, judged=not work.quick)


SECTIONS: dict[str, Callable[[Workspace], Outcome]] = {
    "cold starts": cold_starts,
    "SnapStart priming": priming,
    "a check-in, warm": warm_check_in,
    "deployment sizes (sam build)": deployment_sizes,
    "a long-time user": long_time_user,
    "overhead and recall, instant model": overhead_instant,
    "overhead, paced model": overhead_paced,
    "first token over SSE": first_token,
    "webhook acknowledgement": webhook_acknowledgement,
}


BUILT = {
    "cold starts",
    "SnapStart priming",
    "a check-in, warm",
    "deployment sizes (sam build)",
}  # the sections that run `sam build`


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    quick = "the smoke version: small sizes, few samples, no verdicts but the sizes'"
    parser.add_argument("--quick", action="store_true", help=quick)
    names = f"run only this section (repeatable): {', '.join(SECTIONS)}"
    parser.add_argument("--section", action="append", choices=sorted(SECTIONS), metavar="NAME", help=names)
    out = "where benchmark.md, .json, the plots and benchmark.log go (default .local/; --out docs: the committed ones)"
    parser.add_argument("--out", type=Path, default=local_folder(), help=out)
    parser.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return parser


def provenance() -> dict[str, Any]:
    """What the figures were measured on: the commit (and whether the tree had changes), the Python, the machine."""

    def git(*args: str) -> str:
        completed = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603, S607
        return completed.stdout.strip()

    return {
        "commit": git("rev-parse", "--short=12", "HEAD") or "unknown",
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log_file = None if args.verbose else args.out / "benchmark.log"
    names = args.section or list(SECTIONS)
    if BUILT & set(names):  # said before anything runs, not after half an hour
        from infra.bench.benchmark.processes import ArtifactsUnavailableError, require_build_tools

        try:
            require_build_tools()
        except ArtifactsUnavailableError as missing:
            built = ", ".join(sorted(BUILT & set(names)))
            raise ArtifactsUnavailableError(f"{built}: {missing}; or leave them out with --section") from None
    with logs_to(log_file) as console:
        with Progress("benchmark", len(names), "sections") as progress:
            run(args, names, console, progress)
        if log_file is not None:
            print(f"Log lines: {log_file} (-v prints them instead)", file=console)
    return 0


def run(args: argparse.Namespace, names: list[str], console: TextIO, progress: Progress) -> None:
    """The sections in turn; the goals on `console`, the files in `args.out`."""
    figures: dict[str, Any] = {"provenance": provenance(), "quick": args.quick, "sections": {}}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="benchmark-") as scratch:
        work = Workspace(args.quick, Path(scratch))
        for name in names:
            progress.note, before, began = name, os.getloadavg()[0], time.monotonic()
            outcome = SECTIONS[name](work)
            shown = ["", f"## {name}", *report.rows_table(outcome.rows), *outcome.detail]
            print("\n".join(shown), file=console, flush=True)
            load = {"load_before": before, "load_after": os.getloadavg()[0]}
            figures["sections"][name] = vars(outcome) | load | {"seconds": round(time.monotonic() - began, 1)}
            progress.advance()
    figures["provenance"] |= {"load_after": os.getloadavg()[0], "minutes": round((time.monotonic() - started) / 60, 1)}
    args.out.mkdir(parents=True, exist_ok=True)
    report.write(figures, args.out)
    print(f"\nWrote benchmark.md, benchmark.json and the plots to {args.out}/", file=console)


if __name__ == "__main__":
    sys.exit(run_tool(main))
