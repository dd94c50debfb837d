"""Owns SnapStart: what the snapshot is primed with, and what each restored copy renews.

Before the snapshot (`Primer.prime`): one offline turn through a `TurnService` of its own (a
breaker of its own, so the live one is never touched) over the very clients the function uses,
with every request they make answered in process, at botocore's `before-send`: nothing reaches
the table or the model, and no connection is opened. It builds what a first call would otherwise
build: botocore's operation models, endpoint rules and parsers, LangChain's lazy imports and
stream plumbing, each step's tool schemas and their Converse form, pydantic's validators. It never
goes through the SSM parameter cache or the idempotency store (what they hold would be shared by
every restored copy), and emits no metric (a primed turn is not a turn anyone had).

After a restore (`Primer.renew`): reseed `random` (botocore's and tenacity's retry jitter draw on
it, and every restored copy would otherwise draw the same numbers), close the clients' pooled
connections (none should be there, but one made by init would be dead), and refresh credentials
that expired while the snapshot was stored. Ids come from `secrets`/`uuid4` (the OS) already.

The mobile API gets both over HTTP from Lambda Web Adapter (its hook routes call these); the SMS
worker, which runs no adapter, through the runtime's `snapshot_restore_py` (`register_runtime_hooks`).
See docs/decisions/0016-snapstart-priming.md.
"""

import asyncio
import json
import os
import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import boto3
from aws_lambda_powertools import Logger
from botocore.awsrequest import AWSResponse, HTTPHeaders

from onboarding.config import Settings
from onboarding.llm.event_stream import encode_event
from onboarding.llm.tools import tool_definitions
from onboarding.model.state import OnboardingAgentType

if TYPE_CHECKING:
    from botocore.client import BaseClient
    from langchain_core.language_models import BaseChatModel

    from onboarding.turn.service import TurnService

logger = Logger(child=True)

METRICS_DISABLED = "POWERTOOLS_METRICS_DISABLED"  # Powertools' switch (aws_lambda_powertools.metrics)

PRIMING_USER = "snapstart-priming"
_HANDLER_ID = "onboarding-snapstart-priming"


def _model_answer(call: int) -> bytes:
    """The offline model's stream: in each turn first a tool call (so the tool path is primed too), then text."""
    events: list[tuple[str, dict[str, Any]]]
    if call % 2 == 0:
        block: dict[str, Any] = {"contentBlockIndex": 0}
        events = [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockStart", block | {"start": {"toolUse": {"toolUseId": "prime-1", "name": "remember_fact"}}}),
            ("contentBlockDelta", block | {"delta": {"toolUse": {"input": '{"kind": "name", "value": "Sam"}'}}}),
            ("contentBlockStop", block),
            ("messageStop", {"stopReason": "tool_use"}),
        ]
    else:
        events = [
            ("messageStart", {"role": "assistant"}),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Nice to meet you, Sam."}}),
            ("contentBlockStop", {"contentBlockIndex": 0}),
            ("messageStop", {"stopReason": "end_turn"}),
        ]
    usage: dict[str, Any] = {
        "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
        "metrics": {"latencyMs": 1},
    }
    return b"".join(encode_event(name, payload) for name, payload in [*events, ("metadata", usage)])


class _Raw:
    """What botocore reads a response body from (`stream()`), held in memory."""

    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body

    def close(self) -> None:
        """Nothing to release: the body is in memory."""


class _InProcessAnswers:
    """Answers every request of the clients it is attached to, as an empty table and a scripted model."""

    def __init__(self, dimensions: int) -> None:
        self.model_calls = 0
        self.table_calls = 0
        self._dimensions = dimensions

    def __call__(self, request: Any, **_: Any) -> AWSResponse:
        target = request.headers.get("X-Amz-Target") or ""
        target = target.decode() if isinstance(target, bytes) else str(target)
        if "converse-stream" in request.url:
            body, content_type = _model_answer(self.model_calls), "application/vnd.amazon.eventstream"
            self.model_calls += 1
        elif request.url.endswith("/invoke"):  # the embedding model: a unit vector
            embedding = [1.0] + [0.0] * (self._dimensions - 1)
            body, content_type = (
                json.dumps({"embedding": embedding, "inputTextTokenCount": 1}).encode(),
                "application/json",
            )
        elif request.url.endswith("/QueryVectors"):  # the recall index: nothing found
            body, content_type = json.dumps({"vectors": [], "distanceMetric": "cosine"}).encode(), "application/json"
        else:
            operation = target.rpartition(".")[2]
            answer: dict[str, Any] = {"Items": [], "Count": 0, "ScannedCount": 0} if operation == "Query" else {}
            body, content_type = json.dumps(answer).encode(), "application/x-amz-json-1.0"
            self.table_calls += 1
        headers = HTTPHeaders()
        headers["Content-Type"], headers["x-amzn-RequestId"] = content_type, "snapstart-priming"
        return AWSResponse(request.url, 200, headers, _Raw(body))


@contextmanager
def _answered_in_process(clients: Sequence["BaseClient"], dimensions: int) -> Iterator[_InProcessAnswers]:
    answers = _InProcessAnswers(dimensions)
    # A `before-send` handler that returns a response stands in for the network (botocore's own
    # hook for this). Registered per service, so it runs ahead of any handler for every service.
    events = [(client, f"before-send.{client.meta.service_model.service_id.hyphenize()}") for client in clients]
    for client, event in events:
        client.meta.events.register_first(event, answers, unique_id=_HANDLER_ID)  # type: ignore[arg-type]
    try:
        yield answers
    finally:
        for client, event in events:
            client.meta.events.unregister(event, unique_id=_HANDLER_ID)


@contextmanager
def _metrics_off() -> Iterator[None]:
    """The primed turn's metrics are dropped, by Powertools' own switch: its metrics read
    POWERTOOLS_METRICS_DISABLED at every flush (onboarding/metrics.py flushes each at once). The
    switch is the process's environment, so it is set only meanwhile and then put back as it was;
    nothing else runs before a snapshot, so nothing else is silenced."""
    before = os.environ.get(METRICS_DISABLED)
    os.environ[METRICS_DISABLED] = "true"
    try:
        yield
    finally:
        if before is None:
            del os.environ[METRICS_DISABLED]
        else:
            os.environ[METRICS_DISABLED] = before


class Primer:
    """Primes a function's turn machinery before the snapshot and renews it after each restore."""

    def __init__(
        self,
        settings: Settings,
        llm: "BaseChatModel",
        clients: Sequence["BaseClient"],
        build_service: Callable[[Settings], "TurnService"],
        also: Callable[[], None] | None = None,
    ) -> None:
        """`build_service`: a turn service over the function's own repositories, model and recall
        (whose clients are among `clients`, so answered in process too), for the settings given.
        Passed in by the composition root, so this module never imports it back."""
        self._settings = settings
        self._llm = llm
        self._clients = tuple(clients)
        self._build_service = build_service
        self._also = also  # what else a first call would build (the worker: Twilio's message API)

    def _offline_service(self) -> "TurnService":
        # A breaker of its own: the live service's is never touched. The default flags, from no
        # store: AppConfig is not asked before the snapshot (a session started then would be
        # shared by every restored copy, and expire while the snapshot is stored).
        offline = self._settings.model_copy(
            update={"rate_limit_messages": 0, "feature_flags_application": None, "feature_flags_file": None}
        )
        return self._build_service(offline)

    async def prime(self) -> None:
        """Build what a first call would, answering every request in process. Never raises: a
        snapshot without priming is only slower on its first call."""
        try:
            self._prime_tool_schemas()
            with _answered_in_process(self._clients, self._settings.embedding_dimensions) as answers, _metrics_off():
                service = self._offline_service()
                for client_id in (None, "snapstart-priming-1"):  # the app's path and the SMS path
                    turn = await service.start_turn(PRIMING_USER, "Hi, my name is Sam", client_id)
                    await turn.collect()
                if self._also is not None:
                    self._also()
            logger.info("Primed for the snapshot", extra={"model_calls": answers.model_calls})
        except Exception:
            logger.exception("Priming failed; the snapshot is taken unprimed")

    def _prime_tool_schemas(self) -> None:
        for step in OnboardingAgentType:
            for complete in (False, True):
                self._llm.bind_tools(list(tool_definitions(step, complete)))

    def prime_sync(self) -> None:
        """`prime` for a caller without an event loop (the runtime's before-snapshot hook)."""
        asyncio.run(self.prime())

    def renew(self) -> None:
        """What must not be shared by restored copies: random state, connections, credentials."""
        random.seed()  # from os.urandom: each restored copy draws its own jitter
        for client in self._clients:
            client.close()  # pooled connections captured in the snapshot would be dead; new ones are made
        session = boto3.DEFAULT_SESSION
        credentials = session.get_credentials() if session is not None else None
        if credentials is not None:
            credentials.get_frozen_credentials()  # refreshes credentials that expired while stored
        logger.info("Renewed after restore")


def register_runtime_hooks(primer: Primer) -> bool:
    """Hand the primer to the Python runtime's SnapStart hooks, where the runtime has them (it does
    in Lambda's managed runtime; locally the module is absent and nothing is registered)."""
    try:
        from snapshot_restore_py import (  # type: ignore[import-not-found]
            register_after_restore,
            register_before_snapshot,
        )
    except ImportError:
        return False
    register_before_snapshot(primer.prime_sync)
    register_after_restore(primer.renew)
    return True
