"""The committed cost report (docs/cost.md, cost.json, cost.png) is a full run of `infra.cost`
at today's price table: change a price without rerunning `uv run python -m infra.cost --out docs`
and these fail, so the dollars in docs/ are always priced at the table they show."""

import json
from pathlib import Path
from typing import Any

import pytest

from infra.bench.cost.__main__ import FULL_HISTORIES, markdown
from infra.bench.cost.ledger import Assumptions, PeerFigures, TurnFigures, compare

DOCS = Path(__file__).parents[2] / "docs"


@pytest.fixture(scope="module")
def figures() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DOCS / "cost.json").read_text(encoding="utf-8"))
    return loaded


def test_the_committed_report_is_a_full_run(figures: dict[str, Any]) -> None:
    assert figures["quick"] is False
    assert [comparison["history"] for comparison in figures["comparisons"]] == FULL_HISTORIES
    assert (DOCS / "cost.png").stat().st_size > 10_000


def test_the_committed_report_is_written_from_its_figures_and_todays_price_table(figures: dict[str, Any]) -> None:
    assert (DOCS / "cost.md").read_text(encoding="utf-8") == markdown(figures)


def test_the_committed_dollars_are_its_measured_turns_at_todays_prices(figures: dict[str, Any]) -> None:
    assumptions = Assumptions(**figures["assumptions"])
    for measured, committed in zip(figures["measured"], figures["comparisons"], strict=True):
        comparison = compare(
            TurnFigures(**measured["app"]),
            TurnFigures(**measured["sms"]),
            PeerFigures(**measured["peer"]),
            assumptions,
            figures["memory_mb"],
        )
        assert comparison.lines == pytest.approx(committed["lines"], rel=1e-9)
        assert comparison.agentcore_memory == pytest.approx(committed["agentcore_memory"], rel=1e-9)
        if committed["peer_memory"] is None:
            assert comparison.peer_memory is None
        else:
            assert comparison.peer_memory == pytest.approx(committed["peer_memory"], rel=1e-9)
