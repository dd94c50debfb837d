"""The benchmark's smoke version as the README runs it (slow: it builds the artifact and runs every
section; tests/e2e/test_benchmark_sections.py checks each section's figures): it completes, prints
every section, writes the report and plots, and keeps the log lines out of the output."""

import json
from pathlib import Path

import pytest

from infra.bench.benchmark.__main__ import SECTIONS
from tests.support.readme import readme_line, run_line, sandbox

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_the_quick_benchmark_runs_every_section_and_writes_its_report(tmp_path: Path) -> None:
    # The README's line as written, in a sandbox folder: the report lands in its .local/.
    completed = run_line(readme_line("uv run python -m infra.benchmark --quick"), sandbox(tmp_path), timeout_s=1800)
    out_dir = tmp_path / ".local"
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = completed.stdout
    for name in SECTIONS:
        assert f"## {name}" in out, name
    for name in ("benchmark-latency.png", "benchmark.json", "benchmark.md"):
        assert (out_dir / name).stat().st_size > 0, name
    figures = json.loads((out_dir / "benchmark.json").read_text(encoding="utf-8"))
    assert figures["quick"] is True
    assert list(figures["sections"]) == list(SECTIONS)
    assert all("load_before" in section and "load_after" in section for section in figures["sections"].values())
    assert len(figures["provenance"]["commit"]) == 12
    report = (out_dir / "benchmark.md").read_text(encoding="utf-8")
    judged = [line for line in report.splitlines() if line.endswith(("| met |", "| **missed** |"))]
    assert judged
    assert all("deployment size" in line for line in judged)  # a quick run judges the sizes alone
    assert f"Measured at commit `{figures['provenance']['commit']}`" in report
    # the figures alone on stdout, the log lines in a file, a progress line on stderr.
    assert not [line for line in out.splitlines() if line.startswith("{")]
    assert (out_dir / "benchmark.log").exists()
    assert f"benchmark [########################] 100% {len(SECTIONS)}/{len(SECTIONS)} sections" in completed.stderr
