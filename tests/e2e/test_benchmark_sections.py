"""Every section of the benchmark runs in its quick form at the current commit: a section
that crashes fails here, not in the next full run. The sections that build the artifact with
`sam build` (cold starts, priming, sizes) are in the slow tier; the rest in the default run. Each
checks what its figures must say whatever the machine: the design's promises and the figures'
internal consistency, never a time."""

from pathlib import Path
from typing import Any

import pytest

from infra.bench.benchmark.sections import FUNCTIONS, MODEL_FUNCTIONS, SECTIONS, Workspace
from infra.local.template import load_template

FUNCTION_TYPE = "AWS::Serverless::Function"

pytestmark = pytest.mark.e2e
NEEDS_A_BUILD = {"cold starts", "SnapStart priming", "deployment sizes (sam build)"}
# At scale even when quick (histories to 500, a table of 2,000 items): the slow tier runs them; the
# default run keeps "DynamoDB per turn", and tests/tooling/test_flat_dynamodb.py the flat cost.
AT_SCALE = {"store growth", "turn against the table's size"}


def _checks(name: str, figures: dict[str, Any]) -> None:
    if name == "cold starts":
        runs = figures["cold_start_s"]
        assert set(runs) == set(FUNCTIONS)
        for phases in runs.values():
            for run in phases:  # the parts add up, and the whole is from the process's start
                assert run["seconds"] == pytest.approx(run["init_seconds"] + run["first_call_seconds"], abs=0.002)
                assert run["init_seconds"] > 0.05  # an interpreter and its imports, at the very least
    elif name == "SnapStart priming":
        assert [gain.function for gain in figures["priming"]] == MODEL_FUNCTIONS
        for gain in figures["priming"]:
            assert gain.prime_hook.median_ms > 0
            assert gain.unprimed_own.median_ms > 0
    elif name == "webhook acknowledgement":
        ack = figures["webhook_ack"]
        assert ack["p50_ms"] >= ack["server_p50_ms"] > 0  # every post waits on DynamoDB, SQS and SSM
        assert ack["p99_ms"] <= ack["max_ms"]
    elif name == "DynamoDB per turn":
        costs = figures["turn_costs"]
        assert [cost.history for cost in costs] == [20, 200]
        for cost in costs:  # one read and at most two writes, whatever the history
            assert (cost.reads, cost.writes) == (1, 2)
            assert cost.items_read <= 23  # the newest 20 messages and the profile, state and summary items
    elif name.startswith("overhead"):
        summary = figures["overhead" if "instant" in name else "overhead_paced"]
        assert summary["turn_p50_ms"] > 0
        assert summary["bare_p50_ms"] > 0
        assert summary["cpu_per_turn_ms"] > 0
        assert summary["ratio_min"] <= summary["ratio"] <= summary["ratio_max"]
    elif name == "first token over SSE":
        first = figures["first_token"]
        assert first.client_p50_ms >= first.added_p50_ms > 0  # the client cannot get it before the model sends it
    elif name == "deployment sizes (sam build)":
        sizes = figures["deployment_sizes"]
        deployed = [name for name, body in load_template()["Resources"].items() if body["Type"] == FUNCTION_TYPE]
        assert sorted(size.function for size in sizes) == sorted(deployed)  # every function the template deploys
        assert all(size.total_bytes < 250e6 for size in sizes)  # Lambda's limit
    elif name == "store growth":
        assert [growth.server for growth in figures["store_growth"]] == ["moto server"]  # no Node.js when quick
        growth = figures["store_growth"][0]
        assert [point.history for point in growth.points] == [20, 200, 500]
        assert all(point.ours.requests == 3 for point in growth.points)  # ours: a Query and two writes
        ours_read = [point.ours.bytes_read for point in growth.points]
        peer_read = [point.peer.bytes_read for point in growth.points]
        assert abs(ours_read[2] - ours_read[1]) <= ours_read[1] / 100  # a full window, whatever lies behind it
        assert peer_read[0] < peer_read[1] < peer_read[2]  # the peer reads its whole history, twice
    elif name == "turn against the table's size":
        servers = {figure.server for figure in figures["table_size"]}
        assert servers == {"flat", "moto as is"}
        assert {figure.items for figure in figures["table_size"]} == {20, 2_000}
    else:
        raise AssertionError(f"no checks for the section {name!r}: add them")


@pytest.mark.parametrize(
    "name",
    [pytest.param(name, marks=pytest.mark.slow) if name in NEEDS_A_BUILD | AT_SCALE else name for name in SECTIONS],
)
def test_each_section_runs_in_its_quick_form(name: str, tmp_path: Path) -> None:
    outcome = SECTIONS[name](Workspace(quick=True, scratch=tmp_path))
    assert outcome.lines
    assert not any("met" in line.split() or "missed" in line for line in outcome.lines)  # no verdicts when quick
    _checks(name, outcome.figures)
