"""The memory fidelity evaluation's quick run, as CI runs it: the whole onboarding through the real
local stack (app, SMS, a reset and an idle gap), every needed fact in every prompt, within budget;
the window-only baseline misses facts on the same script."""

import re
from pathlib import Path

import pytest

from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


@pytest.mark.slow
def test_the_quick_fidelity_run_keeps_every_needed_fact_within_the_budget(tmp_path: Path) -> None:
    """The README's quick run (about 40 s, so in the slow tier). Its smaller copy in the default run:
    unit/test_memory_flow.py, the same script's onboarding in process, each step's facts checked."""
    # The README's line as written, in a sandbox folder: the report lands in its .local/.
    completed = run_line(readme_line("uv run python -m infra.fidelity --quick"), sandbox(tmp_path), timeout_s=600)
    out_dir = tmp_path / ".local"
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    ours = re.search(r"\| needed facts in the prompt \| (\d+) / (\d+) \(100\.0 %\) \| (\d+) / \d+", out)
    assert ours is not None, out[-2000:]
    assert int(ours[2]) >= 30  # facts were actually needed and checked
    assert int(ours[3]) < int(ours[2])  # the window-only baseline loses some on the same script
    assert "| turns over the budget | 0 |" in out
    # The threading design's success metrics, each with its goal and verdict.
    efficiency = re.search(r"\| token efficiency: .* \| < 40 % \| mean (\d+) \([\d.]+ %\), p95 (\d+) .* \| met \|", out)
    assert efficiency is not None, out[-2000:]
    assert 0 < int(efficiency[1]) <= int(efficiency[2])
    assert re.search(r"\| conversation continuity: .* \| (\d+) / \1 \(100\.0 %\) \| met \|", out)
    sms = re.search(r"\| turns \(model called / all; by SMS\) \| \d+ / \d+; (\d+) \|", out)
    assert sms is not None
    assert int(sms[1]) >= 3
    png = re.search(r"Plot and per-turn data: (\S+\.png)", out)
    assert png is not None
    assert tmp_path / png[1] == out_dir / "fidelity.png"
    assert (tmp_path / png[1]).read_bytes().startswith(b"\x89PNG")
    # the results only on stdout (the log lines in a file there), progress on stderr.
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "fidelity.json",
        "fidelity.log",
        "fidelity.md",
        "fidelity.png",
    ]
    assert not [line for line in out.splitlines() if line.startswith("{")]
    assert '"level":"INFO"' in (out_dir / "fidelity.log").read_text(encoding="utf-8")
    assert re.search(r"^fidelity \[#+\] 100% (\d+)/\1 turns", completed.stderr, re.MULTILINE)


def test_reports_go_to_dot_local_unless_told_otherwise() -> None:
    """Never to the tracked docs/ unless asked (`--out docs`)."""
    from infra.bench import fidelity
    from infra.bench.benchmark import __main__ as benchmark

    assert fidelity.parser().parse_args([]).out == Path(".local")
    assert benchmark.parser().parse_args(["--quick"]).out == Path(".local")
    assert benchmark.parser().parse_args([]).out == Path(".local")
