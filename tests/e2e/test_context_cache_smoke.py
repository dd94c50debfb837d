"""The context-cache benchmark's quick run, as the README gives it: it times the three ways of
getting a context on dynalite and counts the stale contexts a per-instance cache would serve
(decision 0022 rests on these figures)."""

import re
from pathlib import Path

import pytest

from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e


def test_the_quick_context_cache_benchmark_times_and_counts_stale_contexts(tmp_path: Path) -> None:
    line = readme_line("uv run python -m infra.bench.benchmark.context_cache --quick")
    completed = run_line(line, sandbox(tmp_path), timeout_s=600)
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    timings = dict(re.findall(r"^\| (load_turn \(today\)|cache hit, [\w ,]+) \| ([\d.]+) \|", out, flags=re.MULTILINE))
    assert set(timings) == {"load_turn (today)", "cache hit, validated by a read", "cache hit, unvalidated"}
    assert float(timings["cache hit, unvalidated"]) < float(timings["load_turn (today)"])
    stale = {
        int(instances): int(count)
        for instances, count in re.findall(r"one function, (\d) warm instances?.* \| \d+ \| \d+ \| (\d+) \|", out)
    }
    assert stale[1] == 0  # one instance sees all its own writes
    assert stale[2] > 0  # another instance's writes are missed
    assert stale[4] > 0
    channels = re.search(r"the fidelity run's \d+ turns, (\d+) by SMS.* \| (\d+) \|$", out, flags=re.MULTILINE)
    assert channels is not None
    assert int(channels[1]) > 0  # some turns by SMS
    assert int(channels[2]) > 0  # and the app's instance missed them
    assert sorted(p.name for p in (tmp_path / ".local").iterdir()) == ["context-cache.json", "context-cache.md"]
