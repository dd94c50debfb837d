"""The memory benchmark's quick run, as CI runs it (issue 18): one conversation in LoCoMo's layout
replayed through the local stack; every answerable question's evidence reaches the model, no prompt
presents a superseded value as current, and the seed's window loses some on the same run."""

import json
import re
from pathlib import Path

import pytest

from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e


def test_the_quick_memory_benchmark_recalls_the_evidence_and_never_a_stale_value(tmp_path: Path) -> None:
    completed = run_line(
        readme_line("uv run python -m infra.memory_benchmark --quick"), sandbox(tmp_path), timeout_s=600
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    assert "| prompts presenting a superseded value as current | 0 |" in out
    figures = json.loads((tmp_path / ".local" / "memory-benchmark.json").read_text(encoding="utf-8"))["figures"]
    assert figures["answerable"] >= 10
    assert figures["ours_recall_with_summary"] == figures["answerable"]
    assert figures["ours_updates_current"] == figures["updates"] == 4
    assert figures["window-15_recall"] < figures["answerable"]
    out_dir = tmp_path / ".local"
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "memory-benchmark.json",
        "memory-benchmark.log",
        "memory-benchmark.md",
        "memory-benchmark.png",
    ]
    assert (out_dir / "memory-benchmark.png").read_bytes().startswith(b"\x89PNG")
    assert re.search(r"^memory benchmark \[#+\] 100% (\d+)/\1 turns", completed.stderr, re.MULTILINE)
