"""The cost ledger's smoke version, as CI runs it: the README's line completes, prints the tables
the report holds (dollars by line, the three memories side by side, what each turn measured with
each function's time and its spread) and writes the report, and what it measured says what the
design promises: our memory's table traffic stays flat with the history while LangChain's store
grows, and the request units are computed, not moto's constants (moto reports nothing for a
transaction)."""

import json
from pathlib import Path

import pytest

from infra.bench.cost.ledger import LINES
from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e


def test_the_quick_cost_ledger_runs_and_prices_measured_turns(tmp_path: Path) -> None:
    completed = run_line(readme_line("uv run python -m infra.cost --quick"), sandbox(tmp_path), timeout_s=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    out, out_dir = completed.stdout, tmp_path / ".local"
    figures = json.loads((out_dir / "cost.json").read_text(encoding="utf-8"))
    report = (out_dir / "cost.md").read_text(encoding="utf-8")
    # The console shows the report's own tables, row for row.
    table_rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(table_rows) > 2 + len(LINES) + 2 * 2
    assert all(row in report for row in table_rows)
    assert "| per 1,000 turns | 20 messages | 200 messages |" in out
    for line in (*LINES, "**total, ours**"):
        assert any(row.startswith(f"| {line} | ") and "$" in row for row in table_rows), line

    assert figures["quick"] is True
    assert [c["history"] for c in figures["comparisons"]] == [20, 200]
    app = [entry["app"] for entry in figures["measured"]]
    sms = [entry["sms"] for entry in figures["measured"]]
    peer = [entry["peer"] for entry in figures["measured"]]
    for channel in (*app, *sms):
        assert channel["model_requests"] >= 1
        assert min(channel["input_tokens"], channel["output_tokens"]) > 0  # the model's usage, as Bedrock bills it
        assert min(channel["table_requests"], channel["read_units"], channel["write_units"]) > 0
        for median, low, high in channel["own_ms_spread"].values():
            assert low <= median <= high
    assert sorted(sms[0]["own_ms_spread"]) == ["SmsWebhookFunction", "SmsWorkerFunction"]
    # The prompt is the window and the summary, however long the history behind them (caught up in both).
    assert app[1]["input_tokens"] == pytest.approx(app[0]["input_tokens"], rel=0.2)
    assert app[0]["table_requests"] == app[1]["table_requests"]  # ours: the same requests whatever lies behind
    assert app[1]["read_units"] <= app[0]["read_units"] * 1.5  # and about the same read units
    for channel in app:
        assert channel["unreported_requests"] > 0  # moto said nothing for the turn's transactions...
        assert channel["write_units"] > channel["reported_units"]  # ...so the computed write units are more
    assert peer[0]["table_requests"] == peer[1]["table_requests"] == 3
    assert peer[1]["read_units"] > 2 * peer[0]["read_units"]  # it reads its whole history...
    assert peer[1]["write_units"] > 2 * peer[0]["write_units"]  # ...and writes it back whole, every turn
    for comparison in figures["comparisons"]:
        assert comparison["total"] == pytest.approx(sum(comparison["lines"].values()))
        swapped = comparison["peer_total"] - comparison["total"]
        assert swapped == pytest.approx(
            comparison["peer_memory"] - comparison["ours_memory"]
        )  # only the memory differs

    for name in ("cost.md", "cost.png", "cost.json", "cost.log"):
        assert (out_dir / name).stat().st_size > 0, name
    assert "## Prices" in report
    assert "cost [########################] 100% 7/7 steps" in completed.stderr
