"""Integration fixtures: one local stack for the session (moto's DynamoDB server in its own
process, the Bedrock emulator on loopback), reached over real HTTP through the standard
endpoint variables."""

import uuid
from collections.abc import Iterator

import pytest

from infra.local.stack import LocalStack


@pytest.fixture(scope="session")
def local_stack() -> Iterator[LocalStack]:
    with LocalStack() as stack:
        yield stack


@pytest.fixture
def user_id() -> str:
    """A fresh user per test, so tests sharing the session's table never see each other."""
    return f"it-{uuid.uuid4()}"
