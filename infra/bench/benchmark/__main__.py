"""`uv run python -m infra.benchmark [--quick] [--section NAME ...] [--out DIR] [-v]`: run the
benchmark's sections (infra/bench/benchmark/sections.py) against local stacks, print the figures, and
write the report, figures and plots to DIR (default .local/; `--out docs` regenerates the committed
ones) and the log lines to DIR/benchmark.log. Every figure carries the commit, the Python and the
machine's load it was measured with. See infra/bench/benchmark/__init__.py."""

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from infra.bench.benchmark.sections import SECTIONS, Workspace
from infra.local.data import local_folder
from infra.local.errors import run_tool
from infra.local.terminal import Progress, logs_to

ROOT = Path(__file__).parents[3]


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the smoke version: small sizes, few samples, no verdicts")
    parser.add_argument(
        "--section",
        action="append",
        choices=sorted(SECTIONS),
        metavar="NAME",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=local_folder(),
        help="where benchmark.md, benchmark.json, the PNG plots and benchmark.log go (default .local/; "
        "--out docs regenerates the committed figures)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print the log lines instead of writing them")
    return parser


def provenance() -> dict[str, Any]:
    """What a figure was measured on: the commit (and whether the tree had changes), the Python, the machine."""

    def git(*args: str) -> str:
        completed = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)  # noqa: S603, S607
        return completed.stdout.strip()

    return {
        "commit": git("rev-parse", "--short=12", "HEAD") or "unknown",
        "uncommitted_changes": bool(git("status", "--porcelain", "--untracked-files=no")),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "when": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    log_file = None if args.verbose else args.out / "benchmark.log"
    names = args.section or list(SECTIONS)
    if not args.quick and "store growth" in names:
        from infra.bench.benchmark.dynalite import require_node

        # Said before anything runs, not after half an hour: the full run compares on dynalite.
        require_node("the full benchmark compares the stores on dynalite")
    with logs_to(log_file) as console:
        with Progress("benchmark", len(names), "sections") as progress:
            code = run(args, names, console, progress)
        if log_file is not None:
            print(f"Log lines: {log_file} (-v prints them instead)", file=console)
    return code


def run(args: argparse.Namespace, names: list[str], console: TextIO, progress: Progress) -> int:
    """The sections in turn; the figures on `console`, the files in `args.out`."""
    figures: dict[str, Any] = {"provenance": provenance(), "quick": args.quick, "load": {}}
    kept: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="benchmark-") as scratch:
        work = Workspace(args.quick, Path(scratch))
        for name in names:
            progress.note = name
            before = os.getloadavg()[0]
            started = time.monotonic()
            outcome = SECTIONS[name](work)
            figures["load"][name] = {"load_before": before, "load_after": os.getloadavg()[0],
                                     "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
            print("\n".join(["", *outcome.lines]), file=console, flush=True)
            kept |= outcome.figures
            progress.advance()
    figures |= {key: value for key, value in kept.items() if not key.startswith("_")}
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    from infra.bench.benchmark.plots import write_figures

    write_figures(figures, out / "benchmark.json")
    if set(names) == set(SECTIONS):
        from infra.bench.benchmark.plots import write_latency_plot, write_store_growth_plot
        from infra.bench.benchmark.report import write_report

        write_store_growth_plot(kept["store_growth"], out / "benchmark-store-growth.png")
        cold = {name: [run["seconds"] for run in runs] for name, runs in kept["cold_start_s"].items()}
        write_latency_plot(kept["_ack"], cold, out / "benchmark-latency.png")
        write_report(out)
        print(f"\nWrote benchmark.md, benchmark.json and the PNG plots to {out}/", file=console)
    else:
        print(f"\nWrote benchmark.json to {out}/ (the report needs every section)", file=console)
    return 0


if __name__ == "__main__":
    sys.exit(run_tool(main))
