"""Every section of the benchmark runs in its quick form at the current commit: a section that
crashes fails here, not in the next full run. The sections that build the artifact with `sam
build` (cold starts, priming, a warm check-in, sizes) and the long-time user's (a table of a few thousand items)
are in the slow tier; the rest in the default run. Each checks what its figures must say whatever
the machine: the design's promises and the figures' internal consistency, never a time."""

from pathlib import Path
from typing import Any

import pytest

from infra.bench.benchmark.__main__ import FUNCTIONS, MODEL_FUNCTIONS, SECTIONS, Workspace
from infra.local.template import function_ids

pytestmark = pytest.mark.e2e
SLOW = {"cold starts", "SnapStart priming", "a check-in, warm", "deployment sizes (sam build)", "a long-time user"}


def _checks(name: str, figures: dict[str, Any]) -> None:
    if name == "cold starts":
        runs = figures["cold_start_s"]
        assert set(runs) == set(FUNCTIONS)
        for phases in runs.values():
            for run in phases:  # the parts add up, and the whole is from the process's start
                assert run["seconds"] == pytest.approx(run["init_seconds"] + run["first_call_seconds"], abs=0.002)
                assert run["init_seconds"] > 0.05  # an interpreter and its imports, at the very least
                assert 0.05 < run["cpu_seconds"] < 3 * run["seconds"]  # the process's own CPU time
    elif name == "SnapStart priming":
        assert [gain["function"] for gain in figures["priming"]] == MODEL_FUNCTIONS
        for gain in figures["priming"]:
            assert gain["prime_hook"][0] > 0
            assert gain["unprimed_own"][1] <= gain["unprimed_own"][0] <= gain["unprimed_own"][2]
    elif name == "a check-in, warm":
        runs = figures["warm_check_in"]
        assert len(runs) == 3  # the quick form's calls after the first, in one process
        assert all(run["seconds"] > run["server_seconds"] > 0 for run in runs)  # the model and Twilio were asked
    elif name == "deployment sizes (sam build)":
        sizes = figures["deployment_sizes"]
        assert sorted(size["function"] for size in sizes) == sorted(function_ids())  # every function deployed
        for size in sizes:
            assert size["total"] == size["own"] + sum(size["layers"].values())
            assert "OnboardingLayer" in size["layers"]
            assert size["total"] < 250e6  # Lambda's limit
    elif name == "a long-time user":
        lengths = figures["history"]["lengths"]
        assert [n["history"] for n in lengths] == [20, 200, 500]
        for n in lengths:  # one read and at most two writes, whatever the history
            assert (n["reads"], n["writes"]) == (1, 2)
            assert n["items_read"] <= 23  # the newest 20 messages and the profile, state and summary items
        assert lengths[-1]["backlog"]
    elif name.startswith("overhead"):
        summary = figures["overhead" if "instant" in name else "overhead_paced"]
        assert summary["turn_p50_ms"] > 0
        assert summary["bare_p50_ms"] > 0
        assert summary["cpu_per_turn_ms"] > 0
        assert summary["ratio_min"] <= summary["ratio"] <= summary["ratio_max"]
        assert summary["recalled"] == summary["recall_turns"]  # every recall-on turn asked the index
    elif name == "first token over SSE":
        first = figures["first_token"]
        assert first["client_p50_ms"] >= first["added_p50_ms"] > 0  # the client cannot get it before the model sends it
    elif name == "webhook acknowledgement":
        ack = figures["webhook_ack"]
        assert len(ack["ms"]) == len(ack["server_ms"]) == 20
        assert all(total >= waited > 0 for total, waited in zip(ack["ms"], ack["server_ms"], strict=True))
    else:
        raise AssertionError(f"no checks for the section {name!r}: add them")


@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=pytest.mark.slow) if name in SLOW else name for name in SECTIONS]
)
def test_each_section_runs_in_its_quick_form(name: str, tmp_path: Path) -> None:
    outcome = SECTIONS[name](Workspace(quick=True, scratch=tmp_path))
    assert outcome.rows
    for _, _, measured, met in outcome.rows:
        assert measured
        # A quick run judges nothing but the sizes: its samples are too few to judge a time by.
        assert met is None or name == "deployment sizes (sam build)"
    _checks(name, outcome.figures)
