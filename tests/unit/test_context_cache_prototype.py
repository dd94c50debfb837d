"""The context-cache benchmark's prototype (infra/bench/benchmark/context_cache.py) finds what decision
0022 rests on: a per-instance cache serves a context that misses another instance's messages, and
one instance alone never does. Without these the benchmark's staleness counts would prove nothing."""

from typing import Any

import pytest

from infra.bench.benchmark.context_cache import fidelity_channels, random_routing, replay
from onboarding.persistence import Repositories
from tests.unit.conftest import TABLE

pytestmark = pytest.mark.unit


def _replay(store: Repositories, dynamodb: Any, instances: list[str]) -> tuple[int, int]:
    result = replay(store, dynamodb, "cache-user", "test", instances, limit=20, table=TABLE)
    return result.served_from_cache, result.stale


def test_one_instance_serves_from_its_cache_and_is_never_stale(store: Repositories, dynamodb: Any) -> None:
    assert _replay(store, dynamodb, ["api"] * 8) == (7, 0)


def test_a_turn_served_by_another_instance_leaves_the_first_instance_stale(store: Repositories, dynamodb: Any) -> None:
    # api fills its cache, the SMS worker writes a turn, api's next turn misses that turn.
    served, stale = _replay(store, dynamodb, ["api", "sms-worker", "api", "api"])
    assert served == 2
    assert stale == 2  # both later api turns: the write-through keeps the entry without the SMS turn


def test_the_layouts_come_from_the_committed_fidelity_run_and_a_seeded_routing() -> None:
    channels = fidelity_channels()
    assert set(channels) == {"api", "sms-worker"}
    assert random_routing(4, 50, seed=4) == random_routing(4, 50, seed=4)
    assert len(set(random_routing(4, 50, seed=4))) == 4
