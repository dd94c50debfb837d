"""Shared test set-up. The environment is fixed before any project module is imported, so that
nothing can reach a real AWS account: credentials are dummies and the region is fixed."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_DEFAULT_REGION": "us-east-1",
    "TABLE_NAME": "onboarding-memory-test",
    "POWERTOOLS_SERVICE_NAME": "onboarding-memory-test",
    # What template.yaml gives the SMS functions; tests that run them pass their own dependencies.
    "SMS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/sms-turns.fifo",
    "IDEMPOTENCY_TABLE_NAME": "onboarding-idempotency-test",
    "TWILIO_AUTH_TOKEN_PARAMETER": "/onboarding-memory/twilio-auth-token",
    "TWILIO_WEBHOOK_URL": "https://example.execute-api.us-east-1.amazonaws.com/v1/sms",
    "TWILIO_ACCOUNT_SID": "AC00000000000000000000000000000000",
}.items():
    os.environ[_name] = _value
for _name in (
    "AWS_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_DYNAMODB",
    "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    "AWS_ENDPOINT_URL_SQS",
    "AWS_ENDPOINT_URL_SSM",
    "TWILIO_API_BASE_URL",
):
    os.environ.pop(_name, None)

import signal  # noqa: E402

# A suite started in the background by a script (`cmd &` without job control) inherits SIGINT
# ignored, and an ignored signal stays ignored across exec: every tool the tests start would then
# ignore the Ctrl-C the tests send it, as no terminal's foreground job does. A handler of our own
# (not an ignore) is reset to the default action in each child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

from aws_lambda_powertools.utilities.parameters import clear_caches as clear_parameter_caches  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

from infra.local.bedrock_emulator import BedrockEmulator  # noqa: E402
from infra.local.flat_dynamodb import install as flat_dynamodb  # noqa: E402
from tests.support.botocore_data import install as share_botocore_data  # noqa: E402

# In-process moto (the unit and property tests) with the local server's flat-cost layer: a request's
# cost does not grow with the table (infra/local/flat_dynamodb.py).
flat_dynamodb()
# Each test's fresh botocore session reads the service models once per process, not once per test.
share_botocore_data()

# pytester: the log audit is tested on a pytest run of its own (tests/unit/test_log_audit.py).
pytest_plugins = ["tests.support.log_audit", "pytester"]

settings.register_profile(
    "default",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
settings.load_profile("default")

_KIND_BY_FOLDER = {"unit", "property", "integration", "e2e", "infrastructure"}
# The tooling's own tests (tests/tooling: infra/, not the product) are unit tests too, so
# `-m unit` still runs them and `-m "unit and not tooling"` runs the product's alone.
_TOOLING_FOLDER = "tooling"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test is marked by its kind: the folder it lives in. The slow tier runs only when the
    -m expression names it (`-m slow`, `-m "unit and slow"`): `-m unit` replaces the default
    `-m "not slow"`, and would otherwise bring the unit tier's scale runs back into it."""
    for item in items:
        folder = Path(str(item.fspath)).parent.name
        if folder in _KIND_BY_FOLDER:
            item.add_marker(getattr(pytest.mark, folder))
        elif folder == _TOOLING_FOLDER:
            item.add_marker(pytest.mark.tooling)
            item.add_marker(pytest.mark.unit)
    if "slow" not in (config.option.markexpr or ""):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]


@pytest.fixture
def emulator(monkeypatch: pytest.MonkeyPatch) -> Iterator[BedrockEmulator]:
    """The Bedrock emulator on loopback, with botocore pointed at it by the standard variable."""
    with BedrockEmulator() as running:
        monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", running.url)
        yield running


@pytest.fixture(autouse=True)
def _fresh_parameter_providers() -> Iterator[None]:
    """Powertools Parameters keeps one client per process, bound to the endpoint it was made for;
    a test that points SSM somewhere else must not leave it to the next test."""
    yield
    clear_parameter_caches()  # type: ignore[no-untyped-call]
