"""The memory fidelity evaluation's quick run, as CI runs it: the whole onboarding through the real
local stack (app, SMS, a reset and an idle gap), every needed fact in every prompt, within budget;
the window-only baseline misses facts on the same script."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


def test_the_quick_fidelity_run_keeps_every_needed_fact_within_the_budget(tmp_path: Path) -> None:
    completed = subprocess.run(  # noqa: S603 - our own interpreter and module
        [sys.executable, "-m", "infra.fidelity", "--quick", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    ours = re.search(r"\| needed facts in the prompt \| (\d+) / (\d+) \(100\.0 %\) \| (\d+) / \d+", out)
    assert ours is not None, out[-2000:]
    assert int(ours[2]) >= 30  # facts were actually needed and checked
    assert int(ours[3]) < int(ours[2])  # the window-only baseline loses some on the same script
    assert "| turns over the budget | 0 |" in out
    sms = re.search(r"\| turns \(model called / all; by SMS\) \| \d+ / \d+; (\d+) \|", out)
    assert sms is not None
    assert int(sms[1]) >= 3
    png = re.search(r"Plot and per-turn data: (\S+\.png)", out)
    assert png is not None
    assert Path(png[1]) == tmp_path / "fidelity.png"
    assert Path(png[1]).read_bytes().startswith(b"\x89PNG")
    # Issue 19, item 9: the results only on stdout (the log lines in a file there), progress on stderr.
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "fidelity.json",
        "fidelity.log",
        "fidelity.md",
        "fidelity.png",
    ]
    assert not [line for line in out.splitlines() if line.startswith("{")]
    assert '"level":"INFO"' in (tmp_path / "fidelity.log").read_text(encoding="utf-8")
    assert re.search(r"^fidelity \[#+\] 100% (\d+)/\1 turns", completed.stderr, re.MULTILINE)


def test_reports_go_to_dot_local_unless_told_otherwise() -> None:
    """Never to the tracked docs/ unless asked (`--out docs`)."""
    from infra import fidelity
    from infra.benchmark import __main__ as benchmark

    assert fidelity.parser().parse_args([]).out == Path(".local")
    assert benchmark.parser().parse_args(["--quick"]).out == Path(".local")
    assert benchmark.parser().parse_args([]).out == Path(".local")
