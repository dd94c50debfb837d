"""SnapStart: priming runs a whole turn offline and leaves nothing behind; renewing makes each
restored copy its own; the hooks reach the code the way Lambda calls them."""

import os
import random
import sys
import types
from typing import Any

import boto3
import httpx
import pytest
from botocore.config import Config
from langchain_core.language_models import BaseChatModel

from functions.api.mobile_api.routes import create_app
from functions.api.mobile_api.snapstart_hooks import AFTER_RESTORE_PATH, BEFORE_CHECKPOINT_PATH
from infra.local.bedrock_emulator import BedrockEmulator
from onboarding import snapstart
from onboarding.account import AccountService
from onboarding.composition import build_turn_service
from onboarding.config import Settings
from onboarding.llm.event_stream import encode_event
from onboarding.metrics import count_metric
from onboarding.persistence import Repositories
from onboarding.snapstart import Primer, register_runtime_hooks
from onboarding.turn.service import TurnService
from tests.unit.conftest import TABLE


def primer_for(settings: Settings, store: Repositories, llm: BaseChatModel, dynamodb: Any, **kwargs: Any) -> Primer:
    def service(offline: Settings) -> TurnService:
        return build_turn_service(offline, store, llm)

    return Primer(settings, llm, [dynamodb, llm.client], service, **kwargs)  # type: ignore[attr-defined]


def unreachable_table(settings: Settings) -> tuple[Repositories, Any]:
    """A table client whose every request would fail to connect: what priming sends must not go out."""
    config = Config(retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=1)
    client = boto3.client("dynamodb", region_name="us-east-1", endpoint_url="http://127.0.0.1:9", config=config)
    return Repositories.over(client, TABLE, settings), client


async def test_priming_answers_a_whole_turn_in_process_and_nothing_reaches_the_table_or_the_model(
    settings: Settings, llm: BaseChatModel, emulator: BedrockEmulator, caplog: pytest.LogCaptureFixture
) -> None:
    store, client = unreachable_table(settings)
    await primer_for(settings, store, llm, client).prime()
    assert "Priming failed" not in caplog.text
    [primed] = [r for r in caplog.records if r.getMessage() == "Primed for the snapshot"]
    assert primed.model_calls == 4  # type: ignore[attr-defined]  # two turns, each a tool round and its reply
    assert emulator.requests == []
    await llm.ainvoke("still answered by the real model afterwards")  # the stand-in is gone
    assert len(emulator.requests) == 1


async def test_priming_emits_no_metric(
    settings: Settings,
    store: Repositories,
    llm: BaseChatModel,
    dynamodb: Any,
    emulator: BedrockEmulator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A primed turn is not a turn anyone had: dashboards must not count it."""
    monkeypatch.delenv("POWERTOOLS_METRICS_DISABLED", raising=False)
    await primer_for(settings, store, llm, dynamodb, also=lambda: count_metric("DuringPriming")).prime()
    count_metric("AfterPriming")
    printed = capsys.readouterr().out
    assert "DuringPriming" not in printed
    assert "AfterPriming" in printed
    assert "POWERTOOLS_METRICS_DISABLED" not in os.environ


async def test_priming_puts_the_metrics_switch_back_as_it_was(
    settings: Settings, store: Repositories, llm: BaseChatModel, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    await primer_for(settings, store, llm, dynamodb).prime()
    assert os.environ["POWERTOOLS_METRICS_DISABLED"] == "false"


async def test_a_failed_priming_raises_nothing_and_leaves_the_live_service_answering(
    settings: Settings,
    store: Repositories,
    llm: BaseChatModel,
    dynamodb: Any,
    service: TurnService,
    emulator: BedrockEmulator,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(snapstart, "_model_answer", lambda call: encode_event("throttlingException", {}))
    one_failure_opens = settings.model_copy(update={"circuit_failure_threshold": 1})
    await primer_for(one_failure_opens, store, llm, dynamodb).prime()
    assert "Priming failed" in caplog.text
    turn = await service.start_turn("u", "Hi")
    assert (await turn.collect()).reply  # the live breaker never saw the primed turn's failure


def test_renewing_reseeds_random_so_restored_copies_draw_different_jitter(
    settings: Settings, store: Repositories, llm: BaseChatModel, dynamodb: Any
) -> None:
    primer = primer_for(settings, store, llm, dynamodb)
    random.seed(1234)  # the state every copy restored from one snapshot would share
    shared = [random.random() for _ in range(3)]
    random.seed(1234)
    primer.renew()
    assert [random.random() for _ in range(3)] != shared


async def test_renewing_drops_pooled_connections_and_the_clients_still_work(
    settings: Settings, store: Repositories, llm: BaseChatModel, dynamodb: Any, emulator: BedrockEmulator
) -> None:
    await llm.ainvoke("opens a connection to the model's endpoint")
    pools = llm.client._endpoint.http_session._manager.pools  # type: ignore[attr-defined]
    assert len(pools) == 1
    primer_for(settings, store, llm, dynamodb).renew()
    assert len(pools) == 0
    await llm.ainvoke("a new connection")
    assert len(emulator.requests) == 2


def test_the_runtime_hooks_are_registered_only_where_the_runtime_has_them(
    settings: Settings, store: Repositories, llm: BaseChatModel, dynamodb: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    primer = primer_for(settings, store, llm, dynamodb)
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # absent, as it is outside Lambda
    assert register_runtime_hooks(primer) is False
    registered: dict[str, Any] = {}
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_before_snapshot = lambda hook: registered.setdefault("before", hook)  # type: ignore[attr-defined]
    runtime.register_after_restore = lambda hook: registered.setdefault("after", hook)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)
    assert register_runtime_hooks(primer) is True
    assert registered == {"before": primer.prime_sync, "after": primer.renew}


def test_the_sms_worker_hands_its_primer_to_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    registered: list[Any] = []
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_before_snapshot = registered.append  # type: ignore[attr-defined]
    runtime.register_after_restore = registered.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)
    monkeypatch.delitem(sys.modules, "functions.sms_worker.app", raising=False)
    import functions.sms_worker.app as worker

    assert registered == [worker._parts.primer.prime_sync, worker._parts.primer.renew]


async def test_the_apis_hooks_answer_the_adapter_and_are_not_part_of_the_api(
    settings: Settings,
    store: Repositories,
    llm: BaseChatModel,
    dynamodb: Any,
    service: TurnService,
    account: AccountService,
    emulator: BedrockEmulator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = create_app(service, account, primer_for(settings, store, llm, dynamodb))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert (await client.post(BEFORE_CHECKPOINT_PATH)).status_code == 204
        assert "Primed for the snapshot" in caplog.text
        assert (await client.post(AFTER_RESTORE_PATH)).status_code == 204
        assert "Renewed after restore" in caplog.text
        paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [path for path in paths if "snapstart" in path]
    assert emulator.requests == []
    bare = create_app(service, account)  # without a primer (the tests' app), no such routes
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=bare), base_url="http://test") as client:
        assert (await client.post(BEFORE_CHECKPOINT_PATH)).status_code == 404


def test_the_sms_workers_own_primer_primes_offline_through_its_composition(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker as Lambda builds it: its clients point at AWS itself (no local endpoint, dummy
    credentials), so a single request leaving the process would fail the priming."""
    hooks: list[Any] = []
    runtime = types.ModuleType("snapshot_restore_py")
    runtime.register_before_snapshot = hooks.append  # type: ignore[attr-defined]
    runtime.register_after_restore = hooks.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", runtime)
    monkeypatch.delitem(sys.modules, "functions.sms_worker.app", raising=False)
    import functions.sms_worker.app  # noqa: F401 - registers the hooks

    before, after = hooks
    before()
    after()
    assert "Priming failed" not in caplog.text
    [primed] = [r for r in caplog.records if r.getMessage() == "Primed for the snapshot"]
    assert primed.model_calls == 4  # type: ignore[attr-defined]
    assert "twilio.rest.api.v2010.account.message" in sys.modules  # Twilio's message API, imported ahead


async def test_priming_never_asks_appconfig_for_the_flags(
    settings: Settings, llm: BaseChatModel, emulator: BedrockEmulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration session started before the snapshot would be shared by every
    restored copy; priming runs on the default flags and builds no AppConfig client."""
    built: list[str] = []
    real = boto3.client

    def recording(*args: Any, **kwargs: Any) -> Any:
        built.append(str(args[0] if args else kwargs.get("service_name")))
        return real(*args, **kwargs)

    monkeypatch.setattr(boto3, "client", recording)
    named = settings.model_copy(
        update={"feature_flags_application": "a", "feature_flags_environment": "e", "feature_flags_profile": "p"}
    )
    store, client = unreachable_table(named)
    await primer_for(named, store, llm, client).prime()
    assert "appconfigdata" not in built
