"""The cost ledger's smoke version, as CI runs it: the README's line completes, prints every figure
the ledger promises (tokens, request units, each function's time with its spread, dollars by line,
the three memories side by side) and writes the report, and what it measured says what the design
promises: our memory's table traffic stays flat with the history while LangChain's store grows,
and the request units are computed, not moto's constants (moto reports nothing for a transaction)."""

import json
import re
from pathlib import Path

import pytest

from infra.bench.cost.__main__ import LINE_WIDTH
from infra.bench.cost.ledger import LINES
from tests.support.readme import readme_line, run_line, sandbox

pytestmark = pytest.mark.e2e

_NUMBER = r"([\d.]+)"


def _numbers(count: int) -> str:
    return r"\s+".join([_NUMBER] * count)


def test_the_quick_cost_ledger_runs_and_prices_measured_turns(tmp_path: Path) -> None:
    completed = run_line(readme_line("uv run python -m infra.cost --quick"), sandbox(tmp_path), timeout_s=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    out, out_dir = completed.stdout, tmp_path / ".local"

    measured = re.findall(
        rf"^\s+(\d+) \|\s+{_numbers(6)} \|\s+{_numbers(6)} \| {_NUMBER} units, nothing for "
        rf"{_NUMBER} requests$",
        out,
        flags=re.MULTILINE,
    )
    assert [int(row[0]) for row in measured] == [20, 200]
    app = [[float(value) for value in row[1:7]] for row in measured]
    for model_requests, tokens_in, tokens_out, requests, read_units, write_units in app:
        assert model_requests >= 1
        assert min(tokens_in, tokens_out) > 0  # the model's usage, as Bedrock bills it
        assert min(requests, read_units, write_units) > 0
    assert app[1][1] > app[0][1]  # a longer history fills more of the window: more input tokens
    assert app[0][3] == app[1][3]  # ours: the same table requests whatever lies behind the window
    assert app[1][4] <= app[0][4] * 1.5  # and about the same read units
    assert all(float(row[14]) > 0 for row in measured)  # moto said nothing for the turn's transactions...
    assert all(float(row[6]) > float(row[13]) for row in measured)  # ...so the computed write units are more

    times = re.findall(r"^\s+(\d+) \| (ApiFunction .*)$", out, flags=re.MULTILINE)
    assert [int(history) for history, _ in times] == [20, 200]
    for _, line in times:
        spreads = re.findall(r"(\w+Function) (\d+) \((\d+)-(\d+)\)", line)
        assert [name for name, *_ in spreads] == ["ApiFunction", "SmsWebhookFunction", "SmsWorkerFunction"]
        for _, median, low, high in spreads:
            assert int(low) <= int(median) <= int(high)

    peer = re.findall(rf"^\s+(\d+) \| 3 requests, {_NUMBER} RRU, {_NUMBER} WRU$", out, flags=re.MULTILINE)
    assert [int(row[0]) for row in peer] == [20, 200]
    assert float(peer[1][1]) > 2 * float(peer[0][1])  # it reads its whole history...
    assert float(peer[1][2]) > 2 * float(peer[0][2])  # ...and writes it back whole, every turn

    # The dollar table: one row per line of the bill, one column per history (readable
    # at 100 columns, every name whole).
    table = out.split("per 1,000 turns, at history", 1)[1].split("\n\n", 1)[0].splitlines()
    assert table[0].split() == ["20", "200"]
    assert all(len(row) <= 100 for row in table)
    by_line = {row[:LINE_WIDTH].strip(): [float(v) for v in row[LINE_WIDTH:].split()] for row in table[1:]}
    assert list(by_line) == [*LINES, "total"]
    dollars = [
        (history, [by_line[line][column] for line in LINES], by_line["total"][column])
        for column, history in enumerate((20, 200))
    ]
    for _, lines, total in dollars:
        assert all(value > 0 for value in lines)
        assert total == pytest.approx(sum(lines), abs=1e-3)
    memory = re.findall(
        r"^\s+(\d+) \| \$([\d.]+) \| \$([\d.]+) \| \$([\d.]+); totals \$([\d.]+) \| \$([\d.]+) \| \$([\d.]+)$",
        out,
        flags=re.MULTILINE,
    )
    assert [int(row[0]) for row in memory] == [20, 200]
    for row, priced in zip(memory, dollars, strict=True):
        ours, theirs, agentcore, total, peer_total, agentcore_total = (float(value) for value in row[1:])
        assert total == pytest.approx(priced[2], abs=1e-3)
        assert peer_total - total == pytest.approx(theirs - ours, abs=1e-3)  # only the memory differs
        assert agentcore_total - total == pytest.approx(agentcore - ours, abs=1e-3)

    figures = json.loads((out_dir / "cost.json").read_text(encoding="utf-8"))
    assert figures["quick"] is True
    assert [c["history"] for c in figures["comparisons"]] == [20, 200]
    for name in ("cost.md", "cost.png", "cost.json", "cost.log"):
        assert (out_dir / name).exists(), name
    assert (out_dir / "cost.png").stat().st_size > 0
    report = (out_dir / "cost.md").read_text(encoding="utf-8")
    assert "## Prices" in report
    assert "Checked " in report
    assert "cost [########################] 100% 7/7 steps" in completed.stderr
