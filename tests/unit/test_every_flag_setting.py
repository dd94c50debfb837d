"""Every feature-flag setting has an effect someone can see, through the composition
root. Registered with test_every_setting.py's list, which imports this module."""

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from infra.local.bedrock_emulator import BedrockEmulator
from onboarding.composition import build_rollout, build_turn_service
from onboarding.config import Settings
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from tests.support.setting_effects import observes
from tests.support.views import default_flags_document
from tests.unit.test_rollout import APPCONFIG, MEMORY_OFF, _appconfig_client

from .conftest import TABLE


def settings_with(**changes: Any) -> Settings:
    return Settings(**{"table_name": TABLE, "model_first_backoff_s": 0.01, "model_max_backoff_s": 0.05, **changes})


async def _turn_arm(service: Any, caplog: pytest.LogCaptureFixture, user: str) -> str:
    caplog.clear()
    await (await service.start_turn(user, "hello")).collect()
    return next(str(getattr(r, "arm")) for r in caplog.records if r.getMessage() == "turn_received")  # noqa: B009


@observes("feature_flags_file", "feature_flags_max_age_s")
async def test_an_edit_of_the_flags_file_applies_within_max_age_without_a_restart(
    dynamodb: Any, emulator: BedrockEmulator, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "flags.json"
    path.write_text(json.dumps(default_flags_document()), encoding="utf-8")
    max_age_s = 2
    service = build_turn_service(settings_with(feature_flags_file=str(path), feature_flags_max_age_s=max_age_s))
    # A turn reads the flags as it starts. The first turn of a service can take a second on a busy
    # machine (the model client's first call), so it only warms up; the file is read again after
    # the max age by the next turn, and the edit then comes within one warm turn of that read.
    assert await _turn_arm(service, caplog, "u") == "full"
    await asyncio.sleep(max_age_s + 0.1)
    assert await _turn_arm(service, caplog, "u") == "full"
    path.write_text(json.dumps(MEMORY_OFF), encoding="utf-8")
    assert await _turn_arm(service, caplog, "u") == "full"  # within max age: the cached flags
    await asyncio.sleep(max_age_s + 0.1)
    assert await _turn_arm(service, caplog, "u") == "single_prompt"  # the same service: no restart


@observes("feature_flags_application", "feature_flags_environment", "feature_flags_profile")
def test_appconfig_is_read_at_the_named_application_environment_and_profile() -> None:
    client, stubber = _appconfig_client(json.dumps(MEMORY_OFF).encode())
    with stubber:  # the stub checks the three identifiers of StartConfigurationSession
        assert build_rollout(Settings(**APPCONFIG), client).for_user("u") == MemoryFlags(memory=False)
    stubber.assert_no_pending_responses()


@pytest.fixture
def silent_endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An AppConfig endpoint that accepts connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        monkeypatch.setenv("AWS_ENDPOINT_URL_APPCONFIGDATA", f"http://127.0.0.1:{server.getsockname()[1]}")
        for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
            monkeypatch.setenv(name, value)
        yield


@observes("feature_flags_timeout_s")
@pytest.mark.usefixtures("silent_endpoint")
def test_a_silent_appconfig_costs_the_turn_at_most_the_flags_timeout() -> None:
    for timeout in (0.3, 1.5):
        flags = build_rollout(Settings(**APPCONFIG, feature_flags_timeout_s=timeout))
        started = time.monotonic()
        assert flags.for_user("u") == DEFAULT_FLAGS  # never a failed turn: the defaults
        waited = time.monotonic() - started
        assert timeout <= waited < timeout + 0.5, (timeout, waited)
