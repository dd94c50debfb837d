"""Per-turn figures, counted where they happen, for the console.

- DynamoDB requests and capacity units: the product's own capacity hooks
  (onboarding.persistence.capacity), on boto3's default session, the session every client of the
  local stack's functions is made from (a client copies the session's hooks when it is created, so
  `install` runs before the functions' first call); the units the table answers are summed. A
  request that got no answer at all is counted as failed.
- The exact requests the model received: the ConverseStream/Converse parameters, as botocore sends them.
- Tokens in and out: the model's own usage report (Bedrock's `metadata` event), which LangChain puts
  on each message's `usage_metadata`, collected with LangChain's `UsageMetadataCallbackHandler`.

A turn on the app's route is metered through a context variable (its asyncio tasks and threads
copy it). A text runs in the queue poller's own thread, which shares no context with the console:
while one is metered, requests made outside any metered context count towards it.
"""

import copy
import threading
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import boto3
from langchain_core.callbacks import BaseCallbackHandler, UsageMetadataCallbackHandler
from langchain_core.outputs import LLMResult
from langchain_core.tracers.context import register_configure_hook

from infra.console.schemas import DynamoDBFigures, ModelRequest, TokenFigures
from onboarding.persistence.capacity import TableAnswer, count_capacity


@dataclass
class Meter:
    """What one turn cost, as it happens."""

    by_operation: Counter[str] = field(default_factory=Counter)
    failed: int = 0
    capacity_units: float = 0.0
    without_capacity: int = 0
    model_requests: list[ModelRequest] = field(default_factory=list)
    usage: UsageMetadataCallbackHandler = field(default_factory=UsageMetadataCallbackHandler)
    model_calls: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def dynamodb(self) -> DynamoDBFigures:
        with self._lock:
            return DynamoDBFigures(
                requests=sum(self.by_operation.values()),
                by_operation=dict(self.by_operation),
                failed=self.failed,
                capacity_units=round(self.capacity_units, 2),
                requests_without_capacity=self.without_capacity,
            )

    def tokens(self) -> TokenFigures:
        totals = list(self.usage.usage_metadata.values())
        return TokenFigures(
            input=sum(usage["input_tokens"] for usage in totals),
            output=sum(usage["output_tokens"] for usage in totals),
            model_calls=self.model_calls,
        )

    def _answered(self, answer: TableAnswer) -> None:
        with self._lock:
            self.by_operation[answer.operation] += 1
            if answer.units is None:
                self.without_capacity += 1
            else:
                self.capacity_units += answer.units

    def _failed(self, operation: str) -> None:
        with self._lock:
            self.by_operation[operation] += 1
            self.failed += 1


_current: ContextVar[Meter | None] = ContextVar("console_meter", default=None)
_ambient: list[Meter] = []
_ambient_lock = threading.Lock()


def _meters() -> list[Meter]:
    current = _current.get()
    if current is not None:
        return [current]
    with _ambient_lock:
        return list(_ambient)


@contextmanager
def metered(meter: Meter) -> Iterator[Meter]:
    """Count what runs in this context (and the tasks and threads it starts) towards `meter`."""
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


@contextmanager
def metered_elsewhere(meter: Meter) -> Iterator[Meter]:
    """Count what runs outside any metered context (the queue poller's thread) towards `meter`."""
    with _ambient_lock:
        _ambient.append(meter)
    try:
        yield meter
    finally:
        with _ambient_lock:
            _ambient.remove(meter)


def _answered(answer: TableAnswer) -> None:
    for meter in _meters():
        meter._answered(answer)


def _after_error(context: dict[str, Any] | None = None, **kwargs: Any) -> None:
    # botocore names the operation in the event only; the handler receives the event name.
    operation = str(kwargs.get("event_name", "")).rsplit(".", 1)[-1]
    for meter in _meters():
        meter._failed(operation)


def _model_request(params: dict[str, Any], model: Any, **_: Any) -> None:
    meters = _meters()
    if not meters:
        return
    request = ModelRequest(
        operation=model.name,
        system="\n\n".join(block.get("text", "") for block in params.get("system", [])),
        messages=copy.deepcopy(list(params.get("messages", []))),
        tools=[
            tool["toolSpec"]["name"] for tool in params.get("toolConfig", {}).get("tools", []) if "toolSpec" in tool
        ],
    )
    for meter in meters:
        with meter._lock:
            meter.model_requests.append(request)


class _UsageRouter(BaseCallbackHandler):
    """Hands each finished model call to the meters counting it."""

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        for meter in _meters():
            meter.usage.on_llm_end(response, **kwargs)
            with meter._lock:
                meter.model_calls += 1


# Its default is the router itself, so every LangChain run in the process gets it, in any thread;
# it does nothing while no turn is metered.
_usage_router: ContextVar[BaseCallbackHandler | None] = ContextVar(
    "console_usage",
    default=_UsageRouter(),  # noqa: B039 - stateless, shared by every context on purpose
)
_installed = threading.Lock()
_hooked_sessions: "weakref.WeakSet[boto3.Session]" = weakref.WeakSet()
_langchain_hooked = threading.Event()


def install() -> None:
    """Hook the default boto3 session and LangChain (once each). Call before the functions' clients exist."""
    with _installed:
        if not _langchain_hooked.is_set():
            register_configure_hook(_usage_router, inheritable=True)
            _langchain_hooked.set()
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        session = boto3.DEFAULT_SESSION
        if session is None or session in _hooked_sessions:
            return
        _hooked_sessions.add(session)
        events = session.events
        count_capacity(events, _answered, "console-capacity")
        events.register("after-call-error.dynamodb", _after_error, unique_id="console-after-error")
        for operation in ("ConverseStream", "Converse"):
            events.register(
                f"before-parameter-build.bedrock-runtime.{operation}",
                _model_request,
                unique_id=f"console-model-{operation}",
            )
