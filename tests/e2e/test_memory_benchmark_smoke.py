"""The memory benchmark's quick run, as CI runs it: one conversation in LoCoMo's layout
replayed through the local stack; every answerable question's evidence reaches the model, no prompt
presents a superseded value as current, and a window-only memory (the baseline) loses some on the same run."""

import json
import os
import re
from pathlib import Path

import pytest

from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_the_quick_memory_benchmark_recalls_the_evidence_and_never_a_stale_value(tmp_path: Path) -> None:
    """The README's quick run (about 50 s, so in the slow tier). Its smaller copy in the default run:
    integration/test_memory_benchmark_protocol.py (a conversation in LoCoMo's layout replayed on the
    local stack, its questions asked with and without recall and scored beside the baselines)."""
    completed = run_line(
        readme_line("uv run python -m infra.memory_benchmark --quick"), sandbox(tmp_path), timeout_s=600
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    assert "| synthetic: 0 superseded values presented as current | 0 | met |" in completed.stdout
    saved = json.loads((tmp_path / ".local" / "memory-benchmark.json").read_text(encoding="utf-8"))
    figures = saved["figures"]["datasets"]["synthetic"]
    assert figures["answerable"] >= 10
    assert figures["ours"]["strict"] == figures["answerable"]
    assert figures["ours_updates_current"] == figures["updates"] == 4
    assert figures["window-15"]["strict"] < figures["answerable"]
    assert figures["all-history"]["strict"] == figures["answerable"]
    assert figures["added_ms_p95"]["ours"] is not None  # recall's added latency, with less without
    out_dir = tmp_path / ".local"
    assert sorted(p.name for p in out_dir.iterdir()) == [
        "memory-benchmark.json",
        "memory-benchmark.log",
        "memory-benchmark.md",
        "memory-benchmark.png",
    ]
    assert (out_dir / "memory-benchmark.png").read_bytes().startswith(b"\x89PNG")
    assert re.search(r"^memory benchmark \[#+\] 100% (\d+)/\1 turns", completed.stderr, re.MULTILINE)


@pytest.mark.slow
def test_the_full_run_keeps_the_synthetic_goals_and_reads_locomo_whole_when_given(tmp_path: Path) -> None:
    """The run at full length: 3 synthetic conversations of 300 turns (about 5 minutes on the 2-CPU
    machine, so in the slow tier; the quick run above is its copy). MEMORY_BENCHMARK_CONVERSATIONS=10
    is the published run's size (about 17 minutes); with LOCOMO_DATA, LoCoMo's conversations too."""
    data = os.environ.get("LOCOMO_DATA")  # LoCoMo's licence keeps it out of the repository
    count = int(os.environ.get("MEMORY_BENCHMARK_CONVERSATIONS", "3"))
    line = "uv run python -m infra.memory_benchmark" + (f" --data {data} --synthetic" if data else "")
    line += f" --conversations {count}"
    # What is measured is what reaches the prompt, not how fast: a recall cut off by a busy CI
    # machine's timeout (RECALL_TIMEOUT_S, 1 s) would count as forgotten.
    completed = run_line(line, sandbox(tmp_path), timeout_s=5400, RECALL_TIMEOUT_S="10")
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    saved = json.loads((tmp_path / ".local" / "memory-benchmark.json").read_text(encoding="utf-8"))
    synthetic = saved["figures"]["datasets"]["synthetic"]
    assert synthetic["conversations"] == count
    # Every answer reaches the model (each evidence line, or failing that the answer's words), and no
    # superseded value is shown as current. Strict recall (every evidence line verbatim) is not at
    # 100 %: a correction's answer is in the saved answers, its line not always recalled
    # (docs/memory-benchmark.md); the floor sits just under this size's figure.
    assert synthetic["ours"]["loose"] == synthetic["answerable"]
    assert synthetic["ours"]["strict"] >= 0.94 * synthetic["answerable"]  # 36 of 36 at 3 conversations
    assert synthetic["ours_superseded_as_current"] == 0
    if data:
        locomo = saved["figures"]["datasets"]["LoCoMo"]
        assert locomo["conversations"] == count
        assert locomo["all-history"]["strict"] >= 0.95 * locomo["answerable"]  # the ceiling: what the data allows
        assert locomo["unparsed_evidence"]  # LoCoMo's own malformed ids are reported, not dropped
        # Hybrid recall's strict figure at the published size (74.1 % at 10): a floor just under it.
        assert locomo["ours"]["strict"] >= 0.73 * locomo["answerable"]
