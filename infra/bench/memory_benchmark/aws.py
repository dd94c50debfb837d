"""`--aws`: the same benchmark with the real model, and its answers judged by a second model.

The model is whatever the standard environment names: real Bedrock with the process's own
credentials and region, or any endpoint `AWS_ENDPOINT_URL_BEDROCK_RUNTIME` points at (the tests
point it at the emulator, whose judge is a test double). DynamoDB stays the embedded local server:
the benchmark measures the memory the turn path builds, and a local table costs nothing and
leaves nothing behind in an account.

Offline, the emulator records each request it answers. Here nothing local sees the requests, so
they are read where they leave: a handler on boto3's default session (every client of ours is made
on it, the functions run in this process) records each Converse and ConverseStream call's
parameters, the same JSON body the emulator records.
"""

import os
import threading
from typing import Any

import boto3

from infra.local.bedrock_emulator.recorded import RecordedRequest

OPERATIONS = {"ConverseStream": "converse-stream", "Converse": "converse"}


class BedrockRecorder:
    """Records the Bedrock Converse requests of every client made on boto3's default session after
    it is created (clients copy their session's handlers when they are made)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        session = boto3.DEFAULT_SESSION or boto3.Session()
        boto3.DEFAULT_SESSION = session  # the session every client of ours is made on
        for operation in OPERATIONS:
            session.events.register(f"provide-client-params.bedrock-runtime.{operation}", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        body = {key: value for key, value in params.items() if key != "modelId"}
        request = RecordedRequest(str(params.get("modelId", "")), OPERATIONS[model.name], body)
        with self._lock:
            self._requests.append(request)

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)


def has_credentials() -> bool:
    return boto3.Session().get_credentials() is not None


def model_endpoint(region: str) -> str:
    """Where the model's requests go, as the report states it."""
    return os.environ.get("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") or f"Amazon Bedrock ({region})"
