"""The benchmark's smoke version, as CI runs it: it completes, prints every section, and the turn's
table traffic is what the design promises (1 read and at most 2 writes, whatever the history)."""

import os
import re
from pathlib import Path

import pytest

from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).parents[2]


def test_the_quick_benchmark_runs_and_a_turn_costs_one_read_and_two_writes(tmp_path: Path) -> None:
    # The README's line as written, in a sandbox folder: the report lands in its .local/.
    # Issue 29: --quick needs no Node.js. A `node` and an `npm` that fail stand first on PATH, so a
    # quick run that still started dynalite would fail here.
    fake_bin = tmp_path / "no-node"
    fake_bin.mkdir()
    for tool in ("node", "npm"):
        (fake_bin / tool).write_text('#!/bin/sh\necho "$0 was run" >&2\nexit 97\n')
        (fake_bin / tool).chmod(0o755)
    completed = run_line(
        readme_line("uv run python -m infra.benchmark --quick"),
        sandbox(tmp_path),
        timeout_s=600,
        PATH=f"{fake_bin}:{os.environ['PATH']}",
    )
    out_dir = tmp_path / ".local"
    assert completed.returncode == 0, completed.stderr[-3000:]
    out = completed.stdout
    rows = re.findall(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+[\d.]+\s+[\d.]+$", out, flags=re.MULTILINE)
    assert [int(row[0]) for row in rows] == [20, 200]
    for _, reads, writes, items_read, _ in rows:
        assert (int(reads), int(writes)) == (1, 2)
        assert int(items_read) <= 63  # the newest 60 messages and the profile, state and summary items
    ack = re.search(
        r"SMS webhook acknowledgement.*p50 ([\d.]+) ms, p99.*waiting on the servers p50 ([\d.]+) ms.*"
        r"the rest p50 ([\d.]+) ms",
        out,
    )
    assert ack is not None
    # Every post waits on DynamoDB, SQS and SSM, and no part can be longer than the whole.
    assert float(ack[1]) >= float(ack[2]) > 0
    assert float(ack[1]) >= float(ack[3]) > 0
    overheads = re.findall(
        r"overhead outside the model, (an instant model|a model pausing 5 ms a chunk), .* model ([\d.]+) ms, "
        r"overhead ([\d.]+) ms; bare DynamoDB calls ([\d.]+) ms; ratio ([\d.]+)x",
        out,
    )
    assert [label for label, *_ in overheads] == ["an instant model", "a model pausing 5 ms a chunk"]
    # No verdict from a quick run's few samples (it used to print "missed", which read as a failure).
    assert (
        len(
            re.findall(r"ratio [\d.]+x \(median of 2 runs, [\d.]+-[\d.]+x; goal <= 1.25x, not judged in --quick\)", out)
        )
        == 2
    )
    assert not re.search(r"\b(?:missed|met)\b", out)
    assert "Store cost on dynalite: skipped in --quick" in out
    assert "was run" not in completed.stderr
    for _, _, overhead, bare, _ in overheads:
        assert float(overhead) > 0
        assert float(bare) > 0
    assert float(overheads[1][1]) > float(overheads[0][1])  # the paced model's stream takes longer
    first = re.search(r"client ([\d.]+) ms after sending; ([\d.]+) ms after the model's first token", out)
    assert first is not None
    assert float(first[1]) >= float(first[2]) > 0  # the client cannot get the token before the model sends it
    for function in ("ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"):
        cold = re.search(
            rf"^{function}\s+[\d.]+ s .*; init [\d.]+ s, first call ([\d.]+) s \(of which waiting on the servers "
            r"([\d.]+) s\)$",
            out,
            flags=re.MULTILINE,
        )
        assert cold is not None, function
        assert float(cold[1]) >= float(cold[2])  # the wait is part of the first call
    for function in ("ApiFunction", "SmsWorkerFunction"):  # both sides measured, and both hooks ran
        assert re.search(
            rf"^{function}\s+unprimed [\d.]+ ms \([\d.]+-[\d.]+\), primed [\d.]+ ms .*before-checkpoint hook "
            r"[\d.]+ ms .*after-restore hook [\d.]+ ms",
            out,
            flags=re.MULTILINE,
        ), function
    for server in ("moto server",):
        section = out.split(f"Store cost per turn vs history, {server}")[1].split("\n\n")[0]
        growth = re.findall(
            r"^\s+(\d+) \|\s+[\d.]+\s+(\d+)\s+(\d+)\s+\d+ \|\s+[\d.]+\s+\d+\s+(\d+)", section, re.MULTILINE
        )
        assert [int(row[0]) for row in growth] == [20, 200, 500], server
        assert all(int(requests) == 3 for _, requests, _, _ in growth)  # ours: a Query and two writes
        ours_read = [int(row[2]) for row in growth]
        peer_read = [int(row[3]) for row in growth]
        assert abs(ours_read[2] - ours_read[1]) <= ours_read[1] / 100  # a full window, whatever lies behind it
        assert peer_read[0] < peer_read[1] < peer_read[2]  # the peer reads its whole history, twice
        assert re.search(r"holds at most \d+ such messages", section)
    for name in ("benchmark-store-growth.png", "benchmark-latency.png", "benchmark.json", "benchmark.md"):
        assert (out_dir / name).stat().st_size > 0, name
    report = (out_dir / "benchmark.md").read_text(encoding="utf-8")
    assert "not judged (--quick)" in report
    assert "**missed**" not in report
    # Issue 19, item 9: the figures alone on stdout, the log lines in a file, a progress line on stderr.
    assert not [line for line in out.splitlines() if line.startswith("{")]
    assert (out_dir / "benchmark.log").exists()  # (a quick run may log nothing)
    assert "benchmark [########################] 100% 9/9 sections" in completed.stderr
