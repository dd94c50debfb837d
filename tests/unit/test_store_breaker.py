"""The store's breaker: after reads of the memory that failed in a row, turns stop trying to read
for a while and go on degraded (no memory), then try again and recover by themselves. The user's
message is still stored while it is open (decision 0010)."""

from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from onboarding.breaker import CircuitBreaker
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.llm.wording import MEMORY_UNAVAILABLE_NOTICE
from onboarding.model.errors import StoreError
from onboarding.model.history import TurnContext
from onboarding.persistence import Repositories
from onboarding.turn.orchestrator import OnboardingAgentOrchestrator
from onboarding.turn.service import TurnService
from tests.support.clock import FakeClock
from tests.unit.test_resilience import metrics_in, settings_with

pytestmark = pytest.mark.unit


class FlakyReads:
    """Stands in for the conversation repository's `load_turn`: counts the reads, fails while `down`."""

    def __init__(self, store: Repositories) -> None:
        self.real = store.conversations.load_turn
        self.reads = 0
        self.down = True

    def __call__(self, *args: Any, **kwargs: Any) -> TurnContext:
        self.reads += 1
        if self.down:
            raise StoreError("the table did not answer")
        return self.real(*args, **kwargs)


async def _reply(service: TurnService, text: str) -> str:
    return (await (await service.start_turn("u", text)).collect()).reply


async def test_the_breaker_opens_skips_the_read_half_opens_and_closes_on_success(
    store: Repositories,
    llm: BaseChatModel,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock = FakeClock()
    limits = settings_with(settings, store_circuit_failure_threshold=2, store_circuit_reset_s=15)
    breaker = CircuitBreaker(limits.store_breaker, clock, name="store")
    orchestrator = OnboardingAgentOrchestrator(store.conversations, llm, limits)
    service = TurnService(orchestrator, store, CircuitBreaker(limits.breaker), store_breaker=breaker)
    reads = FlakyReads(store)
    monkeypatch.setattr(store.conversations, "load_turn", reads)

    for n in (1, 2):  # two failed reads in a row: each turn tried, and went on without its memory
        assert (await _reply(service, f"failing {n}")).startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert (reads.reads, breaker.state) == (2, "open")
    assert "StoreCircuitOpened" in metrics_in(capsys.readouterr().out)

    for n in (3, 4):  # open: no read at all, degraded at once
        assert (await _reply(service, f"skipped {n}")).startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert reads.reads == 2
    assert metrics_in(capsys.readouterr().out).count("HistoryLoadSkipped") == 2

    clock.advance(15)  # half-open: one read is tried; it fails, so open again for a full reset time
    assert breaker.state == "half-open"
    await _reply(service, "trial")
    assert (reads.reads, breaker.state, breaker.retry_after_s()) == (3, "open", 15)
    await _reply(service, "skipped again")
    assert reads.reads == 3

    clock.advance(15)
    reads.down = False  # the store is back: the trial read succeeds and the breaker closes
    reply = await _reply(service, "back")
    assert not reply.startswith(MEMORY_UNAVAILABLE_NOTICE)
    assert (reads.reads, breaker.state) == (4, "closed")
    await _reply(service, "and again")
    assert reads.reads == 5

    # Every message was stored, the skipped turns' too: the breaker guards the read, not the writes.
    said = [m.content for m in store.conversations.load_turn("u", 40).messages if m.role == "user"]
    assert said == ["failing 1", "failing 2", "skipped 3", "skipped 4", "trial", "skipped again", "back", "and again"]


async def test_a_success_between_failures_keeps_the_breaker_closed(
    store: Repositories, llm: BaseChatModel, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = settings_with(settings, store_circuit_failure_threshold=2)
    breaker = CircuitBreaker(limits.store_breaker, FakeClock(), name="store")
    service = TurnService(
        OnboardingAgentOrchestrator(store.conversations, llm, limits),
        store,
        CircuitBreaker(limits.breaker),
        store_breaker=breaker,
    )
    reads = FlakyReads(store)
    monkeypatch.setattr(store.conversations, "load_turn", reads)
    await _reply(service, "one")
    reads.down = False
    await _reply(service, "two")
    reads.down = True
    await _reply(service, "three")
    assert (reads.reads, breaker.state) == (3, "closed")


def test_the_composition_root_gives_each_service_a_store_breaker_of_its_own(
    store: Repositories, llm: BaseChatModel, settings: Settings
) -> None:
    first, second = (build_turn_service(settings, store, llm) for _ in range(2))
    assert first._store_breaker is not second._store_breaker
    assert first._store_breaker.name == "store"
    assert first._deps.breaker.name == "model"
