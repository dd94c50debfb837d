"""Where the flags come from, and what happens when they cannot be had. The file store
reads an edit once its max age has passed; AppConfig is asked through Powertools' AppConfigStore;
an unreachable store or an invalid configuration keeps the last known flags (or the documented
defaults), logs a warning without personal data and counts FeatureFlagsUnavailable."""

import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_lambda_powertools.utilities.feature_flags import StoreProvider
from aws_lambda_powertools.utilities.feature_flags.exceptions import ConfigurationStoreError
from botocore.response import StreamingBody
from botocore.stub import Stubber

from onboarding.composition import build_rollout
from onboarding.config import Settings
from onboarding.flags import DEFAULT_FLAGS, MemoryFlags
from onboarding.flags.rollout import FileStore, Rollout
from tests.support.clock import FakeClock
from tests.support.views import default_flags_document

from .conftest import TABLE

MEMORY_OFF = {**default_flags_document(), "memory": {"default": False}}
USER = "user-with-a-secret-id-0001"


def write(path: Path, document: Any) -> None:
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")


def metric_count(output: str) -> int:
    return sum(1 for line in output.splitlines() if '"FeatureFlagsUnavailable"' in line)


class Switchable(StoreProvider):
    """A store the test breaks and mends: `config` is served, or `error` raised."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config: dict[str, Any] = config
        self.error: Exception | None = None
        self.calls = 0

    @property
    def get_raw_configuration(self) -> dict[str, Any]:
        return self.get_configuration()

    def get_configuration(self) -> dict[str, Any]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.config


def test_the_file_store_reads_an_edit_only_once_its_max_age_has_passed(tmp_path: Path) -> None:
    clock, path = FakeClock(0.0), tmp_path / "flags.json"
    write(path, default_flags_document())
    store = FileStore(path, max_age_s=5, clock=clock)
    assert store.get_configuration() == default_flags_document()
    write(path, MEMORY_OFF)
    clock.advance(4.9)
    assert store.get_configuration() == default_flags_document()  # cached
    clock.advance(0.2)
    assert store.get_configuration() == MEMORY_OFF


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", None])
def test_the_file_store_reports_a_bad_or_missing_file_as_a_store_error(tmp_path: Path, content: str | None) -> None:
    path = tmp_path / "flags.json"
    if content is not None:
        write(path, content)
    with pytest.raises(ConfigurationStoreError):
        FileStore(path, max_age_s=5).get_configuration()


def test_unreachable_with_no_flags_ever_read_gives_the_documented_defaults(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    store = Switchable(MEMORY_OFF)
    store.error = ConfigurationStoreError("unreachable")
    assert Rollout(store, retry_after_s=60).for_user(USER) == DEFAULT_FLAGS
    assert metric_count(capsys.readouterr().out) == 1
    [warning] = [r for r in caplog.records if r.levelname == "WARNING"]
    assert "Feature flags unavailable" in warning.getMessage()
    assert USER not in caplog.text


def test_unreachable_after_a_read_keeps_the_last_known_flags_and_asks_again_only_after_max_age(
    capsys: pytest.CaptureFixture[str],
) -> None:
    clock, store = FakeClock(0.0), Switchable(MEMORY_OFF)
    flags = Rollout(store, retry_after_s=60, clock=clock)
    assert flags.for_user(USER) == MemoryFlags(memory=False)
    store.error = ConfigurationStoreError("unreachable")
    clock.advance(1)
    for _ in range(3):
        assert flags.for_user(USER) == MemoryFlags(memory=False)  # the last known, not the defaults
    assert metric_count(capsys.readouterr().out) == 1  # one failed fetch, then not asked before max age
    calls = store.calls
    clock.advance(59.5)
    assert flags.for_user(USER).memory is False
    assert store.calls == calls
    clock.advance(1)
    store.error = None
    store.config = default_flags_document()
    assert flags.for_user(USER) == DEFAULT_FLAGS  # mended: the new flags


@pytest.mark.parametrize(
    "invalid",
    [
        {"memory": {"rules": {}}},  # no default
        {"memory": {"default": "yes"}},  # a boolean flag whose default is no boolean
        {"memory": {"default": True, "rules": {"r": {"when_match": False, "conditions": [{"action": "NOPE"}]}}}},
    ],
)
def test_an_invalid_configuration_keeps_the_last_known_flags_or_the_defaults(
    invalid: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    clock, store = FakeClock(0.0), Switchable(invalid)
    flags = Rollout(store, retry_after_s=1)
    assert flags.for_user(USER) == DEFAULT_FLAGS  # never read: the defaults
    store.config = MEMORY_OFF
    flags = Rollout(store, retry_after_s=1, clock=clock)
    assert flags.for_user(USER) == MemoryFlags(memory=False)
    store.config = invalid
    clock.advance(2)
    assert flags.for_user(USER) == MemoryFlags(memory=False)  # last known
    assert metric_count(capsys.readouterr().out) >= 2


def test_a_percentage_rule_reads_the_users_bucket() -> None:
    """MODULO_RANGE on the rollout bucket: 0..99 is everyone; 0 % is the default alone (Powertools
    rejects an END below START, which would leave the defaults in force: memory on)."""
    everyone = {"memory": _percent(100)}
    nobody = {"memory": {"default": False}}
    assert Rollout(Switchable(everyone), 60).for_user(USER).memory is True
    assert Rollout(Switchable(nobody), 60).for_user(USER).memory is False


def _percent(percent: int) -> dict[str, Any]:
    return {
        "default": False,
        "rules": {
            "rollout": {
                "when_match": True,
                "conditions": [
                    {
                        "action": "MODULO_RANGE",
                        "key": "rollout_bucket",
                        "value": {"BASE": 100, "START": 0, "END": percent - 1},
                    }
                ],
            }
        },
    }


def _appconfig_client(stubber_body: bytes | None) -> tuple[Any, Stubber]:
    client = boto3.client("appconfigdata", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_response(
        "start_configuration_session",
        {"InitialConfigurationToken": "token-1"},
        {
            "ApplicationIdentifier": "coach-app",
            "EnvironmentIdentifier": "prod",
            "ConfigurationProfileIdentifier": "memory-flags",
        },
    )
    if stubber_body is None:
        stubber.add_client_error(
            "get_latest_configuration", service_error_code="ThrottlingException", http_status_code=429
        )
    else:
        body = StreamingBody(io.BytesIO(stubber_body), len(stubber_body))
        stubber.add_response(
            "get_latest_configuration",
            {"Configuration": body, "NextPollConfigurationToken": "token-2", "ContentType": "application/json"},
            {"ConfigurationToken": "token-1"},
        )
    return client, stubber


APPCONFIG = {
    "table_name": TABLE,
    "feature_flags_application": "coach-app",
    "feature_flags_environment": "prod",
    "feature_flags_profile": "memory-flags",
}


def test_appconfig_is_asked_for_the_named_application_environment_and_profile() -> None:
    client, stubber = _appconfig_client(json.dumps(MEMORY_OFF).encode())
    with stubber:
        flags = build_rollout(Settings(**APPCONFIG), client)
        assert flags.for_user(USER) == MemoryFlags(memory=False)
        assert flags.for_user("another") == MemoryFlags(memory=False)  # cached: no second call
    stubber.assert_no_pending_responses()


def test_appconfig_unreachable_never_fails_and_gives_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    client, stubber = _appconfig_client(None)
    with stubber:
        assert build_rollout(Settings(**APPCONFIG), client).for_user(USER) == DEFAULT_FLAGS
    assert metric_count(capsys.readouterr().out) == 1


def test_appconfig_names_come_together() -> None:
    with pytest.raises(ValueError, match="set together"):
        Settings(table_name=TABLE, feature_flags_application="coach-app")


def test_without_a_source_the_defaults_apply() -> None:
    assert build_rollout(Settings(table_name=TABLE)).for_user(USER) == DEFAULT_FLAGS
